"""Records of several machines, decided together but never pooled.

A study measured on more than one machine (say `gpu-feed` on an H100 node and on an H200 node) is told apart by
machine: its rows become the study `gpu-feed (h200)`, and so on. Each machine's study then decides the claims it
carries on its own rows (claims_table), and the rows of one rule on several machines combine as every claim's rows
do (claims_table.numbered): a machine that did not measure what the rule reads adds no evidence, and one machine
where the claim is shown false refutes it."""

from __future__ import annotations

import pandas as pd

#: how a study measured on several machines is named on each: "gpu-feed (h200)"
SEPARATOR = " ("


def on_machine(study: str, machine: str) -> str:
    return f"{study}{SEPARATOR}{machine})"


def base_study(study: str) -> str:
    """The study's own name, without the machine it was told apart by."""
    return study.split(SEPARATOR, 1)[0]


def apart(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of every machine (each frame's `attrs["machine"]`) in one table, a study name measured on more
    than one machine qualified by the machine; each such study keeps the question it was made for (`question` is
    filled from its name first). The table's `attrs["machine"]` names them all."""
    from loaderbench.analysis.claims.claims_table import question_of

    machines = [str(f.attrs.get("machine", k)) for k, f in enumerate(frames)]
    names = [set(f["study"].astype(str)) if "study" in f else set() for f in frames]
    shared = {s for s in set().union(*names) if sum(s in n for n in names) > 1}
    out = []
    for frame, machine, mine in zip(frames, machines, names):
        if shared & mine:
            frame = frame.copy()
            if "question" not in frame:
                frame["question"] = None
            for study in shared & mine:
                hit = frame["study"].astype(str) == study
                if frame.loc[hit, "question"].isna().all():
                    frame.loc[hit, "question"] = question_of(study, frame[hit])
                frame.loc[hit, "study"] = on_machine(study, machine)
        out.append(frame)
    df = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    df.attrs["machine"] = "+".join(machines)
    return df
