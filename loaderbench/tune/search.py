"""The search of one scenario: which setting gives the most throughput, measured as little as it can be.

Throughput against num_workers rises to about the core count, then plateaus or falls, and n workers give at
most n times what one gives (the linear ceiling); the other settings (prefetch_factor, persistent_workers,
start_method...) usually shift that curve a little, sometimes a lot. So the search, with every measurement
one repetition of one candidate through `measure`:

1. screen: the ends of the listed num_workers (and 1 worker where a training step in the loop keeps the
   main process from standing for one worker), one repetition each, the other settings at their base (the
   axis default where listed). The ends fix the band (within `margin` of the best) and the one-process rate
   the ceiling: a listed num_workers n whose ceiling, n x that rate x (1 + `reach`), stays below the band
   cannot reach it and is never measured. With a memory cap the screen climbs a geometric subset instead
   (0, 1, 2, 4, ...) and stops at the first num_workers over the cap: memory grows with workers. On one core
   (one rank, the main process standing for a worker), 0 workers that keep the core busy to within the
   margin leave workers nothing to win (`_busy_core`): no setting with workers is measured, not even the far
   end.
2. refine, guided by the curve's shape and the ceiling, until nothing is left to measure. Never 1 worker where
   the main process stands for a worker and 0 workers is measured: it does 0's loading plus the transfer
   between processes, for a process more, so it cannot be the answer.
   - knee: of the listed values between the cheapest in-band num_workers and the measured one below it,
     the fewest workers the ceiling lets reach the band (the scaling model's knee) is measured; without a
     ceiling (neither 0 nor 1 worker listed), the middle one (bisection);
   - peak: where a measured neighbour of the best is below the band or missing, the listed value next to
     the best on that side is measured (hill climbing); where it is in the band, the values between are
     taken to be on the plateau and are not measured, once the plateau is no wider than `PLATEAU_SPAN`
     (wider, the value nearest its geometric middle is measured first). The same from every other in-band
     value, the best first: a screen that read low can split one plateau into two apparent peaks, and the
     gap beside the lesser one may hold the best.
   - scaling: where the best (2 workers or more) reads at its linear ceiling (at least 1 - `reach` of n x
     the one-process rate), nothing bounds the loader yet and more workers should give more: the listed value
     next above it, while its median reads below the best, gets one more repetition, up to the final
     repetitions. One repetition now and then reads 15-40% low on a shared machine, and that one low reading
     would end the climb below the best. Not where the best is within the core count and the next value past
     it: a CPU-bound loader scales linearly up to the cores and no further.
   - cores: where 0 workers read best, the listed value nearest one worker per core (of the scenario's
     `cores` over its `ranks`) is measured once: the main process loads without the transfer between
     processes, so 0 beating the fewest workers says nothing of more, and with the far end oversubscribed
     (or read low) hill climbing from 0 would never look between them.
3. axes: at the best num_workers, every other listed value of every other setting axis, one repetition
   each. A value better than the incumbent by more than the margin replaces it, and steps 2-3 run once
   more under the new incumbent; values within the margin keep the incumbent (the axis is not shown to
   matter by the screen).
4. confirm (successive halving on repetitions): loaderbench.tune.confirm.

The answer is the finalist of highest median; when every finalist left is shown within the margin of it,
the cheapest of them instead (fewest workers, then least memory, then fewest non-default settings). A
candidate with a failed repetition, or over the memory cap, is never an answer.

Pure: the search decides only from what `measure` returns, so the same observations give the same path
(resuming from records replays it exactly), and tests drive it with synthetic throughput surfaces.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from loaderbench.tune.confirm import Confirmation
from loaderbench.tune.evidence import Evidence, Measure
from loaderbench.tune.options import TuneOptions
from loaderbench.tune.outcome import AxisDecision, ScenarioOutcome, Step
from loaderbench.tune.space import Candidate, Scenario

#: times steps 2-3 run: once, and once more when step 3 changed a setting
MAX_PASSES = 2
#: two in-band num_workers further apart than this factor (in workers + 1) are not taken to bound a plateau
#: until the one nearest their geometric middle is measured too: a hump between them would be missed
PLATEAU_SPAN = 1.5


def one_process_rate(medians: dict[int, float], main_process_is_a_worker: bool) -> float | None:
    """What one loading process gives, from the medians per num_workers: 1 worker's, or the main process's at 0
    workers when it stands for a worker (the higher of the two when both are measured); None when neither is.
    n workers give at most n times this (the linear ceiling)."""
    rates = [medians[n] for n in (0, 1) if n in medians and (n == 1 or main_process_is_a_worker)]
    rates = [r for r in rates if math.isfinite(r)]
    return max(rates) if rates else None


def geometric_subset(values: tuple[int, ...] | list[int]) -> list[int]:
    """The listed num_workers nearest (on a log scale) to 0, 1, 2, 4, ... up to the largest, ends included."""
    vals = sorted(set(values))
    top = vals[-1]
    targets = [0] + [2**i for i in range(math.ceil(math.log2(top)) + 1 if top > 0 else 0)]
    picks = {vals[0], top}
    for t in targets:
        picks.add(min(vals, key=lambda v: (abs(math.log2(v + 1) - math.log2(t + 1)), v)))
    return sorted(picks)


class ScenarioSearch(Confirmation):
    """Runs steps 1-4 on one scenario; `run()` returns the outcome."""

    def __init__(
        self,
        scenario: Scenario,
        measure: Measure,
        options: TuneOptions,
        rungs: tuple[int, ...],
        on_step: Callable[[Scenario, Step], None] | None = None,
    ):
        self.s, self.measure, self.opt, self.rungs, self.on_step = scenario, measure, options, rungs, on_step
        self.cap = options.max_memory_bytes
        self.evidence: dict[str, Evidence] = {}
        self.steps: list[Step] = []
        self.out = ScenarioOutcome(scenario, self.evidence, self.steps)

    # --- measuring ---------------------------------------------------------------------------------------

    def _ev(self, c: Candidate) -> Evidence:
        return self.evidence.setdefault(c.key, Evidence(c))

    def _observe(self, c: Candidate, phase: str, note: str) -> Evidence:
        e = self._ev(c)
        obs = self.measure(c, e.n)
        e.observations.append(obs)
        value = obs.value if obs.ok else None
        if obs.reused:
            note = f"{note} (read from its record)"
        if not obs.ok:
            note = f"{note}; {obs.status}: {obs.error or 'no value'}"
        elif e.over_cap(self.cap):
            note = f"{note}; over the memory cap ({e.memory / 2**20:.0f} MiB)"
        self._step(Step(phase, self._label(c), e.n - 1, value, note))
        return e

    def _screened(self, c: Candidate, phase: str, note: str) -> Evidence:
        e = self._ev(c)
        return e if e.n else self._observe(c, phase, note)

    def _note(self, phase: str, candidate: str, note: str) -> None:
        self._step(Step(phase, candidate, None, None, note))

    def _step(self, step: Step) -> None:
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(self.s, step)

    def _label(self, c: Candidate) -> str:
        return c.label(self.s.values)

    def _value(self, e: Evidence | None) -> float:
        return e.median if e is not None and e.usable(self.cap) else math.nan

    # --- num_workers under an assignment of the other settings -------------------------------------------

    def _at(self, inc: dict, n: int) -> Candidate | None:
        return self.s.find({**inc, "num_workers": n})

    def _curve(self, inc: dict) -> dict[int, Evidence]:
        """Every measured num_workers under `inc` (usable or not)."""
        out = {}
        for n in self.s.workers:
            c = self._at(inc, n)
            if c is not None and c.key in self.evidence and self.evidence[c.key].n:
                out[n] = self.evidence[c.key]
        return out

    def _listed(self, inc: dict) -> list[int]:
        """num_workers values with a cell under `inc`, below the first one seen over the memory cap, less 1 worker
        where 0 workers dominates it (`_dominated`)."""
        curve = self._curve(inc)
        over = [n for n, e in curve.items() if e.over_cap(self.cap)]
        limit = min(over) if over else math.inf
        busy = self._busy_core(curve) is not None
        return [
            n
            for n in self.s.workers
            if n < limit and self._at(inc, n) is not None and not self._dominated(curve, n) and not (busy and n > 0)
        ]

    def _dominated(self, curve: dict[int, Evidence], n: int) -> bool:
        """Whether n is 1 worker where the main process stands for a worker and 0 workers is measured: one worker
        does the same loading in one process plus the transfer between processes, so it gives at most what 0
        gives, for a process more, and cannot be the answer; refining never measures it."""
        return n == 1 and self.s.main_process_is_a_worker and 0 in curve and curve[0].usable(self.cap)

    def _busy_core(self, curve: dict[int, Evidence]) -> float | None:
        """The share of its one core that 0 workers kept busy, when that leaves workers nothing to win; else None.
        On one core (one rank), with the main process standing for a worker, n workers have that core's cycles
        and no more, and need at least the main process's CPU per sample (the same loading, plus the transfer
        between processes): they give at most 1 / busy times what 0 workers give. At a busy share of at least
        1 / (1 + margin) that is within the margin, and 0 workers is cheaper, so no setting with workers can be
        the answer and none is measured. A ratio of one repetition's own CPU and wall time: a machine slowed
        by its neighbours slows both alike. Not on more cores: a main process may keep several busy with torch's
        threads while loading no faster, and workers, one thread each, load more per CPU second there."""
        ctx = dict(self.s.context)
        e = curve.get(0)
        if (
            not self.s.main_process_is_a_worker
            or ctx.get("cores") != 1
            or int(ctx.get("ranks") or 1) != 1
            or e is None
            or not e.usable(self.cap)
            or e.cpu_busy is None
        ):
            return None
        return e.cpu_busy if e.cpu_busy * (1 + self.opt.margin) >= 1 else None

    def _best(self, curve: dict[int, Evidence]) -> tuple[int, float] | None:
        usable = [(n, self._value(e)) for n, e in curve.items() if e.usable(self.cap)]
        if not usable:
            return None
        return max(usable, key=lambda nv: (nv[1], -nv[0]))

    def _screen_points(self) -> list[int]:
        """The ends of the listed num_workers, and 1 worker where the main process does not stand for one (a
        training step in the loop) or 0 is not listed; with a memory cap, the geometric subset, climbed."""
        workers = list(self.s.workers)
        if self.cap is not None:
            return geometric_subset(workers)
        points = {workers[0], workers[-1]}
        if 1 in workers and (workers[0] != 0 or not self.s.main_process_is_a_worker):
            points.add(1)
        return sorted(points)

    def _screen(self, inc: dict) -> None:
        note = (
            "geometric subset of num_workers (memory cap)"
            if self.cap is not None
            else "the ends of num_workers"
            + ("" if self.s.main_process_is_a_worker else ", and one worker (a training step in the loop)")
        )
        for n in self._screen_points():
            c = self._at(inc, n)
            if c is None:
                continue
            busy = self._busy_core(self._curve(inc))
            if n > 0 and busy is not None:
                self._note(
                    "screen",
                    "num_workers>0",
                    f"not screened: 0 workers kept the one core {busy:.0%} busy, so "
                    f"workers can give at most {1 / busy:.2f}x of it, within the "
                    "margin, for more processes",
                )
                break
            e = self._screened(c, "screen", note)
            if e.over_cap(self.cap):
                self._note(
                    "screen",
                    self._label(c),
                    f"num_workers above {n} not screened: over the memory cap at {n}, and memory grows with workers",
                )
                break

    def _one_process_rate(self, curve: dict[int, Evidence]) -> float | None:
        return one_process_rate(
            {n: self._value(e) for n, e in curve.items() if e.usable(self.cap)}, self.s.main_process_is_a_worker
        )

    def _reachable(self, curve: dict[int, Evidence], n: int, band: float) -> bool:
        """Whether n workers could reach the band under the linear ceiling (n x the one-process rate, with the
        reach's room for the noise of the one repetition that rate rests on)."""
        rate = self._one_process_rate(curve)
        return rate is None or n == 0 or n * rate * (1 + self.opt.reach) >= band

    def _peak(self, inc: dict) -> bool:
        """Hill climbing from every in-band num_workers, the best first: measure the listed value next to it on
        a side whose measured neighbour is below the band (one the ceiling lets reach it). Not from the best
        alone: a screen that read low can make a lesser in-band value look like a separate peak, and the gap
        next to it may hold the best."""
        curve = self._curve(inc)
        best = self._best(curve)
        if best is None:
            return False
        band = (1 - self.opt.margin) * best[1]
        listed = self._listed(inc)
        peaks = sorted(
            (n for n, e in curve.items() if e.usable(self.cap) and self._value(e) >= band),
            key=lambda n: (-self._value(curve[n]), n),
        )
        for b in peaks:
            for side in (-1, 1):
                measured = [n for n in curve if (n - b) * side > 0]
                nearest = (max if side < 0 else min)(measured) if measured else None
                if nearest is not None and self._value(curve[nearest]) >= band:
                    inner = [n for n in listed if (n - b) * side > 0 and (nearest - n) * side > 0]
                    if inner and (max(b, nearest) + 1) / (min(b, nearest) + 1) > PLATEAU_SPAN:
                        mid = (math.log(b + 1) + math.log(nearest + 1)) / 2
                        n = min(inner, key=lambda v: (abs(math.log(v + 1) - mid), v))
                        self._observe(
                            self._at(inc, n),
                            "refine",
                            f"probing the plateau between {min(b, nearest)} "
                            f"and {max(b, nearest)} workers, wider than "
                            f"{PLATEAU_SPAN:g}x",
                        )
                        return True
                    continue  # both ends on a short plateau: the values between are taken to be on it too
                gap = [
                    n
                    for n in listed
                    if (n - b) * side > 0
                    and (nearest is None or (nearest - n) * side > 0)
                    and self._reachable(curve, n, band)
                ]
                if gap:
                    n = (max if side < 0 else min)(gap)
                    which = "the best" if b == best[0] else "an in-band value"
                    self._observe(
                        self._at(inc, n),
                        "refine",
                        f"next to {which} ({b} workers), towards {'fewer' if side < 0 else 'more'} workers",
                    )
                    return True
        return False

    def _knee(self, inc: dict) -> bool:
        """Measure towards the fewest workers within the margin: between the cheapest in-band num_workers and
        the measured one below it, the fewest the ceiling lets reach the band (bisection without a ceiling)."""
        curve = self._curve(inc)
        best = self._best(curve)
        if best is None:
            return False
        band = (1 - self.opt.margin) * best[1]
        k = min(n for n, e in curve.items() if e.usable(self.cap) and self._value(e) >= band)
        below = [n for n in curve if n < k]
        between = [
            n for n in self._listed(inc) if n < k and (not below or n > max(below)) and self._reachable(curve, n, band)
        ]
        if not between:
            return False
        if not below or self._one_process_rate(curve) is not None:
            n, why = (
                between[0],
                (f"the fewest workers whose ceiling reaches the band below the cheapest within the margin ({k})"),
            )
        else:
            n, why = (
                between[(len(between) - 1) // 2],
                (f"bisecting {max(below)}..{k} workers for the fewest within the margin"),
            )
        self._observe(self._at(inc, n), "refine", why)
        return True

    def _scaling(self, inc: dict) -> bool:
        """Where the best (2 workers or more: 1 worker's own rate may be the one-process rate) reads at its
        linear ceiling (at least 1 - reach of n x the one-process rate), measure the listed num_workers next
        above it once more while its median reads below the best, up to the final repetitions: a loader still
        scaling with workers should give more with more, so that reading more likely read low (15-40% low now
        and then on a shared machine) than found the top of the curve, and a median of three is the first that
        one low repetition cannot move. Not where the best is within the core count and the next value past
        it: a CPU-bound loader scales linearly up to the cores and no further."""
        curve = self._curve(inc)
        best = self._best(curve)
        rate = self._one_process_rate(curve)
        if best is None or rate is None or best[0] < 2 or best[1] < (1 - self.opt.reach) * best[0] * rate:
            return False
        above = [n for n in self._listed(inc) if n > best[0]]
        if not above or above[0] not in curve or best[0] <= self._cores() < above[0]:
            return False
        e = curve[above[0]]
        if e.n >= self.rungs[0] or not e.usable(self.cap) or self._value(e) >= best[1]:
            return False
        self._observe(
            e.candidate,
            "refine",
            f"{best[0]} workers read at their linear ceiling ({best[0]} x "
            f"{rate:,.0f}), so more should give more: one more repetition",
        )
        return True

    def _cores(self) -> int:
        """The cores one rank of the scenario has (the `cores` axis over `ranks`)."""
        ctx = dict(self.s.context)
        return max(1, int(ctx.get("cores") or 1) // max(1, int(ctx.get("ranks") or 1)))

    def _at_cores(self, inc: dict) -> bool:
        """Where 0 workers read best, measure the listed num_workers (2 or more) nearest the core count, once:
        loading in the main process has no transfer between processes, so 0 beating 1 worker says nothing of
        more workers, and the scaling model puts a CPU-bound loader's peak at about one worker per core."""
        curve = self._curve(inc)
        best = self._best(curve)
        cores = self._cores()
        if best is None or best[0] != 0 or cores < 2:
            return False
        listed = [n for n in self._listed(inc) if n >= 2]
        if not listed:
            return False
        n = min(listed, key=lambda v: (abs(math.log(v) - math.log(cores)), v))
        if n in curve or not self._reachable(curve, n, (1 - self.opt.margin) * best[1]):
            return False
        self._observe(
            self._at(inc, n),
            "refine",
            f"0 workers read best; one worker per core ({cores}) is where a CPU-bound loader peaks",
        )
        return True

    def _ceiling_note(self, inc: dict) -> None:
        """Say which listed num_workers the linear ceiling, or 0 workers, kept out of the search."""
        curve = self._curve(inc)
        best = self._best(curve)
        rate = self._one_process_rate(curve)
        if best is None or rate is None:
            return
        band = (1 - self.opt.margin) * best[1]
        if 1 in self.s.workers and 1 not in curve and self._dominated(curve, 1) and self._busy_core(curve) is None:
            self._note(
                "refine",
                "num_workers=1",
                "not measured: 0 workers does the same loading in the main process "
                "without the transfer between processes",
            )
        skipped = [n for n in self._listed(inc) if n not in curve and not self._reachable(curve, n, band)]
        if skipped:
            self._note(
                "refine",
                "num_workers=" + ",".join(map(str, skipped)),
                f"not measured: n x the one-process rate ({rate:,.0f}) x {1 + self.opt.reach:g} stays below "
                f"the band ({band:,.0f}, within {self.opt.margin:.0%} of the best)",
            )

    # --- the other settings ---------------------------------------------------------------------------------

    def _axes(self, inc: dict, b: int) -> dict:
        new = dict(inc)
        for axis, values in self.s.values.items():
            if axis == "num_workers":
                continue
            cur = self._at(new, b)
            seen: dict[Any, Evidence] = {new[axis]: self._ev(cur)}
            for v in values:
                c = self.s.find({**new, "num_workers": b, axis: v})
                if c is None or c.key == cur.key:
                    continue
                seen[v] = self._screened(c, "axes", f"{axis}={v} at the best num_workers ({b})")
            if len(seen) < 2:
                continue
            f_cur = self._value(seen[new[axis]])
            v_best, f_best = max(
                ((v, self._value(e)) for v, e in seen.items() if e.usable(self.cap)),
                key=lambda vf: vf[1],
                default=(new[axis], math.nan),
            )
            shown = {
                str(v).lower() if isinstance(v, bool) else str(v): (self._value(e) if e.usable(self.cap) else None)
                for v, e in seen.items()
            }
            if v_best != new[axis] and (math.isnan(f_cur) or f_best > (1 + self.opt.margin) * f_cur):
                note = f"{axis}={v_best} beats {axis}={new[axis]} by more than the margin (one repetition each)"
                new[axis] = v_best
            else:
                note = f"every value within the margin of {axis}={new[axis]} or below it: kept"
            self.out.axes.append(AxisDecision(axis, b, shown, new[axis], note))
            self._note("axes", f"{axis} at num_workers={b}", note)
        return new

    # --- the whole search ------------------------------------------------------------------------------------

    def run(self) -> ScenarioOutcome:
        inc = self.s.base
        self._screen(inc)  # a scenario of one cell: that cell, which the confirm step brings to full repetitions
        for _ in range(MAX_PASSES):
            while self._knee(inc) or self._peak(inc) or self._scaling(inc) or self._at_cores(inc):
                pass
            self._ceiling_note(inc)
            best = self._best(self._curve(inc))
            if best is None:
                break
            new = self._axes(inc, best[0])
            if new == inc:
                break
            inc = new
        self._second_look()
        self._confirm()
        if any(n > 0 for n in self.s.workers):  # there were settings with workers to rule out
            self.out.busy_core = self._busy_core(self._curve(self.s.base))
        return self.out


def search(
    scenario: Scenario,
    measure: Measure,
    options: TuneOptions,
    rungs: tuple[int, ...],
    on_step: Callable[[Scenario, Step], None] | None = None,
) -> ScenarioOutcome:
    """Search one scenario (see the module doc); `rungs` are the finalists' repetitions (TuneOptions.rungs);
    `on_step` hears of every measurement and decision as it happens."""
    return ScenarioSearch(scenario, measure, options, rungs, on_step).run()
