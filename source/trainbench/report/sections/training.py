"""The Training curves section: each training run's epochs as a table and its loss and accuracy curves."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any

from trainbench.render.page import Section, figure_image, heading, paragraph
from trainbench.report.found import ReportData, Training
from trainbench.report.sections.common import absent, left_out_note, rows_table

_CURVES = ("epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "train_samples_per_sec", "train_s",
           "learning_rate_end")


def training_label(training: Training) -> str:
    config = training.config or {}
    model = found if isinstance(found := config.get("model"), dict) else {}
    facts = [model.get("framework"), model.get("precision"), f"batch {config.get('batch_size')}" if config else None,
             f"{config.get('epochs')} epochs planned" if config else None,
             f"data {Path(str(config['data'])).name}" if config.get("data") else "synthetic data" if config else None]
    return " ".join(str(fact) for fact in facts if fact) + f" ({training.path.name})"


def _curves_figure(epochs: list[dict[str, Any]]) -> Any:
    from matplotlib.figure import Figure  # no pyplot: files only

    figure = Figure(figsize=(10, 3.5), dpi=100)
    loss, accuracy = figure.subplots(1, 2)
    x = [row["epoch"] for row in epochs]
    # Fixed legend places (loc="best" warns when its search took long, as on a loaded machine): losses fall, away
    # from the upper right; accuracies rise, away from the lower right.
    for axes, names, ylabel, place in ((loss, ("train_loss", "eval_loss"), "loss", "upper right"),
                                       (accuracy, ("eval_top1", "eval_top5"), "accuracy (fraction)", "lower right")):
        for name in names:
            axes.plot(x, [_drawable(row.get(name)) for row in epochs], marker="o", label=name)
        axes.set_xlabel("epoch")
        axes.set_ylabel(ylabel)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8, loc=place)
    figure.tight_layout()
    return figure


def _drawable(value: Any) -> float:
    """A point of a curve: a diverged (NaN, infinite) or absent loss is a gap, never a point off the axes."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else math.nan


def training_section(data: ReportData) -> Section:
    title = "Training curves"
    if not data.trainings:
        return absent("training", title, "No training run (metrics.jsonl) in the folders given.")
    parts = []
    for training in data.trainings:
        drawn = [row for index, row in enumerate(training.epochs) if index not in training.invalid]
        parts += [heading(training_label(training)),
                  rows_table(_CURVES, training.epochs, ("epoch",),
                             [index in training.invalid for index in range(len(training.epochs))]),
                  left_out_note([*(training.invalid[index] for index in sorted(training.invalid)),
                                 *training.left_out], "invalid line{s} (shaded)", "the figure")]
        if drawn:
            parts.append(figure_image(partial(_curves_figure, drawn), "loss and accuracy per epoch"))
        else:
            parts.append(paragraph("No epoch finished yet." if not training.epochs else "No epoch to draw.",
                                   "absent"))
    return Section("training", title, "".join(parts))
