"""The HTML building blocks of the report page: escaped cells and tables, embedded pictures, sections, the page.

Every value goes through ``cell`` or ``html.escape``; pictures become ``data:`` URIs and the style is inline, so
the page needs nothing but itself: it renders the same offline and can be sent as one file.

Every table is ``table``'s: inside a ``div.wide`` box as wide as the page and at most 85 % of the window high, which
scrolls both ways (``WIDE``). A run's table has some 25 columns, wider than a laptop's window: its last columns are
reached by the box's own scrollbar, which the height limit keeps on the screen with the table's top (without it the
scrollbar sat under rows of 400 px, below the window, and the columns past the page's edge looked cut off); the
header row stays in view while the box scrolls down. A long text cell (``LONG`` characters: a checks line, a note)
keeps 14 em rather than shrinking to its longest word, which had made each row that tall.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainbench.errors import os_reason

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDE = "wide"  # the class of the box every table sits in: it scrolls sideways (and down) inside the page
LONG = 100  # a text cell this long keeps a readable width (td.long) instead of one word per line
STYLE = """body{font-family:sans-serif;margin:2em auto;max-width:1300px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #aaa;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.05em;margin-bottom:.3em}div.wide{overflow:auto;max-width:100%;max-height:85vh}
div.wide tr:first-child th{position:sticky;top:0}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:.82em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;vertical-align:top}
th{background:#eee;font-weight:600;max-width:9em}td.text{text-align:left;max-width:42em;overflow-wrap:break-word}
td.long{min-width:14em}
p.absent{color:#666;font-style:italic}p.note{color:#444;font-size:.9em}p.warn{color:#a00}
tr.failed td{background:#fde2e2}
img{max-width:100%;border:1px solid #ddd;margin:.3em 0}nav{line-height:1.8}nav a{margin-right:1em}
code{background:#f4f4f4;padding:0 .2em;overflow-wrap:anywhere}"""


def cell(value: Any) -> str:
    """A value as table text: numbers to 4 significant digits, None and NaN empty, everything escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or _is_missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return html.escape(", ".join(cell_text(item) for item in value))
    return html.escape(str(value))


def cell_text(value: Any) -> str:
    """``cell`` before escaping (for values joined into one cell)."""
    return html.unescape(cell(value))


def _is_missing(value: Any) -> bool:
    """pandas' NA and numpy's NaN types, without importing either here."""
    try:
        return bool(value != value)  # NaN and NA are the only values not equal to themselves
    except TypeError:  # pd.NA: its comparison has no truth value
        return True


def header_cell(name: str) -> str:
    """A column name that may wrap after its underscores: long names do not widen the table."""
    return "_<wbr>".join(html.escape(part) for part in name.split("_"))


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], failed: Sequence[bool] = ()) -> str:
    """An HTML table (scrolling sideways inside the page when wider); rows flagged in ``failed`` are shaded."""
    head = "".join(f"<th>{header_cell(name)}</th>" for name in header)
    lines = []
    for index, row in enumerate(rows):
        marked = ' class="failed"' if index < len(failed) and failed[index] else ""
        cells = "".join(f"<td{_cell_class(v)}>{cell(v)}</td>" for v in row)
        lines.append(f"<tr{marked}>{cells}</tr>")
    return f'<div class="{WIDE}"><table><tr>{head}</tr>{"".join(lines)}</table></div>'


def _is_text(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def _cell_class(value: Any) -> str:
    """Text left-aligned and wrapping; long text (``LONG``) wrapping at a readable width."""
    if not _is_text(value):
        return ""
    return ' class="text long"' if len(cell_text(value)) > LONG else " class=text"


def png(data: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">'


def image(path: Path) -> str:
    """A PNG file embedded in the page; a line saying so when it cannot be read (gone since it was found)."""
    try:
        return png(path.read_bytes(), path.name)
    except OSError as error:
        return paragraph(f"{path}: picture not readable ({os_reason(error)})", "absent")


def figure_image(make: Callable[[], Figure | None], alt: str) -> str:
    """The Figure ``make()`` draws, embedded in the page ("" when it draws none). Values near the float limits
    (1e308 images/s) overflow matplotlib's transforms: then one line says the figure cannot be drawn, rather than
    a traceback or a figure drawn from overflowed numbers, and the tables still hold every number."""
    import numpy as np

    buffer = io.BytesIO()
    try:
        with np.errstate(over="raise"):  # an overflow is an error here, not a RuntimeWarning and a wrong figure
            figure = make()
            if figure is None:
                return ""
            figure.savefig(buffer, format="png")
    except (ValueError, ArithmeticError) as error:  # numpy's LinAlgError is a ValueError, FloatingPointError here
        return paragraph(f"The figure ({alt}) cannot be drawn: {type(error).__name__}: {error}.", "absent")
    return png(buffer.getvalue(), alt)


def paragraph(text: str, kind: str = "") -> str:
    return f'<p{f" class={kind}" if kind else ""}>{html.escape(text)}</p>'


def heading(text: str) -> str:
    return f"<h3>{html.escape(text)}</h3>"


@dataclass(frozen=True)
class Section:
    key: str  # the anchor
    title: str
    body: str | None  # None: absent
    absent: str = ""  # why, when absent

    def render(self) -> str:
        content = self.body if self.body is not None else paragraph(self.absent, "absent")
        return f'<section id="{html.escape(self.key)}"><h2>{html.escape(self.title)}</h2>{content}</section>'


def absent_line(sections: Sequence[Section]) -> str:
    """The sections with nothing to show, in one closing paragraph: "Not in these folders: Title (why); ...". Each
    keeps its anchor, so a link to it still lands on its reason."""
    if not sections:
        return ""
    items = "; ".join(f'<span id="{html.escape(s.key)}">{html.escape(s.title)} '
                      f"({html.escape(s.absent.rstrip('.'))})</span>" for s in sections)
    return f'<p class="absent" id="not-here">Not in these folders: {items}.</p>'


def page(title: str, preamble: str, sections: Sequence[Section]) -> str:
    """The whole document: title, what it was made from, links to the sections that have something to show, those
    sections, and one line naming the others with why."""
    shown = [section for section in sections if section.body is not None]
    links = "".join(f'<a href="#{html.escape(s.key)}">{html.escape(s.title)}</a>' for s in shown)
    body = "".join(section.render() for section in shown)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head><body>'
            f"<h1>{html.escape(title)}</h1>{preamble}<nav>{links}</nav>{body}"
            f"{absent_line([section for section in sections if section.body is None])}</body></html>\n")
