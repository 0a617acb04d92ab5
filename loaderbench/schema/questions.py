"""The questions a study may be made for: what `[study] question = "..."` names, checked when the study file is
read, carried into each of its records (`config.question`, no part of the cell id) and read by the analysis to pick
the study's question figure and claims (loaderbench.analysis.claims.question_of).

Each claim question is a module of loaderbench/analysis/questions/ that declares it; its name is the module's, with
'-' for '_'. The names are read from the folder's file names, so that planning a study never imports the analysis.
`scaling` is the question every study's own figures answer (where more workers stop paying), for the studies that
ask nothing else.
"""

from __future__ import annotations

from pathlib import Path

#: The folder of the modules that declare the claim questions.
QUESTION_MODULES = Path(__file__).resolve().parents[1] / "analysis" / "questions"
#: The claim questions, each decided by stated rules in its module of loaderbench.analysis.questions.
CLAIM_QUESTIONS = tuple(sorted(p.stem.replace("_", "-") for p in QUESTION_MODULES.glob("[!_]*.py")))
#: The question of a study that asks only where more workers stop paying (quick, scaling): no claim of its own.
SCALING = "scaling"
#: Every value `[study] question` may take.
STUDY_QUESTIONS = (SCALING, *CLAIM_QUESTIONS)
