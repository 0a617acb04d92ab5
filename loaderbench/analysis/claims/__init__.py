"""The claims the studies test, each decided from the records by a stated rule (loaderbench.stats.verdicts says how).

A verdict is never written by hand: every rule reads the tidy table (loaderbench.analysis.table), puts a
distribution-free interval with its real coverage (loaderbench.stats.intervals) against the claim's threshold, and
returns one of loaderbench.stats.verdicts.VERDICTS ("holds", "does not hold", "inconclusive", "not measured yet",
"not measurable here") with the numbers it was decided on (the evidence). Every threshold is a named
constant of its question's module, printed into the rule's text.

One module per question (start_method, cow_memory, persistence, sharing, ladder, gpu_feed, oversubscription,
rng, in_order, storage); `table` binds claims to the records that carry them and writes claims.csv / claims.md. The
public names are importable from here. Columns a rule derives from the table that its figure shows too
(start-method labels, ladder rungs, memory growth per worker...) live in loaderbench.analysis.derive.

Pure functions on the tidy table; no I/O except `write_claims`, no figures, no torch.
"""

from loaderbench.analysis.claims.claim import (  # noqa: F401 - re-exported: the claims package is used by these names
    NOISY,
    Claim,
    Question,
    pick,
    quiet,
    too_noisy,
    values_of,
)
from loaderbench.analysis.claims.claims_table import (  # noqa: F401 - re-exported: the claims package is used by these names
    BY_NAME,
    CLAIMS,
    COLUMNS,
    QUESTIONS,
    carries,
    claims_for,
    claims_table,
    foreign_axes,
    question_of,
    studies_by_question,
    vocabulary_lines,
    write_claims,
)
from loaderbench.analysis.claims.cow_memory import (  # noqa: F401 - re-exported: the claims package is used by these names
    COW_WORKERS_RATIO,
    FLAT_MIB,
    GROW_MIB,
    cow_flat,
    cow_grows,
    cow_grows_with_workers,
    gc_pass_copies,
)
from loaderbench.analysis.claims.gpu_feed import (  # noqa: F401 - re-exported: the claims package is used by these names
    ENOUGH,
    FEW_WORKERS,
    PIN_GAIN,
    few_workers_suffice,
    pin_memory_speeds_up,
)
from loaderbench.analysis.claims.in_order import (  # noqa: F401 - re-exported: the claims package is used by these names
    TAIL_CUT,
    THROUGHPUT_KEEP,
    out_of_order_cuts_tail,
    out_of_order_keeps_throughput,
)
from loaderbench.analysis.claims.ladder import (  # noqa: F401 - re-exported: the claims package is used by these names
    GPU_ONLY,
    LADDER_MATCH_FACTOR,
    LADDER_STEP_MIN,
    PUBLISHED,
    ladder_matches,
    ladder_step_helps,
)
from loaderbench.analysis.claims.oversubscription import (  # noqa: F401 - re-exported: the claims package is used by these names
    CPU_BOUND,
    DEGRADE_MIN,
    PEAK_RISE_MIN,
    PEAK_SPAN,
    RANKS_GAIN,
    cpu_rows,
    degrades_past_cores,
    peaks_near_cores,
    ranks_share_cores,
)
from loaderbench.analysis.claims.persistence import (  # noqa: F401 - re-exported: the claims package is used by these names
    PERSIST_GAP_RATIO,
    RUN_SPEEDUP,
    SPAWN_GAP_RATIO,
    gap_grows_with_spawn,
    persistent_removes_gap,
    persistent_speeds_up_run,
)
from loaderbench.analysis.claims.rng import (  # noqa: F401 - re-exported: the claims package is used by these names
    DUP,
    rng_repeats,
    rng_repeats_across_epochs,
    seed_all_no_duplicates,
    torch_never_repeats,
)
from loaderbench.analysis.claims.sharing import (  # noqa: F401 - re-exported: the claims package is used by these names
    FD_NEAR,
    FD_TENSOR_RATIO,
    FS_TENSOR_MAX,
    PER_TENSOR_DIFF,
    fd_per_tensor,
    fd_runs_out,
    per_tensor_cost_differs,
)
from loaderbench.analysis.claims.start_method import (  # noqa: F401 - re-exported: the claims package is used by these names
    FORK_RISE_SHARE,
    PER_WORKER_KEEP,
    PRELOAD_WITHIN,
    SPAWN_CPU_MIN,
    SPAWN_TTFB_MIN,
    fork_starts_fastest,
    forkserver_between,
    preload_restarts_fast,
    spawn_pays_startup,
    spawn_pickles_dataset,
)
from loaderbench.analysis.claims.storage import (  # noqa: F401 - re-exported: the claims package is used by these names
    CAP_BINDS,
    CAP_FLAT,
    FAR_LATENCY_MS,
    FAR_PAST,
    FAR_WORKERS_PER_CORE,
    PER_REQUEST_MAX,
    http_rows,
    per_request_costs_more,
    scale_until_bandwidth,
    shards_exactly_once,
)
from loaderbench.stats.comparison import compare  # noqa: F401 - re-exported: the claims package is used by these names
from loaderbench.stats.verdicts import (  # noqa: F401 - re-exported: the claims package is used by these names
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_MEASURED,
    VERDICTS,
    Outcome,
)
