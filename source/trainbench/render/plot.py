"""Figures against batch size (PNG): samples/s of a sweep (in its workload's unit), its peak memory, core utilization
or GPU busy fraction of a profile."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainbench.render.readable import size_unit
from trainbench.results import fields
from trainbench.results.records import Status

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

Results = Sequence[dict[str, Any]]


MAX_LINES = 10  # lines drawn in one figure: matplotlib's colour cycle, so that no two lines share a colour
MARK_LENGTH = 48  # characters of a failure's label on the x axis
LABEL_LENGTH = 64  # characters of a line's label in the legend: a long folder name does not squeeze the axes away


def batch_size_figure(lines: Mapping[str, tuple[Results, str]], title: str, ylabel: str,
                      spread: tuple[str, str] | None = None, width: float = 7.0, sample_unit: str = "image",
                      scale: float = 1.0) -> Figure:
    """One line per label, from each result's ``field`` (label -> (results, field)); failed and invalid batch
    sizes are marked on the x axis so a gap is never silent, and a value the profile lacks (None) is left out,
    never drawn as 0. ``spread``: the (low, high) fields drawn as an error bar around each point (the windows' min
    and max). The legend stands beside the axes, never over them; past ``MAX_LINES`` labels only the first
    ``MAX_LINES`` are drawn and the legend's title says so (``drawn_lines``). ``sample_unit``: what a batch holds
    ("sequence": "batch size (sequences per step)"); ``scale``: each value's factor to the unit ``ylabel`` names."""
    # A Figure of its own, not pyplot's global state: files only (no display on servers), and safe when sweeps
    # in threads (variability --parallel) draw at the same time. The constrained layout makes room for the legend.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, 4.5), dpi=120, layout="constrained")
    axes = figure.subplots()
    sizes: set[int] = set()
    failed: dict[int, list[tuple[str, str]]] = {}  # batch size -> (status, line)
    one_sweep = len({id(results) for results, _ in lines.values()}) == 1  # lines of one profile: no label on marks
    drawn = dict(list(lines.items())[:MAX_LINES])
    highest = 0.0
    for label, (results, field) in drawn.items():
        measured = [r for r in results if r["status"] == Status.OK and r.get(field) is not None]
        x, y = [r["batch_size"] for r in measured], [float(r[field]) * scale for r in measured]
        highest = max([highest, *y])
        line = axes.plot(x, y, marker="o", label=_short(label, LABEL_LENGTH))[0]
        if spread is not None:
            _error_bars(axes, measured, x, y, spread, line.get_color(), scale)
        sizes.update(r["batch_size"] for r in results)
        for result in results:
            if result["status"] != Status.OK:
                failed.setdefault(result["batch_size"], []).append((str(result["status"]), "" if one_sweep else label))
    for batch, marks in sorted(failed.items()):
        axes.axvline(batch, color="tab:red", linestyle=":", linewidth=1)
        mark = axes.annotate(_marks_text(marks), (batch, 0), color="tab:red", rotation=90, va="bottom", ha="right",
                             fontsize=8)
        mark.set_in_layout(False)  # drawn inside the axes: the layout has nothing to make room for
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(sizes), [str(size) for size in sorted(sizes)])
    if drawn:
        more = f"first {len(drawn)} of {len(lines)} drawn" if len(lines) > len(drawn) else None
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title=more, title_fontsize=8)
    # from 0, with room above the highest point: lines that barely change (a resident set of 779 MiB at every batch
    # size) would otherwise sit on the top edge
    axes.set_ylim(bottom=0, top=max(axes.get_ylim()[1], 1.05 * highest) if highest > 0 else None)
    axes.set_xlabel(f"batch size ({sample_unit}s per step)")
    axes.set_ylabel(ylabel)
    axes.set_title(textwrap.fill(title, 72))  # a long title wraps instead of running off the figure's edges
    axes.grid(True, alpha=0.3)
    return figure


def drawn_lines(count: int) -> int:
    """How many of ``count`` lines ``batch_size_figure`` draws."""
    return min(count, MAX_LINES)


def _short(text: str, length: int) -> str:
    return text if len(text) <= length else text[:length - 1] + "…"


def _marks_text(marks: list[tuple[str, str]]) -> str:
    """One batch size's failures as one short label, status first: one each would be drawn over each other, and
    a label taller than the axes would leave no room for them."""
    unique = list(dict.fromkeys(marks))
    statuses = ", ".join(sorted({status for status, _ in unique}))
    if len(unique) == 1:
        status, label = unique[0]
        room = MARK_LENGTH - len(status) - 2  # a label's end tells lines apart (their settings' start is alike)
        tail = label if len(label) <= room else "…" + label[len(label) - room + 1:]
        return f"{status}: {tail}" if label else status
    lines = len({label for _, label in unique})
    return statuses if lines <= 1 else f"{statuses} ({lines} lines)"


def _error_bars(axes: Any, drawn: Results, x: list[int], y: list[float], spread: tuple[str, str],
                color: ColorType, scale: float = 1.0) -> None:
    """low..high around each point that has both; a point without them gets no bar (one window: no spread), nor
    one whose low..high does not hold it (a file edited by hand: a bar would point the wrong way)."""
    low, high = spread
    bars = [(bx, by, by - float(r[low]) * scale, float(r[high]) * scale - by)
            for r, bx, by in zip(drawn, x, y, strict=True)
            if r.get(low) is not None and r.get(high) is not None]
    bars = [bar for bar in bars if bar[2] >= 0 and bar[3] >= 0]
    if bars:
        axes.errorbar([b[0] for b in bars], [b[1] for b in bars], yerr=[[b[2] for b in bars], [b[3] for b in bars]],
                      fmt="none", ecolor=color, capsize=3, linewidth=1)


def plot_against_batch_size(lines: Mapping[str, tuple[Results, str]], path: Path, title: str, ylabel: str,
                            sample_unit: str = "image") -> None:
    """``batch_size_figure`` written to ``path``."""
    batch_size_figure(lines, title, ylabel, sample_unit=sample_unit).savefig(path)


def plot_throughput(series: Mapping[str, Results], path: Path, title: str, sample_unit: str = "image") -> None:
    """samples/s (in the workload's ``sample_unit``: images/s) against batch size, one line per labelled sweep."""
    lines = {label: (results, "samples_per_sec") for label, results in series.items()}
    plot_against_batch_size(lines, path, title, f"{sample_unit}s/s ({sample_unit}s / timed window)", sample_unit)


# What the memory figure draws, by the registry's names (a typo is an import error, never an empty figure).
PEAK_MEMORY = fields.BY_NAME["peak_memory_bytes"].name
PEAK_MEMORY_KIND = fields.BY_NAME["peak_memory_kind"].name


def _measured(results: Results, field: str) -> list[float]:
    return [float(r[field]) for r in results if r["status"] == Status.OK and isinstance(r.get(field), int | float)
            and not isinstance(r.get(field), bool)]


def memory_figure(lines: Mapping[str, tuple[Results, str]], title: str, width: float = 7.0,
                  sample_unit: str = "image") -> Figure | None:
    """Peak memory against batch size, one line per label (``batch_size_figure``'s, in the binary unit its largest
    value reads best in), with what measured it in the title when the lines agree on it (a GPU allocator's peak and
    a CPU process's resident set are different things); None when no ok result recorded a peak."""
    values = [value for results, field in lines.values() for value in _measured(results, field)]
    if not values:
        return None
    unit, factor = size_unit(max(values))
    kinds = {str(r[PEAK_MEMORY_KIND]) for results, _ in lines.values() for r in results
             if r["status"] == Status.OK and r.get(PEAK_MEMORY_KIND)}
    measured_by = f" ({kinds.pop()})" if len(kinds) == 1 else ""
    return batch_size_figure(lines, f"{title}: peak memory{measured_by}", f"peak memory ({unit})", width=width,
                             sample_unit=sample_unit, scale=factor)


def plot_memory(series: Mapping[str, Results], path: Path, title: str, sample_unit: str = "image") -> bool:
    """Peak memory against batch size, one line per labelled sweep, written to ``path``; False (nothing written)
    when no result recorded a peak (runs from before format 5, every batch size failed). Failed batch sizes are
    marked: an oom is where the memory ran out."""
    figure = memory_figure({label: (results, PEAK_MEMORY) for label, results in series.items()}, title,
                           sample_unit=sample_unit)
    if figure is None:
        return False
    figure.savefig(path)
    return True
