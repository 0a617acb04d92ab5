"""Threads or processes: the `loader` and `worker_method` axes (validation, normalising, the feature check of
DataLoader's thread workers), the threads question's rules on synthetic records, and tune's thread answer. The
real cells are in tests/test_physics.py and tests/test_claim_cells.py."""

from __future__ import annotations

import inspect

import pytest

from loaderbench.analysis.claims.claims_table import BY_NAME, claims_table, question_of
from loaderbench.analysis.questions.threads import (
    FIRST_BATCH_CUT,
    MEMORY_CUT,
    PROCESS_GAIN,
    REACH,
    SCALE_KEEP,
    THREADS_CAP,
    threads_scale_released_work,
    threads_serialize_python,
    threads_start_faster,
    threads_use_less_memory,
)
from loaderbench.errors import StudyError
from loaderbench.fake_records.questions import F, H, N, decide, threads_rate, threads_table
from loaderbench.stats.verdicts import INCONCLUSIVE
from loaderbench.study import loader_rules
from loaderbench.study.study_file import parse_study
from loaderbench.tune.answer_text import dataloader_call, threads_line
from loaderbench.tune.evidence import Observation
from loaderbench.tune.options import TuneOptions
from loaderbench.tune.outcome import WITHIN_MARGIN
from loaderbench.tune.search import search
from loaderbench.tune.space import scenarios

MIB = 2**20


def cells(matrix: dict, **study):
    raw = {"study": {"name": "t", "repetitions": 1, **study}, "matrix": {"workload": "sleep", **matrix}}
    return parse_study(raw, where="t.toml", max_cores=2).cells


# --- the axes --------------------------------------------------------------------------------------------


def test_thread_cells_drop_what_only_processes_mean():
    (thread,) = [c for c in cells({"num_workers": 2, "loader": "nodes", "worker_method": "thread"})]
    cfg = thread.config
    assert cfg["worker_method"] == "thread"
    assert cfg["start_method"] is None and cfg["sharing_strategy"] is None and cfg["gc_freeze"] is None
    assert cfg["persistent_workers"] is None  # torchdata.nodes starts its workers again every epoch
    (zero,) = cells({"num_workers": 0, "loader": "nodes", "worker_method": ["thread", "process"]})
    assert zero.config["worker_method"] is None  # no worker of either kind: one cell


def test_default_cells_keep_their_ids():
    (plain,) = cells({"num_workers": 2})
    (explicit,) = cells({"num_workers": 2, "loader": "dataloader", "worker_method": "process"})
    assert plain.cell_id == explicit.cell_id


def test_the_feature_check_reads_the_installed_dataloader():
    from torch.utils.data import DataLoader

    has = loader_rules.THREAD_ARGUMENT in inspect.signature(DataLoader).parameters
    assert loader_rules.dataloader_has_threads() is has


def test_dataloader_thread_workers_are_refused_where_torch_has_none(monkeypatch):
    monkeypatch.setattr(loader_rules, "dataloader_has_threads", lambda: False)
    with pytest.raises(StudyError) as exc:
        cells({"num_workers": 2, "worker_method": "thread"})
    text = str(exc.value)
    assert text.startswith("t.toml: ") and 'worker_method = "thread" with loader = "dataloader"' in text
    assert f"not available in torch {loader_rules.torch_version()}" in text and 'loader = "nodes"' in text
    monkeypatch.setattr(loader_rules, "dataloader_has_threads", lambda: True)
    (cell,) = cells({"num_workers": 2, "worker_method": "thread"})
    assert cell.config["worker_method"] == "thread"


@pytest.mark.parametrize(
    "matrix, fragment",
    [
        ({"workload": "shards"}, 'loader = "nodes" with workload = "shards"'),
        ({"worker_init": "seed_all"}, 'worker_init = "seed_all" with loader = "nodes"'),
        ({"slow_worker_ms": 5.0}, 'slow_worker_ms with loader = "nodes"'),
    ],
)
def test_nodes_refuses_what_it_has_no_place_for(matrix, fragment):
    with pytest.raises(StudyError, match="allowed: ") as exc:
        cells({"num_workers": 2, "loader": "nodes", **matrix})
    assert fragment in str(exc.value)


def test_thread_workers_do_not_share_the_suites_http_connection():
    with pytest.raises(StudyError, match='worker_method = "thread" with storage = "http"'):
        cells({"workload": "jpeg", "storage": "http", "num_workers": 2, "loader": "nodes", "worker_method": "thread"})


def test_nodes_without_torchdata_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(loader_rules, "has_torchdata", lambda: False)
    with pytest.raises(StudyError, match=r"torchdata is not installed here; .*pip install"):
        cells({"num_workers": 2, "loader": "nodes"})


def test_the_threads_study_fits_six_minutes():
    from loaderbench.study.estimate import modelled_seconds
    from loaderbench.study.study_file import load_study

    study = load_study("loaderbench/studies/threads.toml", max_cores=2)
    total = study.settings.repetitions * sum(modelled_seconds(c.typed) for c in study.cells)
    assert total < 6 * 60, total
    methods = {(c["workload"], c["cores"], c["worker_method"]) for c in study.cells if c["num_workers"]}
    assert len(methods) == 4 * 2 * 2  # every workload, on 1 and 2 cores, with threads and with processes


# --- the rules ---------------------------------------------------------------------------------------------


def test_threads_rules_hold_on_the_expected_shape():
    df = threads_table()
    assert question_of("threads", df) == "threads"
    for rule in (
        threads_serialize_python,
        threads_scale_released_work,
        threads_use_less_memory,
        threads_start_faster,
    ):
        assert decide(rule, df) == H, rule(df).evidence
    table = claims_table(df)
    six = table[table["number"] == "#6"]
    assert list(six["verdict"]) == [H] and "threads" in set(six["study"])


def test_threads_scaling_python_work_refutes_six():
    def scaling(workload, cores, method, nw):
        return 1000.0 * min(nw, cores) if nw else 1000.0

    df = threads_table(rate=scaling)
    assert decide(threads_serialize_python, df) == F
    out = threads_serialize_python(df)
    assert "best thread (w=2) / main process" in out.evidence


def test_threads_that_fall_behind_or_cost_as_much_do_not_hold():
    def behind(workload, cores, method, nw):
        return threads_rate(workload, cores, method, nw) * (0.5 if method == "thread" else 1.0)

    assert decide(threads_scale_released_work, threads_table(rate=behind)) == F
    same = threads_table(pss_mib=lambda m, nw: 400 + 250 * nw, ttfb_s=lambda m, nw: 0.05)
    assert decide(threads_use_less_memory, same) == F
    assert decide(threads_start_faster, same) == F


def test_no_process_control_leaves_six_open_and_no_threads_leaves_it_unmeasured():
    def flat(workload, cores, method, nw):
        return 1000.0

    assert decide(threads_serialize_python, threads_table(rate=flat)) == INCONCLUSIVE
    only = threads_table()
    only = only[only["worker_method"] != "thread"]
    for rule in (threads_serialize_python, threads_scale_released_work, threads_start_faster):
        assert decide(rule, only) == N


def test_thresholds_are_printed_in_the_rules():
    rules = {c.claim: c.rule for c in BY_NAME["threads"].claims}
    text = " ".join(rules.values())
    for value in (THREADS_CAP, PROCESS_GAIN, SCALE_KEEP, MEMORY_CUT, FIRST_BATCH_CUT, REACH):
        assert f"{value:g}" in text


# --- tune -------------------------------------------------------------------------------------------------


def test_tune_proposes_threads_at_the_same_throughput_with_less_memory():
    raw = {
        "study": {"name": "syn", "repetitions": 3},
        "matrix": {
            "workload": "sleep",
            "cores": 2,
            "loader": "nodes",
            "num_workers": [0, 2, 4, 8],
            "worker_method": ["process", "thread"],
        },
    }
    (sc,) = scenarios(parse_study(raw, where="syn", max_cores=64).cells)

    def measure(c, rep):
        rate = {0: 200.0, 2: 400.0, 4: 800.0, 8: 1600.0}[c.num_workers]
        per_worker = 2 if c["worker_method"] == "thread" else 100
        return Observation("ok", rate, (100 + per_worker * c.num_workers) * MIB, 1.0)

    out = search(sc, measure, TuneOptions(finalists=2), (3,))
    assert out.stop == WITHIN_MARGIN
    assert out.answer.candidate["worker_method"] == "thread" and out.answer.candidate.num_workers == 8


def test_the_answer_says_why_threads():
    thread = {"num_workers": 8, "worker_method": "thread", "loader": "nodes", "prefetch_factor": 2}
    process = {**thread, "worker_method": "process", "start_method": "fork"}
    sc = {
        "answer": {"settings": thread, "median": 1600.0, "memory_uss_bytes": 120 * MIB},
        "within_margin": [
            {"settings": thread, "median": 1600.0, "memory_uss_bytes": 120 * MIB, "answer": True},
            {"settings": process, "median": 1610.0, "memory_uss_bytes": 900 * MIB, "answer": False},
        ],
    }
    line = threads_line(sc)
    assert "num_workers=8 worker_method=process: 1,610" in line and "780 MiB less memory" in line
    assert threads_line({**sc, "within_margin": sc["within_margin"][:1]}).endswith("by more than the margin")
    assert threads_line({**sc, "answer": {**sc["answer"], "settings": process}}) is None
    call = dataloader_call(thread, {"batch_size": 8}, ["num_workers", "worker_method"])
    assert call.startswith("torchdata.nodes: ") and "method='thread'" in call and "batch_size=8" in call
    assert "worker_method='thread'" in dataloader_call({**thread, "loader": "dataloader"}, {}, [])


# --- real cells -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nodes_cells_are_measured_like_any_other(tmp_path):
    """Thread and process workers of the nodes pipeline on the zlib workload: ok records with the probes' memory
    (workers' USS only where there are worker processes), the first batch, and nothing left behind."""
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store

    raw = {
        "study": {
            "name": "nodes",
            "repetitions": 1,
            "warmup_batches": 2,
            "measure_batches": 40,
            "memory_interval_s": 0.05,
        },
        "matrix": {
            "workload": "zlib",
            "zlib_kb": 16.0,
            "batch_size": 4,
            "loader": "nodes",
            "worker_method": ["thread", "process"],
            "num_workers": 2,
            "cores": 2,
        },
    }
    store = Store(tmp_path)
    run_local(parse_study(raw, where="t", max_cores=2), store)
    recs = {r.cell.worker_method: r for _, r in store.records("nodes")}
    assert set(recs) == {"thread", "process"}
    for method, r in recs.items():
        assert r.ok, r.to_json().get("error")
        assert r.metric("time_to_first_batch_s") > 0 and r.metric("samples_per_s") > 0
        memory = r.metric("memory_bytes")
        assert memory["pss_peak"] > 0
        assert (memory["workers_uss_peak"] > 0) is (method == "process"), memory
