"""The claims the studies test, each decided from the records by a stated rule (analysis.verdicts says how).

A verdict is never written by hand: every rule reads the tidy table (analysis.records), puts a
distribution-free interval with its real coverage (analysis.intervals) against the claim's threshold, and
returns one of analysis.verdicts.VERDICTS ("holds", "does not hold", "inconclusive", "not measured yet",
"not measurable here") with the numbers it was decided on (the evidence). Every threshold is a named
constant of its question's module, printed into the rule's text.

One module per question (start_method, cow_memory, persistence, sharing, ladder, gpu_feed, oversubscription,
rng, in_order, storage); `table` binds claims to the records that carry them and writes claims.csv / claims.md. The
public names are importable from here. Columns a rule derives from the table that its figure shows too
(start-method labels, ladder rungs, memory growth per worker...) live in analysis.derive.

Pure functions on the tidy table; no I/O except `write_claims`, no figures, no torch.
"""

from analysis.claims.common import (  # noqa: F401
    NOISY,
    Claim,
    Question,
    pick,
    quiet,
    too_noisy,
    values_of,
)
from analysis.claims.cow_memory import (  # noqa: F401
    COW_WORKERS_RATIO,
    FLAT_MIB,
    GROW_MIB,
    cow_flat,
    cow_grows,
    cow_grows_with_workers,
    gc_pass_copies,
)
from analysis.claims.gpu_feed import (  # noqa: F401
    ENOUGH,
    FEW_WORKERS,
    PIN_GAIN,
    few_workers_suffice,
    pin_memory_speeds_up,
)
from analysis.claims.in_order import (  # noqa: F401
    TAIL_CUT,
    THROUGHPUT_KEEP,
    out_of_order_cuts_tail,
    out_of_order_keeps_throughput,
)
from analysis.claims.ladder import (  # noqa: F401
    GPU_ONLY,
    LADDER_MATCH_FACTOR,
    LADDER_STEP_MIN,
    PUBLISHED,
    ladder_matches,
    ladder_step_helps,
)
from analysis.claims.oversubscription import (  # noqa: F401
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
from analysis.claims.persistence import (  # noqa: F401
    PERSIST_GAP_RATIO,
    RUN_SPEEDUP,
    SPAWN_GAP_RATIO,
    gap_grows_with_spawn,
    persistent_removes_gap,
    persistent_speeds_up_run,
)
from analysis.claims.rng import (  # noqa: F401
    DUP,
    rng_repeats,
    rng_repeats_across_epochs,
    seed_all_no_duplicates,
    torch_never_repeats,
)
from analysis.claims.sharing import (  # noqa: F401
    FD_NEAR,
    FD_TENSOR_RATIO,
    FS_TENSOR_MAX,
    PER_TENSOR_DIFF,
    fd_per_tensor,
    fd_runs_out,
    per_tensor_cost_differs,
)
from analysis.claims.start_method import (  # noqa: F401
    FORK_RISE_SHARE,
    PER_WORKER_KEEP,
    PRELOAD_WITHIN,
    SPAWN_CPU_MIN,
    SPAWN_TTFB_MIN,
    forkserver_between,
    fork_starts_fastest,
    preload_restarts_fast,
    spawn_pays_startup,
    spawn_pickles_dataset,
)
from analysis.claims.storage import (  # noqa: F401
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
from analysis.claims.table import (  # noqa: F401
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
from analysis.stats import compare  # noqa: F401
from analysis.verdicts import (  # noqa: F401
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_MEASURED,
    VERDICTS,
    Outcome,
)
