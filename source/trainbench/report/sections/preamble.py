"""What the page was made from, above its sections: the folders given, what was found there, what was left out."""

from __future__ import annotations

import html

from trainbench.render.page import paragraph
from trainbench.report.found import ReportData
from trainbench.report.sections.invalid import invalid_items


def _counted(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def preamble(data: ReportData) -> str:
    """What the page was made from and what was found there (kinds found only)."""
    counts = [(len(data.runs), "throughput run", "throughput runs"), (len(data.profiles), "profile", "profiles"),
              (len(data.campaigns), "campaign", "campaigns"),
              (len(data.variability), "variability study", "variability studies"),
              (len(data.models), "model file", "model files"), (len(data.trainings), "training run", "training runs")]
    found = ", ".join(_counted(*count) for count in counts if count[0]) or "nothing reportable"
    sources = ", ".join(f"<code>{html.escape(source)}</code>" for source in data.sources)
    parts = [f"<p>Made by <code>trainbench report</code> from {sources}: {html.escape(found)}.</p>"]
    if data.skipped:
        parts.append(paragraph("Not readable, left out: " + "; ".join(data.skipped), "absent"))
    invalid = len(invalid_items(data))
    if invalid:
        parts.append(f'<p class="warn">{_counted(invalid, "invalid value", "invalid values")} (NaN, infinite, '
                     'negative or not a number) left out of the figures, comparisons and statistics: see '
                     '<a href="#invalid">Invalid values</a>.</p>')
    return "".join(parts)
