"""The questions the studies answer, one module each, found by what it declares (as asv finds benchmarks).

A module here declares `QUESTION = Question(...)` (loaderbench.analysis.rules.claim): its name (the module's, with
'-' for '_'), the axes its rules tell apart, what rows must carry, its claims with their rules, its figure and its
findings table. A study file names the question it was made for (`[study] question = "..."`, carried into every
record), and several studies may feed one question. Nothing else lists the questions: the claims table, the figures,
the findings page and the study-file check read them from here.
"""

from __future__ import annotations

import importlib
import pkgutil

from loaderbench.analysis.rules.catalogue import BY_NUMBER
from loaderbench.analysis.rules.claim import Question


def _first_number(q: Question) -> tuple[int, str]:
    numbers = [BY_NUMBER[c.number].number for c in q.claims if c.number is not None]
    return (min(numbers) if numbers else 10**6, q.name)


def found() -> tuple[Question, ...]:
    """Every module's QUESTION, in the order of the first numbered claim each decides. A question named otherwise
    than its module is an error: the study-file check finds questions by their modules' names."""
    out = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        q = getattr(module, "QUESTION", None)
        if isinstance(q, Question):
            if q.name.replace("-", "_") != info.name:
                raise ImportError(
                    f"{module.__file__}: QUESTION {q.name!r} must be named after its module ({info.name})"
                )
            out.append(q)
    return tuple(sorted(out, key=_first_number))


QUESTIONS: tuple[Question, ...] = found()
