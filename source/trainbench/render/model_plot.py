"""A performance model against its measurements (PNG): medians with their spread, the model's curve, predictions.

Drawn from plain tables (``analysis.perf_models.measured`` and ``curve``), one panel per model: the first parameter on
a log2 axis, one colour per value of the second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

PANEL_COLUMNS = 2


@dataclass(frozen=True)
class Panel:
    title: str
    parameters: list[str]
    ylabel: str
    measured: pd.DataFrame  # parameters, median, min, max
    curve: pd.DataFrame  # parameters, value
    predictions: list[dict[str, Any]]  # {"at": {...}, "value": ...}
    left_out: list[dict[str, Any]] = field(default_factory=list)  # {"at": {...}, "measured": ...}: not fitted


def _series(frame: pd.DataFrame, parameters: list[str]) -> list[tuple[str, pd.DataFrame]]:
    if len(parameters) < 2:
        return [("", frame)]
    second = parameters[1]
    return [(f"{second}={value:g}", part) for value, part in frame.groupby(second, sort=True)]


def _draw(axes: Any, panel: Panel) -> None:
    first = panel.parameters[0]
    colours = {}
    for index, (label, part) in enumerate(_series(panel.measured, panel.parameters)):
        colours[label] = f"C{index}"
        low, high = part["median"] - part["min"], part["max"] - part["median"]
        axes.errorbar(part[first], part["median"], yerr=[low, high], fmt="o", color=colours[label], capsize=3,
                      label=f"measured {label}".strip())
    for label, part in _series(panel.curve, panel.parameters):
        axes.plot(part[first], part["value"], color=colours.get(label, "black"), linewidth=1.2)
    for prediction in panel.predictions:
        axes.plot([prediction["at"][first]], [prediction["value"]], marker="*", markersize=11, color="black",
                  linestyle="none")
        axes.annotate("predicted", (prediction["at"][first], prediction["value"]), fontsize=7,
                      textcoords="offset points", xytext=(5, 5))
    for held in panel.left_out:
        axes.plot([held["at"][first]], [held["measured"]], marker="D", markersize=7, markerfacecolor="none",
                  color="black", linestyle="none")
        axes.annotate("left out", (held["at"][first], held["measured"]), fontsize=7, textcoords="offset points",
                      xytext=(5, -10))
    axes.set_xscale("log", base=2)
    ticks = sorted({*panel.measured[first], *(p["at"][first] for p in [*panel.predictions, *panel.left_out])})
    axes.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
    axes.set_ylim(bottom=0)  # differences read against zero, not magnified
    axes.set_xlabel(first)
    axes.set_ylabel(panel.ylabel)
    axes.set_title(panel.title, fontsize=8)
    # A fixed place: loc="best" searches the points and warns when the search took long (a loaded machine's warning
    # on the page's stderr); times rise with the batch size, so the upper left is clear.
    axes.legend(fontsize=7, loc="upper left")


def plot_models(panels: Sequence[Panel], path: Path) -> None:
    """One panel per model in a grid, written to ``path``."""
    from matplotlib.figure import Figure  # no pyplot: files only, safe beside other threads drawing

    columns = min(PANEL_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=(6.5 * columns, 4.2 * rows), dpi=110)
    grid = figure.subplots(rows, columns, squeeze=False)
    for axes, panel in zip(grid.flat, panels, strict=False):
        _draw(axes, panel)
    for axes in list(grid.flat)[len(panels):]:
        axes.set_visible(False)
    figure.tight_layout()
    figure.savefig(path)
