"""Figures against batch size (PNG): images/s of a sweep, core utilization or GPU busy fraction of a profile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainbench.results.records import Status

Results = Sequence[dict[str, Any]]


def plot_against_batch_size(lines: Mapping[str, tuple[Results, str]], path: Path, title: str, ylabel: str) -> None:
    """One line per label, from each result's ``field`` (label -> (results, field)); failed batch sizes are marked
    on the x axis so a gap is never silent, and a value the profile lacks (None) is left out, never drawn as 0."""
    # A Figure of its own, not pyplot's global state: files only (no display on servers), and safe when sweeps
    # in threads (variability --parallel) draw at the same time.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=120)
    axes = figure.subplots()
    sizes: set[int] = set()
    failed: set[tuple[int, str]] = set()
    one_sweep = len({id(results) for results, _ in lines.values()}) == 1  # lines of one profile: no label on marks
    for label, (results, field) in lines.items():
        points = [(r["batch_size"], r[field]) for r in results if r["status"] == Status.OK and r.get(field) is not None]
        axes.plot([b for b, _ in points], [float(v) for _, v in points], marker="o", label=label)
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
    figure.savefig(path)


def plot_throughput(series: Mapping[str, Results], path: Path, title: str) -> None:
    """images/s against batch size, one line per labelled sweep."""
    lines = {label: (results, "images_per_sec") for label, results in series.items()}
    plot_against_batch_size(lines, path, title, "images/s (images / timed window)")
