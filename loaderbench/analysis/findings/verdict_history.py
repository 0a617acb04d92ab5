"""The verdicts each shipped copy of a study decided, kept with the reference records, so that a verdict that flips
between two measurements of the same study is reported as unstable instead of published as settled.

`loaderbench reference` records, per study, the verdict of every claim its records decide and the commits that
made them, each time it copies the study (the records it replaces first, when no history exists yet). A claim is
unstable when the last two copies decided it differently; it stays so until a later copy decides it as the one
before did, or until `loaderbench settle` decides it: a copy from a results folder holding the study's
settle-STUDY.json marks the claims that run held or refuted (as the copied records still decide them) settled.
"""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.claims import BY_NAME, Claim, bind, decide_claims, study_claims
from loaderbench.stats.verdicts import FAILS, HOLDS, NOT_MEASURED, Outcome

#: copies of a study kept in its history
KEEP = 5
HISTORY = "history"
#: the key prefix under which a machine's unstable claims reach the findings blocks beside its notes
UNSTABLE = "unstable: "


def name_of(claim: Claim) -> str:
    tag = f"#{claim.number} " if claim.number else ""
    return f"{tag}{claim.claim}"


def decided(rows: pd.DataFrame) -> dict[tuple[str, int], Outcome]:
    """The outcomes of every claim one study's rows carry, decided on them."""
    facts = study_claims(rows)
    keys = [k for k, study in bind({"study": facts}).items() if study == "study"]
    return decide_claims(rows, keys)


def verdicts(rows: pd.DataFrame) -> dict[str, str]:
    """Every claim one study's rows carry, by name, with its verdict on them."""
    return {name_of(BY_NAME[q].claims[j]): o.verdict for (q, j), o in decided(rows).items()}


def settled_by(settle: dict | None, decided_now: dict[str, str]) -> list[str]:
    """The claims a `loaderbench settle` run (its settle-STUDY.json) decided, as the copied records decide them now:
    held or refuted where it stopped, not left open."""
    if not settle:
        return []
    after, left = settle.get("after") or {}, settle.get("left") or {}
    return sorted(
        name
        for name, verdict in after.items()
        if verdict in (HOLDS, FAILS) and name not in left and decided_now.get(name) == verdict
    )


def remember(meta: dict, study: str, rows: pd.DataFrame, settle: dict | None = None) -> None:
    """Add what `rows` (one copy of `study`) decide to the study's history in `meta` (reference.json); with the
    study's settle-STUDY.json, the claims that settle run decided are marked settled."""
    commits = sorted({str(c)[:12] for c in rows.get("env_git_commit", pd.Series(dtype=object)).dropna()})
    entries = meta.setdefault(HISTORY, {}).setdefault(study, [])
    now = verdicts(rows)
    entry: dict = {"commits": commits, "verdicts": now}
    settled = settled_by(settle, now)
    if settled:
        entry["settled"] = settled
    entries.append(entry)
    del entries[:-KEEP]


def flips(meta: dict) -> dict[str, str]:
    """Keys "study|claim name" -> how it flipped, for every claim the last two copies of the study decided differently
    (a claim neither measured is no flip)."""
    out = {}
    for study, entries in (meta.get(HISTORY) or {}).items():
        if len(entries) < 2:
            continue
        before, after = entries[-2], entries[-1]
        for name, now in after["verdicts"].items():
            was = before["verdicts"].get(name)
            if name in after.get("settled", ()):  # decided by `loaderbench settle`, at the repetitions it asked for
                continue
            if was and was != now and NOT_MEASURED not in (was, now):
                out[f"{study}|{name}"] = (
                    f"unstable: {was} at {', '.join(before['commits']) or '?'}, then {now} at "
                    f"{', '.join(after['commits']) or '?'} (study {study})"
                )
    return out


def flips_by_number(notes: list[dict[str, str]], table: pd.DataFrame) -> dict[str, str]:
    """Numbered claim (#N) -> " (how its rows flipped)", from the machines' notes (their UNSTABLE keys), for the rows
    of the claims table (`table`) decided on the study that flipped them."""
    decided_on = {(str(r.study), f"{r.number} {r.claim}") for r in table.itertuples()}
    found: dict[str, list[str]] = {}
    for machine in notes:
        for key, how in machine.items():
            study, _, name = key.removeprefix(UNSTABLE).partition("|")
            if key.startswith(UNSTABLE) and name.startswith("#") and (study, name) in decided_on:
                found.setdefault(name.split(" ", 1)[0], []).append(how)
    return {number: f" ({'; '.join(hows)})" for number, hows in found.items()}
