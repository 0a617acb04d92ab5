"""Which records decide which claim, and the claims table (claims.csv, claims.md).

A claim is decided on the records that carry what its rule reads, whichever study produced them: a study
carries a question when its rows have the question's data (its `needs`) and vary no axis the question's
rules do not tell apart (its `axes`). Each claim is decided once, on one study's rows (studies are never
mixed): the study named for the question when it carries the claim, else the carrying study with the most
ok repetitions the rule reads; the evidence names it and the other studies that carried it too. A study
measured on several machines decides it once per machine (loaderbench.analysis.rules.machines). A claim no
study carries is "not measured yet", with the command that measures it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd

from loaderbench.analysis.questions import QUESTIONS as DECLARED
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.rules.catalogue import BY_NUMBER, CATALOGUE, SOURCES, WHERE
from loaderbench.analysis.rules.claim import EXTENSION, SEED, Claim, Question, narrow, varies, with_workers
from loaderbench.analysis.rules.machines import SEPARATOR, base_study, on_machine
from loaderbench.analysis.table.records import AXIS_COLUMNS, ok_rows
from loaderbench.locations import shipped_studies
from loaderbench.stats.verdicts import (
    MEANING,
    NOT_MEASURABLE,
    NOT_MEASURED,
    VERDICTS,
    Outcome,
    all_of,
    decision_rule_text,
)

COLUMNS = ["number", "source", "question", "study", "claim", "rule", "evidence", "verdict", "role"]
#: the numbered claims, one row each (`numbered`): the verdict of its rows in the source's own setting together,
#: and what the rows of settings the suite added found (`elsewhere`)
NUMBERED_COLUMNS = ["number", "claim", "source", "where", "verdict", "rows", "elsewhere"]
#: the question of the rows of claims no rule decides yet
LATER = "later studies"
QUESTION_LIST: list[Question] = list(DECLARED)
BY_NAME = {q.name: q for q in QUESTION_LIST}
#: The questions the studies answer, each with a study file of the same name in loaderbench/studies/.
QUESTIONS = tuple(BY_NAME)
CLAIMS: list[Claim] = [c for q in QUESTION_LIST for c in q.claims]


# --------------------------------------------------------------------------------------------------------
# which study answers which question (figures: one per study)


def question_of(study: str, rows: pd.DataFrame | None = None) -> str | None:
    """The question a study was made for: the one its records declare (`[study] question` of its study file,
    carried in each record's config as `question`), else, for records made before records carried it, the one the
    shipped study file of the same name declares (a study measured on several machines: its name less the machine).
    None when that is "scaling" (no claim question of its own), when the records declare more than one, or when
    nothing declares one. (This picks a study's question figure; the claims are bound to records by `carries`.)"""
    declared = rows["question"].dropna().unique() if rows is not None and "question" in rows else []
    if len(declared) > 1:
        return None
    name = str(declared[0]) if len(declared) else shipped_question(base_study(study))
    return name if name in BY_NAME else None


@cache
def shipped_question(study: str) -> str | None:
    """The question the shipped study file named `study` declares, or None (no such file, or none declared)."""
    path = shipped_studies().get(study)
    if path is None:
        return None
    try:
        return tomllib.loads(path.read_text()).get("study", {}).get("question")
    except (OSError, ValueError):
        return None


def studies_by_question(df: pd.DataFrame) -> dict[str, list[str]]:
    """The studies made for each question (as `question_of`: the question their records declare, else their shipped
    study file for records made before records carried it)."""
    out: dict[str, list[str]] = {q: [] for q in QUESTIONS}
    if df.empty or "study" not in df:
        return out
    for study, rows in df.groupby("study"):
        q = question_of(str(study), rows)
        if q:
            out[q].append(str(study))
    return out


# --------------------------------------------------------------------------------------------------------
# which records carry which claim


def varying_axes(rows: pd.DataFrame) -> list[str]:
    """The axes the rows vary, among cells with workers (values aside that only cells without workers lack)."""
    rows = narrow(rows, AXIS_COLUMNS)
    rows = with_workers(rows) if "num_workers" in rows else rows
    return [a for a in AXIS_COLUMNS if a in rows and varies(rows, a)]


def foreign_axes(question: Question, rows: pd.DataFrame, varying: list[str] | None = None) -> list[str]:
    """Axes the rows vary (varying_axes; `varying` when already known) that the question's rules do not tell
    apart; [] for a question whose rules separate every varying axis."""
    if not question.axes:
        return []
    return [a for a in (varying_axes(rows) if varying is None else varying) if a not in question.axes]


def carries(question: Question, claim: Claim, rows: pd.DataFrame, foreign: list[str] | None = None) -> bool:
    """The rows carry what the claim reads and vary nothing its question's rules do not tell apart (`foreign`:
    foreign_axes(question, rows) when already known)."""
    needs = claim.needs or question.needs
    try:
        return not (foreign_axes(question, rows) if foreign is None else foreign) and bool(needs(rows))
    except (KeyError, ValueError, TypeError):
        return False


def _amount(question: Question, rows: pd.DataFrame) -> int:
    rows = narrow(rows, ["status", *AXIS_COLUMNS, "samples_per_s"])
    read = question.counted(rows) if question.counted else with_workers(rows) if "num_workers" in rows else rows
    return len(ok_rows(read))


def _decide(claim: Claim, rows: pd.DataFrame) -> Outcome:
    try:
        return claim.decide(rows)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:  # a column the records lack
        return Outcome(NOT_MEASURED, f"the records lack what this rule reads ({type(exc).__name__}: {exc})")


def _tags(c: Claim) -> dict[str, str]:
    """The row's number (#N, "–" for a claim of the suite's own), the source of the numbered claim, and the row's
    role in it ("seed", or "extension: " and the setting it adds)."""
    role = SEED if c.role == SEED else f"{EXTENSION}: {c.setting}"
    if c.number is None:
        return {"number": "–", "source": "–", "role": role}
    return {"number": BY_NUMBER[c.number].tag, "source": BY_NUMBER[c.number].source, "role": role}


def _row(c: Claim, study: str, evidence: str, verdict: str) -> dict[str, str]:
    """A claim's row of the claims table, decided on `study` ("" when none)."""
    return {
        **_tags(c),
        "question": c.question,
        "study": study,
        "claim": c.claim,
        "rule": c.rule,
        "evidence": evidence,
        "verdict": verdict,
    }


def claims_for(df: pd.DataFrame, study: str, question: str | None = None) -> pd.DataFrame:
    """The claims of one question, decided on one study's records (a figure's header)."""
    rows = df[df["study"] == study] if "study" in df else df.iloc[0:0]
    question = question or question_of(study, rows)
    out = []
    for c in CLAIMS:
        if c.question != question:
            continue
        o = Outcome(NOT_MEASURED, f"no records of study {study}") if rows.empty else _decide(c, rows)
        out.append(_row(c, study, o.evidence, o.verdict))
    return pd.DataFrame(out, columns=COLUMNS)


def _not_carried(q: Question, c: Claim, named: list[str], groups: dict, foreign: dict) -> dict:
    own = [s for s in named if s in groups]
    extra = foreign[own[0]] if own else []
    why = (
        f"; study {', '.join(own)} does not carry what this rule reads"
        + (f" (it also varies {', '.join(extra)})" if extra else "")
        if own
        else ""
    )
    gpu = f" (records from a GPU node decide it: `make figures RESULTS={q.reference}`)" if q.reference else ""
    command = q.command
    if c.study:
        command, gpu = f"make local STUDY=loaderbench/studies/{c.study}.toml", ""
    return _row(c, "", f"no records carry it{why}; measure with `{command}`{gpu}", NOT_MEASURED)


def _pending_rows() -> list[dict]:
    """A "not measured yet" row for every numbered claim the coded rules leave open, naming what would decide
    it."""
    return [
        {
            "number": s.tag,
            "source": s.source,
            "question": LATER,
            "study": "",
            "claim": s.claim,
            "rule": f"no rule reads today's records for this: it needs {s.pending}",
            "evidence": f"not measured yet: {s.pending} ({WHERE[s.where]})",
            "verdict": NOT_MEASURED,
            "role": SEED,
        }
        for s in CATALOGUE
        if s.pending
    ]


Key = tuple[str, int]  # a claim: its question's name and its index among the question's claims


@dataclass
class StudyClaims:
    """What one study's rows say about the claims, so that claims are bound to studies without reading every
    study's rows again: per question the axes the rows vary that the question does not tell apart (foreign_axes)
    and the ok repetitions its rules read (the tie-break between studies carrying a claim); the claims the study
    carries; and the outcomes decided on its rows so far (only the claims bound to it are decided). Computed once
    per study (`study_claims`) and cached with the study's figures."""

    foreign: dict[str, list[str]]
    amount: dict[str, int]
    carried: set[Key]
    outcomes: dict[Key, Outcome] = field(default_factory=dict)


def study_claims(rows: pd.DataFrame) -> StudyClaims:
    """The StudyClaims of one study's rows (every status), with no outcome decided yet."""
    foreign: dict[str, list[str]] = {}
    amount: dict[str, int] = {}
    carried: set[Key] = set()
    varying = varying_axes(rows)
    for q in QUESTION_LIST:
        foreign[q.name] = foreign_axes(q, rows, varying)
        for j, c in enumerate(q.claims):
            if carries(q, c, rows, foreign[q.name]):
                carried.add((q.name, j))
                if q.name not in amount:
                    amount[q.name] = _amount(q, rows)
    return StudyClaims(foreign, amount, carried)


def bind(facts: dict[str, StudyClaims]) -> dict[Key, str]:
    """The study each carried claim is decided on (`facts` by study): the study named for the question when it
    carries the claim, else the carrying study with the most ok repetitions the rule reads."""
    out: dict[Key, str] = {}
    names = sorted(facts)
    for q in QUESTION_LIST:
        for j in range(len(q.claims)):
            carrying = [s for s in names if (q.name, j) in facts[s].carried]
            if carrying:
                own = [s for s in carrying if question_of(base_study(s)) == q.name]
                out[(q.name, j)] = own[0] if own else max(carrying, key=lambda s: (facts[s].amount[q.name], s))
    return out


def decide_claims(rows: pd.DataFrame, keys: list[Key]) -> dict[Key, Outcome]:
    """The outcomes of the claims `keys` decided on one study's rows."""
    return {k: _decide(BY_NAME[k[0]].claims[k[1]], rows) for k in keys}


def claims_table(df: pd.DataFrame, known: dict[str, StudyClaims] | None = None) -> pd.DataFrame:
    """Every claim once, decided on the study whose records carry it (see the module doc), or "not measured
    yet" with the command that measures it; then a row for each numbered claim the rules leave open. Columns:
    number (#N of the catalogue, "–" for the suite's own claims), source, question, study (the one that decided
    it; "" when none), claim, rule, evidence, verdict. `known`: the StudyClaims of studies whose rows in `df` they
    were computed from (the rest are computed here); an outcome they lack is decided here and added to them."""
    groups = {str(s): r for s, r in df.groupby("study")} if not df.empty and "study" in df else {}
    known = known or {}
    facts = {s: known[s] if s in known else study_claims(r) for s, r in groups.items()}
    bound = bind(facts)
    named = studies_by_question(df)
    out = []
    for q in QUESTION_LIST:
        foreign = {s: f.foreign[q.name] for s, f in facts.items()}
        for j, c in enumerate(q.claims):
            study = bound.get((q.name, j))
            if study is None:
                out.append(_not_carried(q, c, named[q.name], groups, foreign))
                continue
            carrying = [s for s in sorted(facts) if (q.name, j) in facts[s].carried]
            machines = [s for s in carrying if base_study(s) == base_study(study)]  # the study on each machine
            others = [s for s in carrying if s not in machines]
            for one in machines:
                mine = facts[one].outcomes
                if (q.name, j) not in mine:
                    mine.update(decide_claims(groups[one], [(q.name, j)]))
                o = mine[(q.name, j)]
                head = f"study {one}" + (f" (also carried by {', '.join(others)})" if others else "")
                tail = f"; measure it with `{q.command}`" if o.verdict == NOT_MEASURED else ""
                out.append(_row(c, one, f"{head}: {o.evidence}{tail}", o.verdict))
    return pd.DataFrame(out + _pending_rows(), columns=COLUMNS)


def _measured_somewhere(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows, less those of a rule that one machine did not measure where another machine's study did (the
    same rule decided on the same study of several machines: loaderbench.analysis.rules.machines)."""
    unmeasured = rows["verdict"].isin([NOT_MEASURED, NOT_MEASURABLE])
    keep = []
    for _, grp in rows.groupby([c for c in ("question", "rule") if c in rows], sort=False):
        measured = grp[~unmeasured[grp.index]]
        keep.extend((measured if len(measured) else grp).index)
    return rows.loc[sorted(keep)]


def numbered(table: pd.DataFrame) -> pd.DataFrame:
    """One row per numbered claim of the catalogue. Its verdict is that of its rows in the source's own setting
    together (role "seed": holds when every one holds, does not hold when one does not, else the open rows'
    verdict; a rule decided on several machines counts where it was measured); the rows of settings the suite added
    (role "extension: ...") never decide it and are reported in `elsewhere`, so that a context-dependent answer
    reads as one ("holds; does not hold under fork")."""
    out = []
    for s in CATALOGUE:
        rows = table[table["number"] == s.tag]
        rows = rows if "role" in rows else rows.assign(role=SEED)
        seed = _measured_somewhere(rows[rows["role"].astype(str) == SEED])
        o = all_of([Outcome(v, "") for v in seed["verdict"]], "")
        shown = ", ".join(
            f"{st if SEPARATOR in st else q}: {v}"
            for q, st, v in zip(seed["question"], seed.get("study", seed["question"]), seed["verdict"])
        )
        added = rows[rows["role"].astype(str) != SEED]
        elsewhere = "; ".join(
            f"{v} {r.removeprefix(EXTENSION + ': ')}" for r, v in zip(added["role"], added["verdict"])
        )
        out.append(
            {
                "number": s.tag,
                "claim": s.claim,
                "source": s.source,
                "where": s.where,
                "verdict": o.verdict,
                "rows": f"{len(seed)} ({shown})" if len(seed) else "0",
                "elsewhere": elsewhere or "–",
            }
        )
    return pd.DataFrame(out, columns=NUMBERED_COLUMNS)


def counts_line(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts()
    return ", ".join(f"{v}: {int(counts.get(v, 0))}" for v in VERDICTS)


def sources_lines() -> list[str]:
    """What the source tags and the "where" letters stand for."""
    return [f"source {k}: {v}" for k, v in SOURCES.items()] + [f"where {k}: {v}" for k, v in WHERE.items()]


def vocabulary_lines() -> list[str]:
    """The verdict vocabulary and the decision rule, for the report and claims.md."""
    return [f"**{v}**: {MEANING[v]}." for v in VERDICTS] + [
        f"Every rule is {decision_rule_text()}; intervals are printed with their real coverage and n."
    ]


def write_claims(df: pd.DataFrame, out_dir: str | Path, table: pd.DataFrame | None = None) -> list[Path]:
    """claims.csv and claims.md under out_dir: the claims table, verdicts computed from the records."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = claims_table(df) if table is None else table
    csv = out / "claims.csv"
    table.to_csv(csv, index=False)
    index = numbered(table)
    lines = [
        "# Claims the studies test, decided from the records",
        "",
        "Each verdict is computed from the records by the rule next to it (loaderbench/analysis/questions/); none is "
        "written by hand. The verdicts:",
        "",
    ]
    lines += [f"- {line}" for line in vocabulary_lines()]
    lines += ["", *[f"- {line}" for line in sources_lines()]]
    lines += [
        "",
        f"## The {len(index)} numbered claims",
        "",
        "Each numbered claim's verdict is that of its rows below that test it in its source's own setting: it holds "
        "when every such row holds and does not hold when one does not. Rows that test a setting the suite added "
        "(another start method, a harsher straggler) are listed under 'elsewhere' and never decide it.",
        "",
        counts_line(index["verdict"]),
        "",
        md_table(index.assign(verdict=[f"**{v}**" for v in index["verdict"]])),
        "",
        "## Every rule",
        "",
        counts_line(table["verdict"]),
        "",
    ]
    for question, part in table.groupby("question", sort=False):
        shown = pd.DataFrame(
            {
                "#": part["number"],
                "claim": part["claim"],
                "verdict": [f"**{v}**" for v in part["verdict"]],
                "study": [s or "–" for s in part["study"]],
                "setting": [r.removeprefix(EXTENSION + ": ") if r != SEED else "the source's" for r in part["role"]],
                "evidence": part["evidence"],
                "rule": part["rule"],
                "source": part["source"],
            }
        )
        lines += [f"### {question}", "", md_table(shown), ""]
    md = out / "claims.md"
    md.write_text("\n".join(lines))
    return [csv, md]


def apart(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of every machine (each frame's `attrs["machine"]`) in one table, a study name measured on more
    than one machine qualified by the machine; each such study keeps the question it was made for (`question` is
    filled from its name first). The table's `attrs["machine"]` names them all."""
    machines = [str(f.attrs.get("machine", k)) for k, f in enumerate(frames)]
    names = [set(f["study"].astype(str)) if "study" in f else set() for f in frames]
    shared = {s for s in set().union(*names) if sum(s in n for n in names) > 1}
    out = []
    for frame, machine, mine in zip(frames, machines, names):
        if shared & mine:
            frame = frame.copy()
            if "question" not in frame:
                frame["question"] = None
            for study in shared & mine:
                hit = frame["study"].astype(str) == study
                if frame.loc[hit, "question"].isna().all():
                    frame.loc[hit, "question"] = question_of(study, frame[hit])
                frame.loc[hit, "study"] = on_machine(study, machine)
        out.append(frame)
    df = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    df.attrs["machine"] = "+".join(machines)
    return df
