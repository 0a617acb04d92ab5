"""loaderbench.analysis.figures.questions: each question's figure draws from small synthetic record sets (and from
records that are all failures), and draw_question_figures picks the figure by study name or axes. Each figure
is checked as a reader sees it, with the checks of tests/test_figures.py (on the canvas, one x axis per variable,
a legend of what is drawn, n printed, no interval called 95%)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from loaderbench.analysis.claims.claims_table import QUESTIONS, question_of
from loaderbench.analysis.figures import questions as Q
from loaderbench.analysis.table import derive as D
from loaderbench.fake_records.gpu import TUTORIAL, gpu_batch_table, gpu_decode_table, gpu_rate, gpu_table, ladder_table
from loaderbench.fake_records.questions import (
    COW_OK,
    GAP_OK,
    PEAK,
    TOTAL_OK,
    batch_table,
    cheap_table,
    ckpt_table,
    cow_records,
    cow_table,
    in_order_table,
    over_table,
    pers_table,
    rng_table,
    sharing_size_table,
    sharing_table,
    shm_table,
    sm_table,
    table,
    threads_table,
)
from loaderbench.fake_records.storage import storage_table
from tests.test_figures import all_text, general_problems, outside_canvas

P99 = {(True, False): 0.01, (False, False): 0.01, (True, True): 0.08, (False, True): 0.02}
THR = {(True, False): 1000.0, (False, False): 1000.0, (True, True): 400.0, (False, True): 420.0}

TABLES = {
    "start-method": lambda: sm_table(),
    # with and without gc.freeze() in the parent, as the study has them
    "cow-memory": lambda: table(cow_records(COW_OK, gc_freeze=False) + cow_records(COW_OK, gc_freeze=True)),
    "persistence": lambda: pers_table(GAP_OK, TOTAL_OK),
    "sharing": lambda: sharing_table(),
    "ladder": lambda: ladder_table(TUTORIAL),
    "gpu-feed": lambda: gpu_table(gpu_rate),
    "oversubscription": lambda: over_table(PEAK, {1: 900.0, 2: 700.0, 4: 600.0}),
    "rng": lambda: rng_table(numpy_within=0.75),
    "in-order": lambda: in_order_table(P99, THR),
    "storage": lambda: storage_table(),
    "cheap-work": lambda: cheap_table(),
    "shm-size": lambda: shm_table(),
    "batch-size": lambda: batch_table(),
    "sharing-size": lambda: sharing_size_table(),
    "threads": lambda: threads_table(),
    "checkpointing": lambda: ckpt_table(),
    "gpu-decode": lambda: gpu_decode_table(),
    "gpu-batch-size": lambda: gpu_batch_table(),
}


def test_one_figure_per_question_named_after_it():
    assert set(Q.figures()) == set(QUESTIONS)
    names = {f.__name__ for f in Q.figures().values()}
    assert {
        "time_to_first_batch_by_start_method",
        "memory_growth_by_backing",
        "epoch_gap_by_persistence",
        "sharing_strategy_limits",
        "ladder_speedups",
        "pin_memory_by_workers",
        "oversubscription_ranks_x_workers",
        "rng_duplicates",
        "tail_latency_in_order",
        "workers_hide_latency",
        "crossover_by_sample_size",
        "shm_peak_by_setting",
        "loading_time_by_batch_size",
        "cost_per_tensor_by_size",
        "thread_process_curves",
        "snapshot_cost_against_replay",
        "decoding_on_the_gpu_against_cpu_workers",
        "samples_by_batch_size_on_the_gpu",
    } == names


@pytest.mark.filterwarnings("error:.*could not draw")
@pytest.mark.parametrize("question", QUESTIONS)
def test_draws_a_png_a_reader_can_read(question, kept, tmp_path):
    """PNG; on the canvas, the same x axis per variable, a legend of what is drawn, n printed, no 95%."""
    df = TABLES[question]()
    paths = Q.draw_question_figures(df, question, tmp_path)
    assert [p.suffix for p in paths] == [".png"]
    assert paths[0].stem == Q.figures()[question].__name__
    assert all(p.exists() and p.stat().st_size > 5000 for p in paths)
    assert len(kept) == 1
    assert general_problems(*kept[0]) == []
    assert "n = 3 repetitions per" in all_text(kept[0][0])  # every table has 3 repetitions per cell


@pytest.mark.parametrize("question", QUESTIONS)
def test_draws_something_when_every_record_failed(question, kept, tmp_path):
    df = TABLES[question]().assign(status="failed")
    paths = Q.draw_question_figures(df, question, tmp_path)
    assert paths and all(p.exists() for p in paths)
    fig, png = kept[0]
    assert outside_canvas(fig, png) == []
    text = all_text(fig)  # a placeholder, or a figure that says no bar or point had an ok repetition
    assert f"nothing drawn: 0 of {len(df)} records ok" in text or re.search(r"no \w+ has an ok repetition", text)


@pytest.mark.parametrize("question", ["in-order", "oversubscription", "rng"])
def test_a_cell_that_lost_a_repetition_says_so(question, kept, tmp_path):
    df = TABLES[question]()
    cell = df.loc[df["num_workers"] > 0, "cell_id"].iloc[0]
    df = df.drop(df.index[(df["cell_id"] == cell)][0])
    Q.draw_question_figures(df, question, tmp_path)
    fig, _ = kept[0]
    text = all_text(fig)
    assert "n = 3 repetitions per" in text and re.search(r"\((\d+, )*2(, \d+)* where stated\)", text)
    assert "n=2" in text  # at that bar, point or row


def test_oversubscription_shades_only_more_workers_than_cores(kept, tmp_path):
    df = TABLES["oversubscription"]()
    Q.draw_question_figures(df, "oversubscription", tmp_path)
    fig, _ = kept[0]
    single = df[df["ranks"].fillna(1) == 1]
    cores = float(single["cores"].max())
    above = sorted(n for n in single["num_workers"].unique() if n > cores)
    spans = [p for ax in fig.axes for p in ax.patches if p.get_width() > 0]
    assert len(spans) == single["workload"].nunique()  # one per loader's panel
    for p in spans:
        assert cores < p.get_x() < above[0]  # the point at workers = cores is not shaded


def test_draws_the_declared_question_whatever_the_name(tmp_path):
    df = cow_table(COW_OK).assign(study="my-memory-run")
    assert Q.draw_question_figures(df, "my-memory-run", tmp_path) == []  # nothing declares its question
    paths = Q.draw_question_figures(df.assign(question="cow-memory"), "my-memory-run", tmp_path)
    assert paths and paths[0].stem == "memory_growth_by_backing"


def test_other_studies_get_no_question_figure(tmp_path):
    df = pd.DataFrame({"study": ["quick"], "status": ["ok"], "workload": ["cpu"], "num_workers": [2]})
    assert Q.draw_question_figures(df, "quick", tmp_path) == []
    assert Q.draw_question_figures(df, "absent", tmp_path) == []


@pytest.mark.parametrize("question", QUESTIONS)
def test_shipped_study_validates_and_answers_its_question(question):
    from loaderbench.study.study_file import load_study

    study = load_study(f"loaderbench/studies/{question}.toml", max_cores=16)
    assert study.name == question
    cells = pd.DataFrame([c.config for c in study.cells]).assign(study=question, status="ok")
    assert question_of(question, cells) == question
    assert question_of("renamed", cells.assign(study="renamed", question=question)) == question  # as declared


def test_ladder_study_is_exactly_the_six_rungs():
    from loaderbench.study.study_file import load_study

    study = load_study("loaderbench/studies/ladder.toml", max_cores=16)
    cells = pd.DataFrame([c.config for c in study.cells])
    assert sorted(D.ladder_rung(cells)) == sorted(D.RUNGS)


def test_a_figure_that_cannot_read_the_records_says_so(tmp_path):
    df = TABLES["in-order"]().drop(columns=["batch_wait_p99_s"])
    with pytest.warns(UserWarning, match="could not draw"):
        paths = Q.draw_question_figures(df, "in-order", tmp_path)
    assert paths and paths[0].stem == "tail_latency_in_order"
