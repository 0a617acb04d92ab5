"""Step 4 of the search (loaderbench.tune.search): confirming the best screened setting on repetitions, as a mixin of
`ScenarioSearch`, which gives it `evidence`, `opt`, `rungs`, `cap`, `out` and `_observe`, `_note`, `_label`.

Successive halving on repetitions: first the better half of the screens within twice the reach of the best get a
second repetition (`_second_look`, when that half is more than the best alone); then, of the usable candidates
within `reach` of the best median, the best (and, with `finalists` 2 or more, the cheapest, then the runner-up) are
brought to the full repetitions, interleaved. Each is compared with the one of highest median on the
distribution-free interval of their ratio (loaderbench.stats.comparison.compare at `confidence`): shown slower by
more than the
margin, it is dropped. Finalists not yet separated get the extra rung's repetitions, when there is one. Then, with
the spread of one repetition now known (pooled over every candidate measured more than once, shrunk towards `reach`
/ 2 and at most that), the other candidate of highest median that could still beat the highest median by more than
the margin (within `LATE_Z` of that spread, for the repetitions it has) gets one more repetition at a time while it
still could, the others weighed again after it, and one that reaches the full repetitions that way is compared like
a finalist: the best screen read high by chance and regresses when confirmed, and a screen that read low by chance
must not lose the answer. The search stops when one finalist is left ("separated" when the others were shown
slower, "out of reach" when none other reached the final rung), when every one left is shown within the margin of
the highest ("within margin"), or when the rungs are spent ("not separated").
"""

from __future__ import annotations

import math

import numpy as np

from loaderbench.stats.comparison import compare
from loaderbench.stats.verdicts import EQUIVALENT, SLOWER
from loaderbench.tune.evidence import Evidence
from loaderbench.tune.outcome import NO_USABLE, NOT_SEPARATED, ONE_CANDIDATE, OUT_OF_REACH, SEPARATED, WITHIN_MARGIN

#: a screened candidate that this many standard deviations of one repetition would put more than the margin
#: above the highest median is confirmed too, however far the reach put it. At 1, a setting truly better by
#: the margin is taken up about as often as the grid's 3 v 3 medians would rank it first (5 times in 6 at 5%
#: noise per repetition); at 2, on synthetic plateaus, 2-10 points more often than at 0, for 30-40% more
#: measurements
LATE_Z = 1.0
#: the second look (`_second_look`) is for the better half of the candidates whose screen came within this many
#: times the reach of the best screen: one repetition here scatters by more than the reach on a busy day
SECOND_LOOK_BAND = 2.0
#: degrees of freedom the prior spread of one repetition (the reach over 2) counts for in `_noise`
PRIOR_DF = 2


class Confirmation:
    """Finalists to their repetitions, the second look before them and the late rule after them."""

    def _finalists(self) -> list[Evidence]:
        usable = [e for e in self.evidence.values() if e.usable(self.cap)]
        if not usable:
            return []
        top = highest(usable)
        reach = [e for e in usable if e.median >= (1 - self.opt.reach) * top.median]
        cheapest = min(reach, key=Evidence.cheapness)
        ordered = [top, cheapest] + sorted(reach, key=lambda e: -e.median)
        out: list[Evidence] = []
        for e in ordered:
            if e not in out:
                out.append(e)
        return out[: self.opt.finalists]

    def _rungs(self, finalists: list[Evidence]) -> bool:
        """Bring the finalists through the rungs; False when every finalist turned out unusable."""
        for i, reps in enumerate(self.rungs):
            for rep in range(reps):  # interleaved: every finalist's repetition r before anyone's r + 1
                for e in finalists:
                    if e.n <= rep and not e.failed:
                        self._observe(e.candidate, "confirm", f"finalist, rung {i + 1}: {reps} repetitions")
            finalists = [e for e in finalists if e.usable(self.cap)]
            if not finalists:
                return False
            top = highest(finalists)
            self.out.comparisons.pop(top.candidate.key, None)  # compared in an earlier rung, when it was not top
            kept = [top]
            for e in finalists:
                if e is top:
                    continue
                cmp = compare(top.values, e.values, min_effect=self.opt.margin, confidence=self.opt.confidence)
                self.out.comparisons[e.candidate.key] = cmp
                if cmp.verdict == SLOWER:
                    self._note(
                        "confirm",
                        self._label(e.candidate),
                        f"dropped: shown slower than {self._label(top.candidate)} by more than the margin "
                        f"({cmp.interval_text()})",
                    )
                else:
                    kept.append(e)
            finalists = kept
            self.out.highest = top
            if len(finalists) == 1:
                usable = sum(e.usable(self.cap) for e in self.evidence.values())
                self.out.stop = ONE_CANDIDATE if usable == 1 else SEPARATED if self.out.comparisons else OUT_OF_REACH
                break
            if all(self.out.comparisons[e.candidate.key].verdict == EQUIVALENT for e in finalists[1:]):
                self.out.stop = WITHIN_MARGIN
                break
        else:
            self.out.stop = NOT_SEPARATED
        self.out.finalists = finalists
        if self.out.stop == WITHIN_MARGIN:  # shown the same within the margin: the cheapest wins
            self.out.answer = min(finalists, key=Evidence.cheapness)
        else:
            self.out.answer = self.out.highest
        return True

    def _noise(self) -> float:
        """One repetition's spread: the pooled standard deviation of log values over every candidate with two
        or more ok repetitions, shrunk towards the prior spread (`reach` / 2, the option's "one repetition
        varies by about this much") as if that prior were `PRIOR_DF` more degrees of freedom, and at most the
        prior. Shrunk: three tight repetitions of one setting (2 degrees of freedom) say little of how far
        another setting's single screen may have read low. At most the prior: a wider spread comes from the
        one-sided low outliers of a shared machine (one repetition 15-40% low), which a rule for symmetric
        scatter cannot tell from a better setting, and with it every setting of a plateau would be measured
        again."""
        prior = self.opt.reach / 2
        ss, df = PRIOR_DF * prior**2, float(PRIOR_DF)
        for e in self.evidence.values():
            if len(e.values) >= 2 and not e.failed:
                logs = np.log(e.values)
                ss += float(((logs - logs.mean()) ** 2).sum())
                df += len(logs) - 1
        return min(prior, math.sqrt(ss / df))

    def _late(self, reps: int) -> list[Evidence]:
        """Usable candidates short of the final repetitions that may still beat the highest median by more than
        the margin, given the noise of one repetition and how many each has: a screen repetition that read low
        by chance (out of reach, or past the finalists' number). One that can only be as good is not worth its
        repetitions."""
        top = self.out.highest
        noise = self._noise()
        target = math.log(top.median * (1 + self.opt.margin))
        return [
            e
            for e in self.evidence.values()
            if e.usable(self.cap)
            and e.n < reps
            and math.log(e.median) + LATE_Z * noise * math.sqrt(1 / e.n + 1 / top.n) >= target
        ]

    def _climb_late(self, reps: int) -> list[Evidence]:
        """Successive halving for the late candidates: one more repetition for the one of highest median, while
        it may still beat the highest by more than the margin, the others weighed again after it; returns it
        once it reached the final repetitions that way (to be compared like a finalist), [] when none is left
        that may. One at a time: on a plateau several may, and the likeliest decides whether the rest still do."""
        while True:
            late = self._late(reps)
            if not late:
                return []
            e = max(late, key=lambda x: (x.median, -x.n))
            self._note(
                "confirm",
                self._label(e.candidate),
                f"may beat the highest by more than the margin within {LATE_Z:g} x the spread of one "
                f"repetition ({self._noise():.1%}) for its repetitions ({len(late)} may, the highest median "
                "first): one more",
            )
            self._observe(e.candidate, "confirm", f"may beat the highest: repetition {e.n + 1} of up to {reps}")
            if e.n >= reps and e.usable(self.cap):
                return [e]

    def _second_look(self) -> None:
        """Successive halving's first rung, before any candidate is confirmed: of the usable candidates whose
        median came within `SECOND_LOOK_BAND` x `reach` of the best, the better half (the best included) get a
        second repetition each. On a plateau one repetition scatters by as much as the settings on it differ
        (5-25% on a shared VM), so the best single screen is often not the best setting, and a setting truly
        better by the margin that screened low would stay at one repetition, out of the late rule's reach."""
        if self.rungs[0] < 3:
            return
        usable = [e for e in self.evidence.values() if e.usable(self.cap)]
        if len(usable) < 2:
            return
        floor = (1 - SECOND_LOOK_BAND * self.opt.reach) * max(e.median for e in usable)
        band = sorted((e for e in usable if e.median >= floor), key=lambda e: (-e.median, e.cheapness()))
        half = band[: math.ceil(len(band) / 2)]
        if len(half) < 2:  # the best alone: the confirm step gives it its repetitions
            return
        for e in half:
            if e.n < 2:
                self._observe(
                    e.candidate,
                    "confirm",
                    f"in the better half of the {len(band)} screens within "
                    f"{SECOND_LOOK_BAND * self.opt.reach:.0%} of the best: a "
                    "second repetition",
                )

    def _confirm(self) -> None:
        pool = self._finalists()
        while pool:
            if not self._rungs(pool):
                pool = self._finalists()  # every finalist failed or went over the cap later: pick again
                continue
            grown = self._climb_late(self.rungs[0])
            if not grown:
                return
            pool = self.out.finalists + grown
        self.out.stop = NO_USABLE


def highest(evidence: list[Evidence]) -> Evidence:
    """The highest median; the cheaper on a tie."""
    return min(evidence, key=lambda e: (-e.median, e.cheapness()))
