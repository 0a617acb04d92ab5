"""The claims the studies test, each decided from the records by a stated rule (loaderbench.stats.verdicts says how).

A verdict is never written by hand: every rule reads the tidy table (loaderbench.analysis.table.records), puts a
distribution-free interval with its real coverage (loaderbench.stats.intervals) against the claim's threshold, and
returns one of loaderbench.stats.verdicts.VERDICTS ("holds", "does not hold", "inconclusive", "not measured yet",
"not measurable here") with the numbers it was decided on (the evidence). Every threshold is a named
constant of its question's module, printed into the rule's text.

One module per question (start_method, cow_memory, persistence, sharing, ladder, gpu_feed, oversubscription,
rng, in_order, storage, cheap_work, threads, gpu_decode, gpu_batch_size), with the rules some of them share out
in modules of their own (worker_costs: first batch, context switches, sleep against CPU-bound curves, the I/O
rules of thumb; step_overlap: loading beside a simulated step). `catalogue` numbers the claims the suite puts to
the test (data); every rule carries the number it decides, and `claims_table` binds claims to the records that carry
them and writes claims.csv / claims.md; its names are importable from here (a rule from its question module).
Columns a rule derives from the table that its figure shows too (start-method labels, ladder rungs, memory growth
per worker...) live in loaderbench.analysis.table.derive.

Pure functions on the tidy table; no I/O except `write_claims`, no figures, no torch.
"""

from loaderbench.analysis.claims.claims_table import (  # noqa: F401 - re-exported: the claims package is read by these names
    BY_NAME,
    CLAIMS,
    COLUMNS,
    LATER,
    NUMBERED_COLUMNS,
    QUESTIONS,
    StudyClaims,
    bind,
    carries,
    claims_for,
    claims_table,
    counts_line,
    decide_claims,
    foreign_axes,
    numbered,
    question_of,
    sources_lines,
    studies_by_question,
    study_claims,
    vocabulary_lines,
    write_claims,
)
from loaderbench.analysis.questions.ladder import GPU_ONLY, PUBLISHED  # noqa: F401 - re-exported for the figures
from loaderbench.analysis.rules.claim import Claim, pick  # noqa: F401 - re-exported: the rule's type and its cell picker
