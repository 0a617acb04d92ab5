"""Disturbed repetitions on synthetic records: the margins, the store keeping a disturbed attempt, which repetitions
are measured again within the budget, the normalized throughput in the table, the summary, compare, tune and the
bench's rerun agreement."""

import pytest

from loaderbench.errors import StudyError
from loaderbench.schema import disturbance as d
from loaderbench.schema.record import Record
from loaderbench.schema.record_row import flatten
from loaderbench.schema.store import Store
from loaderbench.study.remeasure import StudyReference, budget, remeasure_tasks
from loaderbench.study.study_file import parse_study

MARGINS = d.Margins(speed=0.10, others=0.10)


def machine(py=100.0, jpeg=500.0, py_change=0.0, jpeg_change=0.0, others=0.0, **extra) -> dict:
    return {
        "python_per_s": py,
        "jpeg_per_s": jpeg,
        "python_change": py_change,
        "jpeg_change": jpeg_change,
        "others_share": others,
        "steal_fraction": 0.0,
        "cost_s": 0.1,
        **extra,
    }


def record(cell_id="c1", rep=0, sps=400.0, study="s", config=None, **m) -> Record:
    return Record(
        study=study,
        cell_id=cell_id,
        repetition=rep,
        config=config or {"workload": "cpu"},
        status="ok",
        launcher={"kind": "local"},
        started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:00:03+00:00",
        metrics={"samples_per_s": sps, "machine": machine(**m)},
    )


@pytest.mark.parametrize(
    ("m", "reference", "fragment"),
    [
        ({"py_change": -0.15}, None, "python reference moved -15.0%"),
        ({"py": 70.0}, 100.0, "ran -30.0% off the study's median"),
        ({"others": 0.45}, None, "other processes took 45%"),
    ],
)
def test_each_margin_flags_a_repetition_and_says_why(m, reference, fragment):
    why = d.reasons(machine(**m), reference, MARGINS)
    assert len(why) == 1 and fragment in why[0]


def test_the_jpeg_references_move_is_recorded_but_not_judged():
    # its reading before the window depends on the cell's own state, so it would flag the cell, not the machine
    assert d.reasons(machine(jpeg_change=0.9), None, MARGINS) == []


def test_within_every_margin_nothing_is_flagged():
    assert d.reasons(machine(py=105.0, py_change=0.09, jpeg_change=-0.09, others=0.09), 100.0, MARGINS) == []


def test_judge_writes_the_verdict_and_what_it_was_judged_by():
    metrics = {"samples_per_s": 1.0, "machine": machine(others=0.5)}
    assert d.judge(metrics, 100.0, MARGINS) is True
    m = metrics["machine"]
    assert m["disturbed"] and m["study_python_per_s"] == 100.0 and m["margins"] == {"speed": 0.1, "others": 0.1}
    assert d.judge({"samples_per_s": 1.0}, 100.0, MARGINS) is None  # no reference: nothing to judge


def test_the_store_replaces_a_disturbed_record_and_keeps_what_it_read(tmp_path):
    store = Store(tmp_path)
    first = record(sps=300.0, others=0.5)
    d.judge(first.metrics, None, MARGINS)
    store.write(first)
    second = record(sps=410.0)
    d.judge(second.metrics, 100.0, MARGINS)
    store.write(second)
    kept = store.read("s", "c1", 0)
    assert kept.samples_per_s == 410.0 and kept.attempt == 2 and not kept.disturbed
    (earlier,) = kept.previous_attempts
    assert earlier["status"] == "ok" and earlier["metrics"]["samples_per_s"] == 300.0
    assert earlier["metrics"]["machine"]["disturbed"]
    with pytest.raises(FileExistsError):  # an undisturbed ok record is never measured twice
        store.write(record(sps=1.0))


QUICKISH = {
    "study": {"name": "s", "repetitions": 2, "warmup_batches": 1, "measure_batches": 4},
    "matrix": {"workload": "cpu", "num_workers": [0, 1, 2], "cores": 1},
}


def write_study(tmp_path, disturbed: set[tuple[int, int]], **settings):
    """Every repetition of QUICKISH's 3 cells written, those at (cell index, rep) in `disturbed` judged disturbed."""
    study = parse_study({**QUICKISH, "study": {**QUICKISH["study"], **settings}}, where="test")
    store = Store(tmp_path)
    for i, cell in enumerate(study.cells):
        for rep in range(2):
            r = record(cell.cell_id, rep, config=cell.config, others=0.5 if (i, rep) in disturbed else 0.0)
            d.judge(r.metrics, None, MARGINS)
            store.write(r)
    return study, store


def test_disturbed_repetitions_are_measured_again_within_the_budget_in_interleaved_order(tmp_path):
    study, store = write_study(tmp_path, {(0, 1), (1, 0), (2, 0), (2, 1)}, remeasure_budget=0.5)
    assert budget(study) == 3  # half of 3 cells x 2 repetitions
    tasks = remeasure_tasks(study, store)
    assert len(tasks) == 3
    assert [t.repetition for t in tasks] == [0, 0, 1]  # repetition 0's round first, as every plan runs them
    assert (
        remeasure_tasks(parse_study({**QUICKISH, "study": {**QUICKISH["study"], "remeasure_budget": 0}}, "t"), store)
        == []
    )


def test_the_budget_spent_in_earlier_runs_counts(tmp_path):
    study, store = write_study(tmp_path, {(0, 0), (1, 0)}, remeasure_budget=0.2)  # budget: 1
    (task,) = remeasure_tasks(study, store)
    again = record(task.cell.cell_id, task.repetition, config=task.cell.config, others=0.5)
    d.judge(again.metrics, None, MARGINS)
    store.write(again)  # measured again, still disturbed: the budget is spent
    assert remeasure_tasks(study, store) == []


def test_a_repetition_is_measured_again_at_most_max_remeasures_times(tmp_path):
    study, store = write_study(tmp_path, {(0, 0)}, remeasure_budget=1.0)
    for _ in range(d.MAX_REMEASURES):
        (task,) = remeasure_tasks(study, store)
        again = record(task.cell.cell_id, 0, config=task.cell.config, others=0.5)
        d.judge(again.metrics, None, MARGINS)
        store.write(again)
    assert remeasure_tasks(study, store) == []


def test_the_study_reference_is_the_median_so_far_and_judges_new_records(tmp_path):
    study, store = write_study(tmp_path, set())
    ref = StudyReference(study, store)
    assert ref.median == 100.0 and len(ref.rates) == 6
    slow = record(py=60.0)
    ref.judge(slow)
    assert slow.disturbed and "off the study's median" in slow.metrics["machine"]["disturbed_reasons"][0]


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("speed_margin", 0, "above 0 and at most 1"),
        ("others_margin", 1.5, "at most 1"),
        ("remeasure_budget", -0.1, "from 0 to 1"),
    ],
)
def test_bad_margins_are_named_with_what_is_allowed(key, value, allowed):
    with pytest.raises(StudyError) as exc:
        parse_study({**QUICKISH, "study": {**QUICKISH["study"], key: value}}, where="my.toml")
    assert "my.toml" in str(exc.value) and f"[study] {key} = {value!r}" in str(exc.value)
    assert allowed in str(exc.value)


def test_the_table_row_carries_the_normalized_throughput_and_the_remeasures(tmp_path):
    store = Store(tmp_path)
    first = record(config={"workload": "jpeg"}, others=0.5)
    d.judge(first.metrics, None, MARGINS)
    store.write(first)
    store.write(record(sps=500.0, config={"workload": "jpeg"}, jpeg=250.0))
    row = flatten(store.read("s", "c1", 0).to_json(), "p")
    assert row["samples_per_ref"] == pytest.approx(500.0 / 250.0)  # jpeg cells: per decode of the fixed JPEG
    assert row["remeasured"] == 1 and row["ref_python_per_s"] == 100.0
    cpu = flatten(record(sps=400.0).to_json(), "p")
    assert cpu["samples_per_ref"] == pytest.approx(4.0) and cpu["remeasured"] == 0  # others: per python unit
    assert flatten({**record().to_json(), "metrics": {"samples_per_s": 1.0}}, "p")["samples_per_ref"] is None
    # where a core's speed does not set the time, normalizing is not sound: no normalized value
    assert flatten(record(config={"workload": "sleep"}).to_json(), "p")["samples_per_ref"] is None
    assert flatten(record(config={"workload": "cpu", "storage": "http"}).to_json(), "p")["samples_per_ref"] is None


def _folder(root, sps_and_py: list[tuple[float, float]]):
    store = Store(root)
    for rep, (sps, py) in enumerate(sps_and_py):
        store.write(record(rep=rep, sps=sps, py=py))
    return root


def test_compare_gives_the_normalized_verdict_beside_the_raw_one(tmp_path):
    from loaderbench.analysis.report.compare_runs import compare_results, render

    # run b read 30% lower, and so did the machine's reference: raw slower, the same at the machine's own speed
    a = _folder(tmp_path / "a", [(400.0, 100.0), (404.0, 101.0), (396.0, 99.0)])
    b = _folder(tmp_path / "b", [(280.0, 70.0), (282.8, 70.7), (277.2, 69.3)])
    report = compare_results(a, b)
    (cell,) = report["cells"]
    assert cell["verdict"] == "slower" and cell["verdict_norm"] == "equivalent"
    assert cell["ratio_norm"] == pytest.approx(1.0)
    assert report["summary"]["verdicts_normalized"] == {"equivalent": 1}
    assert "normalized 1x equivalent" in render(report)


def test_the_cell_summary_shows_the_normalized_median_and_the_disturbed_counts(tmp_path):
    from loaderbench.analysis.table.records import load_records
    from loaderbench.analysis.table.summary import cell_summary

    write_study(tmp_path, {(0, 0)})
    df, _ = load_records(tmp_path)
    s = cell_summary(df).set_index("cell_id")
    assert (s["samples_per_ref_median"] == 4.0).all()
    assert s["disturbed"].sum() == 1 and s["remeasured"].sum() == 0


def test_the_report_states_the_machines_noise(tmp_path):
    from loaderbench.analysis.report.tables import machine_noise
    from loaderbench.analysis.table.records import load_records

    store = Store(tmp_path)
    for rep, py in enumerate([90.0, 100.0, 110.0, 100.0]):
        store.write(record(rep=rep, py=py, py_change=0.02 * rep))
    df, _ = load_records(tmp_path)
    text = machine_noise(df)
    assert "ran at 100 units/s (median)" in text and "its interquartile range" in text
    assert "6.0% at most" in text and "0 disturbed repetitions measured again" in text


def test_the_report_states_what_the_probe_took_and_where_it_ran(tmp_path):
    from loaderbench.analysis.report.tables import probe_cost
    from loaderbench.analysis.table.records import load_records

    store = Store(tmp_path)
    for rep, (share, off) in enumerate([(0.01, [1]), (0.03, []), (0.02, [1])]):
        r = record(rep=rep)
        r.metrics["probe"] = {"cpu_s": 0.1, "cpu_share": share, "off_cell_cpus": off}
        store.write(r)
    df, _ = load_records(tmp_path)
    text = probe_cost(df)
    assert "took 2.0% of one CPU (median over 3 repetitions; 3.0% at most)" in text
    assert "CPUs the cell did not use in 2 of 3" in text


def test_rerun_agreement_counts_cells_within_each_tolerance():
    from loaderbench.bench.rerun_agreement import agreement, cell_values, first_ok_value

    a = {
        "x": {"raw_first": [100.0], "raw": [100.0], "normalized": [1.0], "combined": [1.0]},
        "y": {"raw_first": [100.0], "raw": [100.0], "normalized": [1.0], "combined": [1.0]},
    }
    b = {
        "x": {"raw_first": [120.0], "raw": [104.0], "normalized": [1.01], "combined": [1.01]},
        "y": {"raw_first": [92.0], "raw": [92.0], "normalized": [0.99], "combined": [0.99]},
    }
    got = agreement(a, b)
    assert got["raw_first"]["within_5pct"] == 0 and got["raw_first"]["within_10pct"] == 0.5
    assert got["raw"]["within_5pct"] == 0.5 and got["raw"]["worst_deviation"] == pytest.approx(0.08)
    assert got["normalized"]["within_5pct"] == 1.0 and got["combined"]["within_5pct"] == 1.0

    first = record(sps=300.0, others=0.5)
    d.judge(first.metrics, None, MARGINS)
    replaced = record(sps=410.0).next_attempt(first)
    assert first_ok_value(replaced) == 300.0 and first_ok_value(first) == 300.0
    assert cell_values([replaced])["c1"] == {
        "raw_first": [300.0],
        "raw": [410.0],
        "normalized": [4.1],
        "combined": [4.1],
    }
    sleep = record(sps=50.0, config={"workload": "sleep"})
    assert cell_values([sleep])["c1"] == {"raw_first": [50.0], "raw": [50.0], "normalized": [], "combined": [50.0]}


def test_tune_shows_each_settings_median_at_the_machines_own_speed():
    from loaderbench.tune.evidence import Evidence, Observation
    from loaderbench.tune.tune_json import setting_row

    class Cand:
        key, settings = "k", (("num_workers", 2),)

    def ev(values, norms):
        return Evidence(Cand(), [Observation("ok", v, normalized=n) for v, n in zip(values, norms)])

    a, b = ev([100, 110, 90], [1.0, 1.0, 1.0]), ev([50, 55, 45], [0.5, 0.5, 0.5])
    row = setting_row(b, a)
    assert row["median_normalized"] == 0.5 and row["ratio"] == 0.5 and row["ratio_normalized"] == 0.5
    assert setting_row(ev([1, 2, 3], [1.0, None, 1.0]))["median_normalized"] is None  # not every repetition has it


def test_the_quick_rerun_study_is_a_valid_12_cell_study():
    from loaderbench.bench.rerun_agreement import QUICK_STUDY

    study = parse_study(QUICK_STUDY, where="test", max_cores=2)
    assert len(study.cells) == 12 and study.settings.remeasure_budget == d.REMEASURE_BUDGET
