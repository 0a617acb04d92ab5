"""The file formats figures are saved in: `--formats png,pdf,svg` read and checked, and the formats the figures
drawn now are saved in (`style.save` reads them).

PNG comes first and is always among them: the report shows the PNGs. PDF and SVG are the exact copies a paper or
a slide wants; each costs another rendering of every figure, so they are drawn only when asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from loaderbench.errors import LoaderbenchError

#: Every format a figure may be saved in, in the order they are written.
FORMATS = ("png", "pdf", "svg")
#: What is drawn when no format is asked for: the PNG the report shows.
DEFAULT = ("png",)

#: What `--formats` says in `--help` (`loaderbench figures` and `python -m loaderbench.analysis`).
HELP = (
    "file formats of every figure, comma-separated, of png, pdf, svg (default: png). PNG is always drawn too, "
    "since the report shows it; each other format costs another rendering of every figure"
)

_CURRENT = [DEFAULT]


def parse_formats(text: str | Iterable[str], flag: str = "--formats") -> tuple[str, ...]:
    """The formats named in `text` ("png,pdf", or a list of names), PNG first and always included (the report shows
    it), each once, in FORMATS order. An unknown or empty one is one clear error naming `flag` and the allowed
    values."""
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in FORMATS]
    if unknown or not names:
        what = f"unknown format {', '.join(map(repr, unknown))}" if unknown else "no format named"
        raise LoaderbenchError(f"{flag}: {what}; allowed: {', '.join(FORMATS)} (comma-separated, e.g. png,pdf)")
    return tuple(f for f in FORMATS if f == "png" or f in names)


def current() -> tuple[str, ...]:
    """The formats figures are saved in now (DEFAULT unless `drawing_in` says otherwise)."""
    return _CURRENT[0]


@contextmanager
def drawing_in(formats: Iterable[str]) -> Iterator[None]:
    """Figures saved inside the block are written in `formats` (checked by parse_formats); as before after it."""
    before = _CURRENT[0]
    _CURRENT[0] = parse_formats(list(formats))
    try:
        yield
    finally:
        _CURRENT[0] = before
