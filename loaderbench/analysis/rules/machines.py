"""Records of several machines, decided together but never pooled.

A study measured on more than one machine (say `gpu-feed` on an H100 node and on an H200 node) is told apart by
machine: its rows become the study `gpu-feed (h200)`, and so on. Each machine's study then decides the claims it
carries on its own rows (claims_table), and the rows of one rule on several machines combine as every claim's rows
do (claims_table.numbered): a machine that did not measure what the rule reads adds no evidence, and one machine
where the claim is shown false refutes it. The table of several machines is made by claims_table.apart."""

from __future__ import annotations

#: how a study measured on several machines is named on each: "gpu-feed (h200)"
SEPARATOR = " ("


def on_machine(study: str, machine: str) -> str:
    return f"{study}{SEPARATOR}{machine})"


def base_study(study: str) -> str:
    """The study's own name, without the machine it was told apart by."""
    return study.split(SEPARATOR, 1)[0]
