"""The reference records shipped from a GPU node stay readable by the analysis and keep deciding the claims
they were kept for (a change to the record schema or a claim's rule that orphaned them would show here)."""

import subprocess
from pathlib import Path

import pytest

from loaderbench.analysis.claims import claims_table
from loaderbench.analysis.table.records import load_records
from loaderbench.stats.verdicts import FAILS, HOLDS, NOT_MEASURED
from tests.conftest import REPO

H100 = REPO / "results" / "reference" / "h100"


def test_h100_records_load_from_a_cuda_device():
    df, report = load_records(H100, use_cache=False)
    assert not report.skipped
    counts = df.groupby("study").size().to_dict()
    assert counts == {"gpu-feed": 43, "ladder": 30}
    assert (df["status"] == "ok").all()
    assert set(df["consumer"]) == {"gpu"} and set(df["env_cuda_device"]) == {"NVIDIA H100 80GB HBM3"}
    assert (Path(H100) / "README.md").exists()


def test_the_h100_readme_is_rendered_from_its_records_kept_whole():
    from loaderbench.analysis.findings.reference_records import readme_text

    readme = readme_text(H100)
    assert (H100 / "README.md").read_text() == readme
    # its records were not copied by `loaderbench reference`: nothing was trimmed, and their code is not recoverable
    assert "| trimmed | nothing:" in readme and "`raw` block" not in readme
    assert "| `ladder` | 30 | 6 | 5 |" in readme and "30 records: uncommitted changes on top of 72b554886ea0" in readme


def test_h100_ladder_decides_every_ladder_claim():
    df, _ = load_records(H100, use_cache=False)
    ladder = claims_table(df).query("question == 'ladder'")
    assert len(ladder) == 12
    assert (ladder["verdict"] != NOT_MEASURED).all()
    published = ladder[ladder["number"].isin(["#39", "#1", "#27", "#42"])]
    assert len(published) == 9 and (published["verdict"] == HOLDS).all(), published[["claim", "evidence"]].to_string()


def test_h100_gpu_feed_decides_its_rules_of_thumb():
    df, _ = load_records(H100, use_cache=False)
    feed = claims_table(df).query("question == 'gpu-feed' and number in ['#36', '#38']")
    assert len(feed) == 2 and (feed["study"] == "gpu-feed").all()
    assert (feed["verdict"] == FAILS).all(), feed[["claim", "evidence"]].to_string()


def test_h100_records_decide_the_copy_claims():
    """Pinned copies about ten times pageable ones (#33); whether a non_blocking copy frees the host waits for
    records with blocking copies beside (#34); the pin-memory thread's share grows with workers (#35); the pin and
    prefetcher steps are decided on their own (#40)."""
    df, _ = load_records(H100, use_cache=False)
    t = claims_table(df).set_index("claim")
    by = claims_table(df).groupby("number")
    copies = by.get_group("#33")
    assert (copies["verdict"] == HOLDS).all() and (copies["study"] == "gpu-feed").all(), copies["evidence"].iloc[0]
    (free,) = by.get_group("#34").itertuples()
    assert free.question == "gpu-feed" and free.verdict == NOT_MEASURED, free.evidence
    assert "blocking copies" in free.evidence
    pin = by.get_group("#35").iloc[0]
    assert pin["verdict"] != NOT_MEASURED and "pin thread's share" in pin["evidence"], pin["evidence"]
    steps = by.get_group("#40")
    assert len(steps) == 2 and (steps["verdict"] != NOT_MEASURED).all(), steps["evidence"].tolist()
    assert t.loc["with workers, a step takes about max(load, train), not their sum", "verdict"] == NOT_MEASURED


def test_claims_this_machine_cannot_measure_point_to_the_reference():
    from loaderbench.analysis.rules.claim import GPU_REFERENCE

    table = claims_table(load_records(H100, use_cache=False)[0].iloc[0:0])  # no records at all
    gpu = table[table["question"].isin(["ladder", "gpu-feed"])]
    assert len(gpu) == 19 and (gpu["verdict"] == NOT_MEASURED).all()
    cpu_side = gpu["number"].isin(["#3", "#4"])  # a simulated step on a CPU machine measures these
    assert gpu[cpu_side]["evidence"].str.contains("STUDY=loaderbench/studies/gpu-feed-small.toml").all()
    gpu = gpu[~cpu_side]
    assert gpu["evidence"].str.contains(f"make figures RESULTS={GPU_REFERENCE}", regex=False).all()
    assert (REPO / GPU_REFERENCE).is_dir()


# --- copying a results folder into results/reference/<machine>/ ---------------------------------------------

HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def _results(tmp_path):
    """A small results folder: one study with an ok record carrying raw per-batch times, a failed record, a
    torn temp file and a JSON file that is no record."""
    import json

    from loaderbench.fake_records.questions import rec

    root = tmp_path / "results"
    (root / "in-order").mkdir(parents=True)
    env = {"git_commit": HEAD, "load_1m_at_start": 0.2, "logical_cpus": 2}
    ok = rec(
        "in-order",
        {"in_order": True, "num_workers": 2},
        {"samples_per_s": 100.0, "memory_timeline": [[0, 1, 2]], "machine": {"others_share": 0.01}},
        0,
        env=env,
    )
    ok["raw"] = {"t_iter": [0.0], "got": [[0.1, 0.2] * 500], "done": [[0.15, 0.25] * 500]}
    bad = rec(
        "in-order",
        {"in_order": False, "num_workers": 2},
        {},
        0,
        "failed",
        {"kind": "worker_crashed", "message": "m"},
        env=env,
    )
    for r in (ok, bad):
        (root / "in-order" / f"{r['cell_id']}-r0.json").write_text(json.dumps(r, indent=1))
    (root / "in-order" / ".c1-r0.json.123.tmp").write_text("{")
    (root / "in-order" / "notes.json").write_text('{"a": 1}')
    return root, ok, bad


def test_a_copy_keeps_every_record_whole_but_its_raw_times(tmp_path):
    import json

    from loaderbench.analysis.findings.reference_records import copy_reference

    root, ok, bad = _results(tmp_path)
    done = copy_reference(root, tmp_path / "ref", "box-2cpu", note="in order and not, at 2 workers")
    folder = tmp_path / "ref" / "box-2cpu"
    assert done.records == {"in-order": 2} and done.bytes_after < done.bytes_before / 3
    assert done.left_out == [(str(root / "in-order" / "notes.json"), "not a record of this study")]
    copied = {p.name: json.loads(p.read_text()) for p in (folder / "in-order").glob("*.json")}
    assert set(copied) == {f"{ok['cell_id']}-r0.json", f"{bad['cell_id']}-r0.json"}
    assert copied[f"{ok['cell_id']}-r0.json"] == {k: v for k, v in ok.items() if k != "raw"}
    assert copied[f"{bad['cell_id']}-r0.json"] == bad  # a failure is a result: kept as it was
    assert all("\n" not in p.read_text().rstrip("\n") for p in (folder / "in-order").glob("*.json"))  # compact
    # the copy reads back as the source does (raw aside, which no column holds)
    src, _ = load_records(root, use_cache=False)
    dst, _ = load_records(folder, use_cache=False)
    cols = [c for c in src.columns if c not in ("path", "record_bytes", "record_mtime_ns", "record_digest")]
    assert (
        src[cols]
        .sort_values("cell_id")
        .reset_index(drop=True)
        .equals(dst[cols].sort_values("cell_id").reset_index(drop=True))
    )
    readme = (folder / "README.md").read_text()
    assert "# Reference records: box-2cpu" in readme and "`raw` block" in readme
    assert "| `in-order` | 2 (1 failed) | 2 | 1 |" in readme and "in order and not, at 2 workers |" in readme
    # how quiet it was and where the code is come from the records, not from the note
    assert "alone: load 0.2 at the start (quiet below 1 on 2 CPUs)" in readme and "| committed |" in readme
    assert not (folder / ".records-cache.parquet").exists()


def test_a_later_copy_replaces_its_study_and_keeps_the_notes_of_the_others(tmp_path):
    import shutil

    from loaderbench.analysis.findings.reference_records import copy_reference, notes

    root, ok, _ = _results(tmp_path)
    shutil.copytree(root / "in-order", root / "rng")
    for p in (root / "rng").glob("*.json"):
        p.write_text(p.read_text().replace('"in-order"', '"rng"'))
    copy_reference(root, tmp_path / "ref", "m", studies=["in-order"], note="first")
    (root / "in-order" / f"{ok['cell_id']}-r0.json").unlink()
    copy_reference(root, tmp_path / "ref", "m", studies=["rng", "in-order"], note=None)
    folder = tmp_path / "ref" / "m"
    assert len(list((folder / "in-order").glob("*.json"))) == 1  # replaced whole, not merged
    assert len(list((folder / "rng").glob("*.json"))) == 2
    assert notes(folder) == {"in-order": "first"}
    readme = (folder / "README.md").read_text()
    assert "| `in-order` |" in readme and "| `rng` |" in readme


@pytest.mark.parametrize(
    "note", ["alone, 2026-11-26; load 4.34 at its start", "a quiet machine", "Load average 0.2", "undisturbed"]
)
def test_a_note_that_says_how_quiet_the_machine_was_is_refused(tmp_path, note):
    from loaderbench.analysis.findings.reference_records import copy_reference
    from loaderbench.errors import LoaderbenchError

    root, _, _ = _results(tmp_path)
    with pytest.raises(LoaderbenchError, match=r"--note .*computed from the records"):
        copy_reference(root, tmp_path / "ref", "m", note=note)
    assert not (tmp_path / "ref" / "m").exists()  # nothing copied


def _copied_not_alone(tmp_path):
    """A reference root whose one machine's records began at load 1.5 on 2 CPUs (not alone), with a note."""
    import json

    from loaderbench.analysis.findings.reference_records import copy_reference

    root, _, _ = _results(tmp_path)
    for path in (root / "in-order").glob("*.json"):
        rec = json.loads(path.read_text())
        if "env" in rec:
            rec["env"]["load_1m_at_start"] = 1.5
            path.write_text(json.dumps(rec))
    copy_reference(root, tmp_path / "ref", "m", note="in order and not")
    folder = tmp_path / "ref" / "m"
    assert "| not alone: load 1.5 at the start" in (folder / "README.md").read_text()
    return folder


def test_a_kept_note_that_says_alone_against_the_records_is_refused_where_it_would_show(tmp_path):
    """A note written into reference.json by hand that says "alone" where the records say "not alone" reaches
    neither the README nor the findings page: both refuse it, naming the file."""
    import json

    from loaderbench.analysis.findings.page import main
    from loaderbench.analysis.findings.reference_records import copy_reference, write_readme
    from loaderbench.errors import LoaderbenchError

    folder = _copied_not_alone(tmp_path)
    meta = json.loads((folder / "reference.json").read_text())
    meta["notes"]["in-order"] = "alone, load 0.2 at its start"
    (folder / "reference.json").write_text(json.dumps(meta))
    with pytest.raises(LoaderbenchError, match=r"reference\.json: the note of study in-order: it says 'alone'"):
        write_readme(folder)
    page = tmp_path / "p.md"
    page.write_text("<!-- begin findings: study-times m -->\n<!-- end findings: study-times -->\n")
    with pytest.raises(LoaderbenchError, match="the note of study in-order"):
        main(str(folder.parent), str(page), write=True)
    with pytest.raises(LoaderbenchError, match="the note of study in-order"):  # before anything is copied
        copy_reference(tmp_path / "results", folder.parent, "m")
    assert "alone, load 0.2" not in (folder / "README.md").read_text()


def test_a_readme_edited_by_hand_makes_the_findings_check_fail_until_written(tmp_path, capsys):
    from loaderbench.analysis.findings.page import main

    folder = _copied_not_alone(tmp_path)
    readme = folder / "README.md"
    page = tmp_path / "p.md"
    page.write_text("<!-- begin findings: study-times m -->\n<!-- end findings: study-times -->\n")
    assert main(str(folder.parent), str(page), write=True) == 0
    assert main(str(folder.parent), str(page), write=False) == 0
    rendered = readme.read_text()
    readme.write_text(rendered.replace("| not alone: load 1.5", "| alone: load 1.5"))
    capsys.readouterr()
    assert main(str(folder.parent), str(page), write=False) == 1
    assert f"{readme}: differs from its rendering from the records" in capsys.readouterr().err
    assert main(str(folder.parent), str(page), write=True) == 0
    assert readme.read_text() == rendered


def test_no_shipped_note_says_how_quiet_the_machine_was():
    import json

    from loaderbench.analysis.findings.provenance import note_problem

    kept = {
        f"{p.parent.name}/{study}": note
        for p in (REPO / "results" / "reference").glob("*/reference.json")
        for study, note in json.loads(p.read_text()).get("notes", {}).items()
    }
    assert kept, "no notes shipped: the check below would be vacuous"
    assert {k: why for k, n in kept.items() if (why := note_problem(n))} == {}


@pytest.mark.parametrize(
    "commit, why",
    [
        (HEAD + "-dirty", "uncommitted changes on top of"),
        ("0" * 40, "is not in this repository"),
        (None, "no commit recorded"),
    ],
)
def test_records_whose_code_cannot_be_recovered_are_refused_by_name(tmp_path, commit, why):
    import json

    from loaderbench.analysis.findings.reference_records import copy_reference
    from loaderbench.errors import LoaderbenchError

    root, ok, _ = _results(tmp_path)
    path = root / "in-order" / f"{ok['cell_id']}-r0.json"
    record = json.loads(path.read_text())
    record["env"]["git_commit"] = commit
    path.write_text(json.dumps(record))
    with pytest.raises(LoaderbenchError, match="1 records cannot be published") as err:
        copy_reference(root, tmp_path / "ref", "m")
    assert str(path) in str(err.value) and why in str(err.value)
    assert not (tmp_path / "ref" / "m").exists()  # nothing copied


@pytest.mark.parametrize(
    "load, others, words",
    [(0.2, 0.01, "alone: "), (1.5, 0.01, "not alone: load 1.5 "), (0.2, 0.3, "not alone: "), (None, 0.01, "not known")],
)
def test_alone_is_computed_from_the_load_and_the_others_share(load, others, words):
    from loaderbench.analysis.findings.provenance import conditions
    from loaderbench.fake_records.questions import rec, table

    env = {"logical_cpus": 2} | ({"load_1m_at_start": load} if load is not None else {})
    rows = table(
        [rec("s", {}, {"samples_per_s": 1.0, "machine": {"others_share": others}}, r, env=env) for r in range(3)]
    )
    assert conditions(rows).startswith(words)


def test_bad_copies_are_one_clear_error(tmp_path):
    import pytest

    from loaderbench.analysis.findings.reference_records import copy_reference
    from loaderbench.errors import LoaderbenchError

    root, _, _ = _results(tmp_path)
    with pytest.raises(LoaderbenchError, match="--machine 'My Box'"):
        copy_reference(root, tmp_path / "ref", "My Box")
    with pytest.raises(LoaderbenchError, match="no records of study quick; studies there: in-order"):
        copy_reference(root, tmp_path / "ref", "m", studies=["quick"])
    with pytest.raises(LoaderbenchError, match="no study folders"):
        copy_reference(tmp_path / "empty", tmp_path / "ref", "m")
    assert not (tmp_path / "ref" / "m").exists()  # nothing half-copied
