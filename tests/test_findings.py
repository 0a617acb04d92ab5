"""docs/findings.md is generated from the shipped reference records: every block renders from them as the page
shows it, a rule change that flips a published verdict makes the page differ, a block without records says
what is missing instead of showing numbers, and the blocks of the CPU studies render from records of theirs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from loaderbench.analysis.claims.claims_table import claims_table
from loaderbench.analysis.findings.blocks import BLOCKS
from loaderbench.analysis.findings.common import median_text
from loaderbench.analysis.findings.page import BEGIN, COMMAND, main, render
from loaderbench.errors import LoaderbenchError
from loaderbench.fake_records import questions as Q
from loaderbench.fake_records.storage import storage_table
from tests.conftest import REPO

PAGE = REPO / "docs" / "findings.md"
REFERENCE = REPO / "results" / "reference"


def _shipped() -> set[str]:
    return {p.name for p in REFERENCE.iterdir() if p.is_dir()}


def test_the_page_is_what_the_shipped_records_render():
    text = PAGE.read_text()
    new, report = render(text, REFERENCE)
    stale = [r.name for r in report if not r.current]
    assert new == text, f"docs/findings.md differs from the records in blocks {stale}: run `{COMMAND}`"
    # every block of the generator is on the page, and nothing between markers is hand-written
    assert {r.name for r in report} == set(BLOCKS)
    # not vacuous: every block whose machines are shipped rendered from their records (none lacks a study),
    # the GPU node is shipped, and a block may show no numbers only for a machine that is not
    shipped = _shipped()
    assert "h100" in shipped
    for r in report:
        if set(r.machines) <= shipped:
            assert not r.missing, f"{r.name}: the shipped records lack {r.missing}"
        else:
            assert r.missing
    assert {"ladder", "gpu-feed"} <= {r.name for r in report if not r.missing}


def _gpu_node_blocks() -> str:
    """The page's blocks that read the GPU node's records alone, as the page has them (the test above checks them
    against the records): a page that renders in seconds, where the whole page takes a dozen."""
    lines, out, keep = PAGE.read_text().split("\n"), [], False
    for ln in lines:
        m = BEGIN.match(ln)
        keep = keep or bool(m and m["machines"].split() == ["h100"])
        if keep:
            out.append(ln)
        if keep and ln.startswith("<!-- end findings:"):
            keep = False
    return "\n".join(out) + "\n"


def test_a_rule_change_that_flips_a_published_verdict_makes_the_page_differ(monkeypatch, tmp_path, capsys):
    page = tmp_path / "findings.md"
    page.write_text(_gpu_node_blocks())
    assert "<!-- begin findings: ladder h100 -->" in page.read_text()
    assert main(str(REFERENCE), str(page), write=False) == 0
    # a stricter match than the ladder's: the published speed-ups no longer hold on the H100 records
    monkeypatch.setattr("loaderbench.analysis.questions.ladder.LADDER_MATCH_FACTOR", 1.01)
    capsys.readouterr()
    assert main(str(REFERENCE), str(page), write=False) == 1
    out, err = capsys.readouterr()
    assert "ladder" in err and COMMAND in err
    assert re.search(r"^-\| #39 \| tutorial ladder .*\*\*holds\*\*", out, re.M)
    assert re.search(r"^\+\| #39 \| tutorial ladder .*\*\*(does not hold|inconclusive)\*\*", out, re.M)
    # --write makes the page follow, and then it matches
    assert main(str(REFERENCE), str(page), write=True) == 0
    assert main(str(REFERENCE), str(page), write=False) == 0
    assert page.read_text() != _gpu_node_blocks()


def test_a_block_without_records_names_them_and_shows_no_numbers(tmp_path, capsys):
    page = tmp_path / "p.md"
    page.write_text(
        "x\n<!-- begin findings: in-order nowhere -->\n| 1 | 2 |\n<!-- end findings: in-order -->\n"
        "<!-- begin findings: study-times nowhere -->\n<!-- end findings: study-times -->\ny\n"
    )
    assert main(str(tmp_path), str(page), write=True) == 0
    text = page.read_text()
    assert text.startswith("x\n") and text.endswith("\ny\n")
    assert "no records of nowhere/in-order" in text and "| 1 | 2 |" not in text
    assert "no records of nowhere under" in text
    err = capsys.readouterr().err
    assert "in-order: not generated, no records of nowhere/in-order" in err
    assert "0 of 2 blocks rendered from records" in err


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- begin findings: nosuch h100 -->\n<!-- end findings: nosuch -->", "unknown block 'nosuch'"),
        ("<!-- begin findings: ladder h100 -->\n", "has no `<!-- end findings: ladder -->`"),
        ("<!-- begin findings: where h100 -->\n<!-- end findings: where -->", "takes 3 machine folder"),
        ("<!-- end findings: where -->", "closes no block"),
    ],
)
def test_a_broken_marker_is_one_error_naming_its_line(tmp_path, text, message):
    page = tmp_path / "p.md"
    page.write_text("intro\n" + text + "\n")
    with pytest.raises(LoaderbenchError, match=re.escape(message)) as exc:
        main(str(REFERENCE), str(page), write=False)
    assert str(page) in str(exc.value) and "line 2" in str(exc.value)


def test_every_marker_on_the_page_is_well_formed():
    lines = PAGE.read_text().split("\n")
    begins = [ln for ln in lines if ln.startswith("<!-- begin findings:")]
    assert begins and all(BEGIN.match(ln) for ln in begins)


# --- the CPU machine's blocks, on records of their studies --------------------------------------------------


def _tables():
    return {
        "start-method": Q.sm_table(),
        "cow-memory": Q.cow_table(Q.COW_OK, gc_freeze=True),
        "persistence": Q.pers_table(Q.GAP_OK, Q.TOTAL_OK),
        "rng": Q.rng_table(),
        "in-order": Q.in_order_table(
            {(True, False): 0.01, (True, True): 0.09, (False, False): 0.01, (False, True): 0.011},
            {(True, False): 100.0, (True, True): 20.0, (False, False): 100.0, (False, True): 110.0},
        ),
        "oversubscription": Q.over_table(Q.PEAK),
        "storage": storage_table(),
        "sharing": Q.sharing_table(),
    }


@pytest.mark.parametrize(
    "study", ("start-method", "cow-memory", "persistence", "sharing", "oversubscription", "rng", "in-order", "storage")
)
def test_a_claim_study_block_shows_its_cells_and_the_verdicts_of_its_claims(study):
    df = _tables()[study]
    text = BLOCKS[study].render([df], [{}])
    table = claims_table(df)
    mine = table[table["question"] == study]
    assert len(mine)
    for number, claim, verdict in zip(mine["number"], mine["claim"], mine["verdict"]):
        line = next(
            ln for ln in text.splitlines() if ln.startswith(f"| {number} | {claim.replace('|', chr(92) + '|')} |")
        )
        assert f"| **{verdict}** |" in line
    # one line per cell of the study, each with its ok repetitions
    cells = df.groupby("cell_id").ngroups
    assert len(re.findall(r"^\| .* \| \d+/\d+ \|", text, re.M)) == cells


def test_the_in_order_block_shows_the_medians_it_read():
    df = _tables()["in-order"]
    text = BLOCKS["in-order"].render([df], [{}])
    # in order with a straggler: p99 of 90 ms (median of 89.1, 90, 90.9), 20 samples/s
    assert "| true | 10 | 3/3 | 90 | 20 |" in text


def test_quick_blocks_render_the_sweep_from_its_records():
    import pandas as pd

    from loaderbench.analysis.table.records import flatten
    from loaderbench.fake_records.studies import study_cells, study_records

    cells = study_cells(
        workloads=(("sleep", None), ("cpu", None), ("jpeg", "pil")),
        cores=(1, 2),
        n_sweep=(0, 1, 2, 4, 8),
        start_methods=("fork",),
        max_workers_per_core=8,
    )
    recs = study_records("quick", cells, repetitions=3, seed=1, random_failures=False, raw=False)
    df = pd.DataFrame([flatten(r, f"/q/{i}.json") for i, r in enumerate(recs)])
    text = BLOCKS["quick-throughput"].render([df], [{}])
    header = next(ln for ln in text.splitlines() if ln.startswith("| num_workers"))
    assert header == "| num_workers | 0 | 1 | 2 | 4 | 8 |"
    assert len([ln for ln in text.splitlines() if re.match(r"\| (sleep|cpu|jpeg)", ln)]) == 6
    ok = df[(df["workload"] == "sleep") & (df["cores"] == 2) & (df["num_workers"] == 4)]
    expected = median_text(np.asarray(ok["samples_per_s"], dtype=float), star=True)
    row = next(ln for ln in text.splitlines() if ln.startswith("| sleep") and "2 cores" in ln)
    assert row.split(" | ")[4] == expected
    measures = BLOCKS["quick-measures"].render([df], [{}])
    assert "run time of the quick study (" in measures and "`sleep` on 1 core: 8 workers over 0 workers" in measures
    assert "JPEG decode only, 0 workers" in measures


def test_the_cheap_work_block_shows_each_crossover_and_the_verdict():
    df = Q.cheap_table()
    text = BLOCKS["cheap-work"].render([df], [{}])
    row = next(ln for ln in text.splitlines() if ln.startswith("| 2 | 16 B |"))
    assert "between 10 and 30 µs per sample" in row
    assert "| #2 | num_workers = 0 wins" in text and "| **holds** |" in text


def test_the_claims_block_lists_every_numbered_claim_with_its_verdict():
    text = BLOCKS["claims"].render([Q.cheap_table(), Q.sm_table()], [{}, {}])
    rows = [ln for ln in text.splitlines() if re.match(r"^\| #\d+ \|", ln)]
    assert len(rows) == 57
    assert text.startswith("57 claims: ") and "Sources and where: R: " in text
    assert "| **holds** |" in next(ln for ln in rows if ln.startswith("| #2 |"))
    assert "| **not measured yet** |" in next(ln for ln in rows if ln.startswith("| #18 |"))


#: what a measured number looks like in prose: a throughput, a decimal speed-up, "N times", a percentage, a duration
#: (in digits or words: "0.5 s", "40 minutes", "one to two hours") and any number said to be approximate ("about 8")
_N = r"(\d[\d,]*(\.\d+)?|(one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|a few|several|many)\b)"
_ABOUT = r"\b(about|roughly|nearly|around|almost|approximately|some) "
MEASURED = re.compile(
    rf"({_ABOUT})?(\d[\d,]*(\.\d+)? ?(samples/s|images/s|img/s|GB/s|MB/s)|\b\d+\.\d+x\b|\b\d+(\.\d+)? times\b"
    r"|\b\d+(\.\d+)?%"
    rf"|\b{_N}(( to |-){_N})? ?(ms|s|µs|us|min|minutes?|seconds?|hours?|days?)\b)"
    rf"|{_ABOUT}\d[\d,]*(\.\d+)?"
)
#: numbers of the prose that are not measured here, each with why: the settings of a study or a rule, and what a
#: source claims (the claim quotes it). Anything else MEASURED finds goes in a generated table, or goes.
NOT_MEASURED_HERE = {
    "than 10% of their median": "the spread a star marks (a setting of the summaries)",
    "disagreed by more than 10%": "the same",
    "each by 5% or": "the margin the crossover rule asks",
    "on 90% intervals": "the rule's confidence",
    '"keeps up" at 90%': "MLPerf Storage's definition",
    "a 20 ms step": "the study's simulated step (a setting)",
    "the 5 ms-per-sample dataset": "the ladder's dataset (the tutorial's setting)",
    "the tutorial's 13%": "the source's number, which claim #27 quotes",
    "10 batches took 0.18 s at batch size 16 and 0.93 s at 128": "the source's numbers, which claim #43 quotes",
}


def measured_in_prose(text: str) -> list[str]:
    """Every measured-looking number of the page's prose (a paragraph read whole, so that a number wrapped onto
    the next line is read too) that NOT_MEASURED_HERE does not cover, as "line N: 'text'"."""
    found, lines = [], prose(text)
    paragraphs: list[list[tuple[int, str]]] = [[]]
    for (i, line), (j, _) in zip(lines, lines[1:] + [(0, "")]):
        paragraphs[-1].append((i, line))
        if not line.strip() or j != i + 1:
            paragraphs.append([])
    for para in paragraphs:
        joined, starts, pos = "", [], 0
        for i, line in para:
            starts.append((pos, i))
            joined += line + " "
            pos = len(joined)
        allowed = [(m.start(), m.end()) for phrase in NOT_MEASURED_HERE for m in re.finditer(re.escape(phrase), joined)]
        for m in MEASURED.finditer(joined):
            if not any(a <= m.start() and m.end() <= b for a, b in allowed):
                line_no = max(i for p, i in starts if p <= m.start())
                found.append(f"line {line_no}: {m.group(0)!r}")
    return found


def prose(text: str) -> list[tuple[int, str]]:
    """The page's lines outside the generated blocks, numbered."""
    out, generated = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("<!-- begin findings"):
            generated = True
        elif line.startswith("<!-- end findings"):
            generated = False
        elif not generated:
            out.append((i, line))
    return out


def test_the_prose_states_no_measured_number_the_records_do_not_render():
    """Numbers measured go in the generated tables, which a test renders from the records; the prose says what
    they show. A measured number typed into the prose would go stale unseen."""
    page = (REPO / "docs" / "findings.md").read_text(encoding="utf-8")
    found = measured_in_prose(page)
    assert not found, "measured numbers in the prose of docs/findings.md: " + "; ".join(found)
    # every exception is still on the page (a stale one would hide nothing, and say what is not there)
    assert [p for p in NOT_MEASURED_HERE if p not in " ".join(line for _, line in prose(page))] == []
    planted = page.replace(
        "## Start methods",
        "Fork ran at 1,234 samples/s, 2.5x spawn, 12% faster than forkserver; the study took about\n"
        "9 minutes, 20 s a cell, one to two hours in all.\n\n## Start methods",
        1,
    )
    assert [f.split(": ", 1)[1] for f in measured_in_prose(planted)] == [
        "'1,234 samples/s'",
        "'2.5x'",
        "'12%'",
        "'about 9 minutes'",
        "'20 s'",
        "'one to two hours'",
    ]
