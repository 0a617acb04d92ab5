"""Lays a report's blocks out as Markdown or as one self-contained HTML page; computes nothing.

The content (which sections, which numbers) is `loaderbench.analysis.report.page`'s job; the blocks below are all it
hands over: paragraphs, bullet lists, code, tables whose every cell is already a string, figures.
"""

from __future__ import annotations

import base64
import html
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

# ----------------------------------------------------------------------------------------------
# blocks


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Table:
    frame: pd.DataFrame  # already formatted: every cell a string
    caption: str = ""
    note: str = ""  # e.g. "first 300 of 420 rows; every row in curves.csv"


@dataclass
class Figure:
    path: Path  # the PNG
    caption: str


@dataclass
class Section:
    title: str
    level: int = 2
    blocks: list = field(default_factory=list)
    anchor: str = ""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


# ----------------------------------------------------------------------------------------------
# rendering


def md_cell(v) -> str:
    """A value as the text of one Markdown table cell: pipes escaped, lines joined."""
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(frame: pd.DataFrame) -> str:
    """A Markdown table of `frame`: a header row, then one row per row, every value through `md_cell`."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(md_cell(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(md_cell(v) for v in row) + " |")
    return "\n".join(lines)


def render_markdown(sections: list[Section], out: Path) -> str:
    parts = []
    toc = [s for s in sections if s.level == 2]
    for i, s in enumerate(sections):
        parts.append("#" * s.level + " " + s.title)
        if i == 0 and toc:
            parts.append("Contents: " + " · ".join(f"[{t.title}](#{slug(t.title)})" for t in toc))
        for b in s.blocks:
            if isinstance(b, Paragraph):
                parts.append(b.text)
            elif isinstance(b, Bullets):
                parts.append("\n".join(f"- {item}" for item in b.items))
            elif isinstance(b, Code):
                parts.append("```\n" + b.text + "\n```")
            elif isinstance(b, Table):
                if b.caption:
                    parts.append(f"*{b.caption}*")
                parts.append(md_table(b.frame))
                if b.note:
                    parts.append(f"({b.note})")
            elif isinstance(b, Figure):
                try:
                    rel = b.path.resolve().relative_to(out.resolve())
                except ValueError:
                    rel = b.path
                parts.append(f"![{b.path.stem}]({urllib.parse.quote(rel.as_posix())})\n\n*{b.caption}*")
    return "\n\n".join(parts) + "\n"


CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2.2em}h3{margin-top:1.6em}
table{border-collapse:collapse;font-size:12px;margin:.6em 0 1.2em}th,td{border:1px solid #ccc;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption,.caption{font-size:13px;color:#444;font-style:italic}.note{font-size:12px;color:#666}
pre{background:#f5f5f5;padding:.7em;overflow-x:auto;font-size:12px}nav{font-size:13px}
"""


def _html_table(t: Table) -> str:
    frame = t.frame
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        body.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>")
    parts = []
    if t.caption:
        parts.append(f'<p class="caption">{html.escape(t.caption)}</p>')
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if len(frame) > 40:
        table = f"<details><summary>{len(frame)} rows (click to show)</summary>{table}</details>"
    parts.append(table)
    if t.note:
        parts.append(f'<p class="note">({html.escape(t.note)})</p>')
    return "\n".join(parts)


#: Above this many bytes of PNG, figures are inlined with 256 colours (3-4x smaller) so the page stays mailable
#: (base64 adds a third: about 11 MB of page at most with full figures).
EMBED_FULL_MAX = 8 * 2**20


def embed_path(path: Path) -> Path:
    """Where the 256-colour copy of the figure `path` is kept: `.embed/<name>.png` beside it (out of the way of
    anything that lists the figures)."""
    return path.parent / ".embed" / path.name


def write_embed_copy(path: Path, pixels=None) -> Path | None:
    """Write the figure `path` with 256 colours (3-4x smaller) beside it, for a report too heavy to inline full
    figures; the drawing workers call it right after drawing, so the report itself never converts. `pixels`, when
    given, are the figure's as written (RGBA rows, top first), so that the file need not be read back and decoded.
    None (nothing written) when the copy would not be smaller or the figure cannot be read."""
    import io

    from PIL import Image

    small = embed_path(path)
    try:
        if pixels is None:
            data = path.read_bytes()
            size = len(data)
            im = Image.open(io.BytesIO(data))
        else:
            size = path.stat().st_size
            im = Image.fromarray(pixels)
        with im:
            reduced = im.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
            buf = io.BytesIO()
            reduced.save(buf, format="PNG")
        if buf.tell() >= size:
            small.unlink(missing_ok=True)
            return None
        small.parent.mkdir(exist_ok=True)
        small.write_bytes(buf.getvalue())
        return small
    except Exception:  # noqa: BLE001 - the full figure is always a correct fallback
        return None


def _png_bytes(path: Path, reduce: bool) -> bytes:
    """The PNG to inline: as drawn, or (`reduce`) its 256-colour copy when one newer than the figure is beside it
    (written now when missing)."""
    if reduce:
        small = embed_path(path)
        try:
            fresh = small.stat().st_mtime_ns >= path.stat().st_mtime_ns
        except OSError:
            fresh = False
        if fresh or write_embed_copy(path) is not None:
            try:
                return small.read_bytes()
            except OSError:
                pass
    return path.read_bytes()


def _figure_id(path: Path) -> str:
    return "figure-" + slug(f"{path.parent.name} {path.stem}")


def _html_figure(b: Figure, reduce: bool, inlined: set[Path]) -> str:
    """The figure inlined, the first time the page shows it; a link to that place every later time (a figure
    inlined twice would double its weight in the page)."""
    caption = f"<figcaption>{html.escape(b.caption)}</figcaption>"
    if b.path in inlined:
        return f'<figure><a href="#{_figure_id(b.path)}">{html.escape(b.path.stem)}: shown above</a>{caption}</figure>'
    inlined.add(b.path)
    data = base64.b64encode(_png_bytes(b.path, reduce)).decode("ascii")
    return (
        f'<figure id="{_figure_id(b.path)}"><img alt="{html.escape(b.path.stem)}" '
        f'src="data:image/png;base64,{data}">{caption}</figure>'
    )


def render_html(sections: list[Section]) -> str:
    figures = [b.path for s in sections for b in s.blocks if isinstance(b, Figure)]
    reduce = sum(p.stat().st_size for p in set(figures) if p.exists()) > EMBED_FULL_MAX
    inlined: set[Path] = set()
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(sections[0].title if sections else 'report')}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    toc = [s for s in sections if s.level == 2]
    for i, s in enumerate(sections):
        anchor = s.anchor or slug(s.title)
        out.append(f'<h{s.level} id="{html.escape(anchor)}">{html.escape(s.title)}</h{s.level}>')
        if i == 0 and toc:
            out.append(
                "<nav>Contents: "
                + " · ".join(
                    f'<a href="#{html.escape(t.anchor or slug(t.title))}">{html.escape(t.title)}</a>' for t in toc
                )
                + "</nav>"
            )
        if i == 0 and reduce:
            out.append(
                '<p class="note">Figures in this page are reduced to 256 colours to keep it small enough to '
                "mail; the full figure files are next to it.</p>"
            )
        for b in s.blocks:
            if isinstance(b, Paragraph):
                out.append(f"<p>{html.escape(b.text)}</p>")
            elif isinstance(b, Bullets):
                out.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in b.items) + "</ul>")
            elif isinstance(b, Code):
                out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
            elif isinstance(b, Table):
                out.append(_html_table(b))
            elif isinstance(b, Figure):
                out.append(_html_figure(b, reduce, inlined))
    out.append("</body></html>\n")
    return "\n".join(out)
