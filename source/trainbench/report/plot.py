"""Figures against batch size (PNG): images/s of a sweep, core utilization or GPU busy fraction of a profile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainbench.results.records import Status

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Results = Sequence[dict[str, Any]]


def batch_size_figure(lines: Mapping[str, tuple[Results, str]], title: str, ylabel: str,
                      spread: tuple[str, str] | None = None) -> Figure:
    """One line per label, from each result's ``field`` (label -> (results, field)); failed batch sizes are marked
    on the x axis so a gap is never silent, and a value the profile lacks (None) is left out, never drawn as 0.
    ``spread``: the (low, high) fields drawn as an error bar around each point (the windows' min and max)."""
    # A Figure of its own, not pyplot's global state: files only (no display on servers), and safe when sweeps
    # in threads (variability --parallel) draw at the same time.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=120)
    axes = figure.subplots()
    sizes: set[int] = set()
    failed: set[tuple[int, str]] = set()
    one_sweep = len({id(results) for results, _ in lines.values()}) == 1  # lines of one profile: no label on marks
    for label, (results, field) in lines.items():
        drawn = [r for r in results if r["status"] == Status.OK and r.get(field) is not None]
        x, y = [r["batch_size"] for r in drawn], [float(r[field]) for r in drawn]
        line = axes.plot(x, y, marker="o", label=label)[0]
        if spread is not None:
            _error_bars(axes, drawn, x, y, spread, line.get_color())
        sizes.update(r["batch_size"] for r in results)
        prefix = "" if one_sweep else f"{label}: "
        failed.update((r["batch_size"], prefix + r["status"]) for r in results if r["status"] != Status.OK)
    for batch, status in sorted(failed):
        axes.axvline(batch, color="tab:red", linestyle=":", linewidth=1)
        axes.annotate(status, (batch, 0), color="tab:red", rotation=90, va="bottom", ha="right", fontsize=8)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(sizes), [str(size) for size in sorted(sizes)])
    axes.legend()
    axes.set_ylim(bottom=0)
    axes.set_xlabel("batch size (images per step)")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    return figure


def _error_bars(axes: Any, drawn: Results, x: list[int], y: list[float], spread: tuple[str, str],
                color: str) -> None:
    """low..high around each point that has both; a point without them gets no bar (one window: no spread)."""
    low, high = spread
    bars = [(bx, by, by - float(r[low]), float(r[high]) - by) for r, bx, by in zip(drawn, x, y, strict=True)
            if r.get(low) is not None and r.get(high) is not None]
    if bars:
        axes.errorbar([b[0] for b in bars], [b[1] for b in bars], yerr=[[b[2] for b in bars], [b[3] for b in bars]],
                      fmt="none", ecolor=color, capsize=3, linewidth=1)


def plot_against_batch_size(lines: Mapping[str, tuple[Results, str]], path: Path, title: str, ylabel: str) -> None:
    """``batch_size_figure`` written to ``path``."""
    batch_size_figure(lines, title, ylabel).savefig(path)


def plot_throughput(series: Mapping[str, Results], path: Path, title: str) -> None:
    """images/s against batch size, one line per labelled sweep."""
    lines = {label: (results, "images_per_sec") for label, results in series.items()}
    plot_against_batch_size(lines, path, title, "images/s (images / timed window)")
