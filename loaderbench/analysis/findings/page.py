"""docs/findings.md's numbers, generated from shipped reference records (results/reference/<machine>/).

The page's tables, verdict rows and verdict counts live between markers; everything between a pair is
written by this module and nothing else:

    <!-- begin findings: NAME MACHINE [MACHINE...] -->
    (generated)
    <!-- end findings: NAME -->

NAME is a block of loaderbench.analysis.findings.blocks.BLOCKS (what it shows, which studies it reads); each
MACHINE is a folder under the reference root, in the order the block takes them. A block renders from those
records with the suite's own analysis (the tidy table, the summaries, the claims table), so a change to a rule
or to the records shows as a difference between the page and its rendering. A block whose records are not
shipped renders as a line that names what is missing, never as numbers.

`render(text, reference)` renders a page; `loaderbench findings` (`main`) checks the page against it or writes
it. Prose outside the markers is never touched. The README.md of each machine folder `loaderbench reference`
the page reads is checked (or written) the same way: it is rendered from the folder's records, never by hand.
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from loaderbench.errors import LoaderbenchError

BEGIN = re.compile(r"^<!-- begin findings: (?P<name>[a-z0-9-]+)(?P<machines>(?: [A-Za-z0-9._-]+)*) -->$")
END = "<!-- end findings: {name} -->"
COMMAND = "loaderbench findings results/reference --write"


@dataclass(frozen=True)
class Rendered:
    """One block of a page: its name and machines, what it reads that is not shipped, and whether the page's
    text of it equals its rendering."""

    name: str
    machines: tuple[str, ...]
    missing: tuple[str, ...]
    current: bool


class Records:
    """The tidy table of each machine's shipped records, loaded once (without a cache file: the reference
    folders stay as shipped)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._frames: dict[str, pd.DataFrame] = {}

    def of(self, machine: str) -> pd.DataFrame:
        if machine not in self._frames:
            from loaderbench.analysis.table.records import load_records

            folder = self.root / machine
            df = load_records(folder, use_cache=False)[0] if folder.is_dir() else pd.DataFrame()
            df.attrs["machine"] = machine
            self._frames[machine] = df
        return self._frames[machine]

    def studies(self, machine: str) -> set[str]:
        df = self.of(machine)
        return set(df["study"].astype(str)) if "study" in df else set()


def placeholder(missing: list[str]) -> str:
    return (
        f"*Not generated yet: no records of {', '.join(missing)} under results/reference/. Measure the missing "
        f"studies alone on a quiet machine, copy their records with `loaderbench reference`, then run `{COMMAND}`.*"
    )


def _blocks(text: str) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """(first line, end-marker line, name, machines) of every block of the page, in order."""
    from loaderbench.analysis.findings.blocks import BLOCKS

    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if lines[i].startswith("<!-- end findings:"):
            raise LoaderbenchError(f"line {i + 1}: `{lines[i]}` closes no block")
        if not m:
            i += 1
            continue
        name, machines = m["name"], tuple(m["machines"].split())
        block = BLOCKS.get(name)
        if block is None:
            raise LoaderbenchError(f"line {i + 1}: unknown block {name!r}; allowed: {', '.join(BLOCKS)}")
        if len(machines) != len(block.needs):
            raise LoaderbenchError(
                f"line {i + 1}: block {name!r} takes {len(block.needs)} machine folder(s) "
                f"({block.takes}), not {len(machines)}"
            )
        end = END.format(name=name)
        try:
            j = lines.index(end, i + 1)
        except ValueError:
            raise LoaderbenchError(f"line {i + 1}: block {name!r} has no `{end}`") from None
        if any(BEGIN.match(x) for x in lines[i + 1 : j]):
            raise LoaderbenchError(f"line {i + 1}: block {name!r} holds another block before its end")
        out.append((i, j, name, machines))
        i = j + 1
    return out


def render_block(name: str, machines: tuple[str, ...], records: Records) -> tuple[str, list[str]]:
    """The block's text, and the `machine/study` folders it needs that hold no records."""
    from loaderbench.analysis.findings.blocks import BLOCKS

    block = BLOCKS[name]
    missing = [f"{m}/{s}" for m, studies in zip(machines, block.needs) for s in studies if s not in records.studies(m)]
    missing += [m for m, studies in zip(machines, block.needs) if not studies and not records.studies(m)]
    if missing:
        return placeholder(missing), missing
    frames = [records.of(m) for m in machines]
    notes = [_notes(records.root / m) for m in machines]
    return block.render(frames, notes).rstrip("\n"), []


def _notes(folder: Path) -> dict[str, str]:
    """The notes given when the machine's studies were copied, and its unstable claims (keys UNSTABLE + claim
    name)."""
    from loaderbench.analysis.findings.reference_records import notes, unstable
    from loaderbench.analysis.findings.verdict_history import UNSTABLE

    return notes(folder) | {UNSTABLE + name: how for name, how in unstable(folder).items()}


def render(text: str, reference: str | Path, records: Records | None = None) -> tuple[str, list[Rendered]]:
    """The page with every block rendered from the records under `reference`, and what each block is."""
    from loaderbench.analysis.findings.common import deciding_once

    records = records or Records(Path(reference))
    lines = text.split("\n")
    out: list[str] = []
    report: list[Rendered] = []
    pos = 0
    with deciding_once():
        for i, j, name, machines in _blocks(text):
            body, missing = render_block(name, machines, records)
            out += lines[pos : i + 1] + body.split("\n")
            report.append(Rendered(name, machines, tuple(missing), lines[i + 1 : j] == body.split("\n")))
            pos = j
    out += lines[pos:]
    return "\n".join(out), report


def stale_readmes(records: Records, machines: set[str]) -> dict[Path, str]:
    """The README.md of each of `machines` whose folder `loaderbench reference` wrote and whose text differs from
    its rendering from the folder's records, with the rendering."""
    from loaderbench.analysis.findings.reference_records import README, copied, readme_text

    out = {}
    for folder in sorted(records.root / m for m in machines if copied(records.root / m)):
        path, text = folder / README, readme_text(folder, records.of(folder.name))
        if not path.is_file() or path.read_text() != text:
            out[path] = text
    return out


def main(reference: str, doc: str, write: bool) -> int:
    """Check the page against its rendering (exit 1 when a block differs), or write it. Blocks without
    records are listed either way."""
    path = Path(doc)
    try:
        text = path.read_text()
    except OSError as exc:
        raise LoaderbenchError(f"{doc}: cannot read it ({exc.strerror or exc})") from None
    if not Path(reference).is_dir():
        raise LoaderbenchError(f"{reference}: no such folder; give the reference root, e.g. results/reference")
    records = Records(Path(reference))
    try:
        new, report = render(text, reference, records)
    except LoaderbenchError as exc:
        raise LoaderbenchError(f"{doc}: {exc}") from None
    if not report:
        raise LoaderbenchError(f"{doc}: no `<!-- begin findings: ... -->` blocks")
    readmes = stale_readmes(records, {m for r in report for m in r.machines})
    for r in report:
        if r.missing:
            print(f"{r.name}: not generated, no records of {', '.join(r.missing)}", file=sys.stderr)
    stale = [r.name for r in report if not r.current]
    if write:
        if new != text:
            path.write_text(new)
        for readme, body in readmes.items():
            readme.write_text(body)
            print(f"{readme}: rendered from its records", file=sys.stderr)
        done = len(report) - sum(bool(r.missing) for r in report)
        print(f"{doc}: {done} of {len(report)} blocks rendered from records; {len(stale)} changed", file=sys.stderr)
        return 0
    for readme in readmes:
        print(f"{readme}: differs from its rendering from the records; run `{COMMAND}`", file=sys.stderr)
    if stale:
        diff = difflib.unified_diff(text.splitlines(), new.splitlines(), doc, f"{doc} (from {reference})", lineterm="")
        print("\n".join(diff))
        print(
            f"{doc}: {len(stale)} block(s) differ from the records: {', '.join(stale)}; run `{COMMAND}`",
            file=sys.stderr,
        )
        return 1
    if readmes:
        return 1
    print(f"{doc}: all {len(report)} blocks match the records", file=sys.stderr)
    return 0
