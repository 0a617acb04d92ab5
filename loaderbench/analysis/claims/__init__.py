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
them and writes claims.csv / claims.md. The public names are importable from here. Columns a rule derives from
the table that its figure shows too (start-method labels, ladder rungs, memory growth per worker...) live in
loaderbench.analysis.table.derive.

Pure functions on the tidy table; no I/O except `write_claims`, no figures, no torch.
"""

from loaderbench.analysis.claims.claims_table import (  # noqa: F401 - re-exported: the claims package is used by these names
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
from loaderbench.analysis.questions.cheap_work import (  # noqa: F401 - re-exported: the claims package is used by these names
    WIN,
    crossovers,
    zero_wins_when_cheap,
)
from loaderbench.analysis.questions.cow_memory import (  # noqa: F401 - re-exported: the claims package is used by these names
    COW_WORKERS_RATIO,
    FLAT_MIB,
    GROW_MIB,
    cow_flat,
    cow_grows,
    cow_grows_with_workers,
    gc_pass_copies,
)
from loaderbench.analysis.questions.gpu_feed import (  # noqa: F401 - re-exported: the claims package is used by these names
    ENOUGH,
    FEW_WORKERS,
    HOST_FREE,
    PIN_BUSY,
    PIN_GAIN,
    PINNED_H2D_MIN,
    few_workers_suffice,
    non_blocking_frees_host,
    pin_memory_speeds_up,
    pin_thread_bottleneck,
    pinned_copies_faster,
)
from loaderbench.analysis.questions.in_order import (  # noqa: F401 - re-exported: the claims package is used by these names
    TAIL_CUT,
    THROUGHPUT_KEEP,
    out_of_order_cuts_tail,
    out_of_order_keeps_throughput,
)
from loaderbench.analysis.questions.ladder import (  # noqa: F401 - re-exported: the claims package is used by these names
    ABOUT_ONE,
    GPU_ONLY,
    LADDER_MATCH_FACTOR,
    LADDER_STEP_MIN,
    OVERLAP_MIN,
    PUBLISHED,
    ladder_matches,
    ladder_step_about_one,
    ladder_step_helps,
)
from loaderbench.analysis.questions.oversubscription import (  # noqa: F401 - re-exported: the claims package is used by these names
    CPU_BOUND,
    DEGRADE_MIN,
    PEAK_RISE_MIN,
    PEAK_SPAN,
    RANKS_GAIN,
    cpu_rows,
    ddp_ranks_share_cores,
    ddp_shares_disjoint,
    degrades_past_cores,
    peaks_near_cores,
    rank_mode,
    ranks_share_cores,
    rises_to_cores,
)
from loaderbench.analysis.questions.persistence import (  # noqa: F401 - re-exported: the claims package is used by these names
    PERSIST_GAP_RATIO,
    RUN_SPEEDUP,
    SPAWN_GAP_RATIO,
    gap_grows_with_spawn,
    persistent_removes_gap,
    persistent_speeds_up_run,
)
from loaderbench.analysis.questions.rng import (  # noqa: F401 - re-exported: the claims package is used by these names
    DUP,
    rng_repeats,
    rng_repeats_across_epochs,
    seed_all_no_duplicates,
    torch_never_repeats,
)
from loaderbench.analysis.questions.sharing import (  # noqa: F401 - re-exported: the claims package is used by these names
    FD_NEAR,
    FD_TENSOR_RATIO,
    FS_TENSOR_MAX,
    PER_TENSOR_DIFF,
    fd_per_tensor,
    fd_runs_out,
    per_tensor_cost_differs,
)
from loaderbench.analysis.questions.start_method import (  # noqa: F401 - re-exported: the claims package is used by these names
    FORK_RISE_SHARE,
    PER_WORKER_KEEP,
    PRELOAD_WITHIN,
    SPAWN_CPU_MIN,
    SPAWN_TTFB_MIN,
    SPAWN_USS_MIN,
    fork_starts_fastest,
    forkserver_between,
    preload_restarts_fast,
    spawn_pays_startup,
    spawn_pickles_dataset,
    spawn_uses_more_memory,
)
from loaderbench.analysis.questions.storage import (  # noqa: F401 - re-exported: the claims package is used by these names
    CAP_BINDS,
    CAP_FLAT,
    FAR_LATENCY_MS,
    FAR_PAST,
    FAR_WORKERS_PER_CORE,
    PER_REQUEST_MAX,
    REMOTE_SHARE,
    http_rows,
    io_rule_of_thumb_over_http,
    per_request_costs_more,
    remote_is_io_bound,
    scale_until_bandwidth,
    shards_exactly_once,
)
from loaderbench.analysis.questions.threads import (  # noqa: F401 - re-exported: the claims package is used by these names
    FIRST_BATCH_CUT,
    GIL_RELEASING,
    MEMORY_CUT,
    PROCESS_GAIN,
    PURE_PYTHON,
    REACH,
    SCALE_KEEP,
    THREADS_CAP,
    threads_scale_released_work,
    threads_serialize_python,
    threads_start_faster,
    threads_use_less_memory,
)
from loaderbench.analysis.rules.catalogue import (  # noqa: F401 - re-exported: the claims package is used by these names
    BY_NUMBER,
    CATALOGUE,
    SeedClaim,
)
from loaderbench.analysis.rules.claim import (  # noqa: F401 - re-exported: the claims package is used by these names
    NOISY,
    Claim,
    Question,
    pick,
    quiet,
    too_noisy,
    values_of,
)
from loaderbench.analysis.rules.step_overlap import (  # noqa: F401 - re-exported: the claims package is used by these names
    APART,
    KNEE_GAIN,
    knee_at_prep_over_train,
    step_is_max_not_sum,
)
from loaderbench.analysis.rules.worker_costs import (  # noqa: F401 - re-exported: the claims package is used by these names
    CTX_RISE,
    FIRST_BATCH_MIN,
    IO_ENOUGH,
    SLEEP_PAST,
    first_batch_without_workers,
    io_rule_of_thumb,
    readable_tracebacks,
    sleep_scales_past_cores,
    switches_rise_past_cores,
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
