"""The questions a study may be made for: what `[study] question = "..."` names, checked when the study file is
read, carried into each of its records (`config.question`, no part of the cell id) and read by the analysis to pick
the study's question figure and claims (loaderbench.analysis.claims.question_of).

Each claim question has a module of the same name in loaderbench/analysis/claims/ and loaderbench/analysis/figures/
questions/ (tests/test_study_question.py keeps the two lists one). `scaling` is the question every study's own
figures answer (where more workers stop paying), for the studies that ask nothing else.
"""

from __future__ import annotations

#: The claim questions, each decided by stated rules in loaderbench.analysis.claims.
CLAIM_QUESTIONS = (
    "start-method",
    "cow-memory",
    "persistence",
    "sharing",
    "ladder",
    "gpu-feed",
    "oversubscription",
    "rng",
    "in-order",
    "storage",
    "cheap-work",
    "shm-size",
    "batch-size",
    "sharing-size",
    "threads",
    "checkpointing",
    "gpu-decode",
    "gpu-batch-size",
)
#: The question of a study that asks only where more workers stop paying (quick, scaling): no claim of its own.
SCALING = "scaling"
#: Every value `[study] question` may take.
STUDY_QUESTIONS = (SCALING, *CLAIM_QUESTIONS)
