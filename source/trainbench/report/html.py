"""One self-contained HTML page of everything measured: tables of numbers and the pictures, nothing fetched.

``render`` turns a ``ReportData`` (``report/found.py``'s plain records, which ``report/gather.py`` fills through the
results model and the suite's readers) into the page: every section of ``SECTIONS`` (``report/sections/``) is
present when there is data for it and otherwise says in one line why it is absent. Every value is HTML-escaped;
pictures are ``data:`` URIs and the style is inline (``render/page.py``), so the file renders the same offline and
can be sent as it is.
"""

from __future__ import annotations

from trainbench.render.page import page
from trainbench.report.found import ReportData
from trainbench.report.sections import SECTIONS
from trainbench.report.sections.preamble import preamble

__all__ = ["SECTIONS", "render"]

TITLE = "trainbench report"


def render(data: ReportData, title: str = TITLE) -> str:
    """The page: what it was made from, then every section in ``SECTIONS`` order."""
    return page(title, preamble(data), [make(data) for make in SECTIONS])
