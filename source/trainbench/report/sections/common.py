"""What the report's sections share: a run's label, tables of rows and frames headed and in units as ``render.readable``
says, the notes on what a figure or table left out, a campaign's rows, the profiles of some tools."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench import workloads
from trainbench.config import ModelConfig, field_default
from trainbench.render.console import workload_title
from trainbench.render.page import Section, heading, paragraph, table
from trainbench.render.plot import drawn_lines
from trainbench.render.readable import header, shown
from trainbench.report.found import Campaign, Profile, ReportData, RunRecord
from trainbench.results import fields
from trainbench.results.header import WORKLOAD, RunHeader
from trainbench.results.records import Status
from trainbench.results.run_settings import settings_as_run
from trainbench.workloads.settings import shape_words

TOP_KERNELS = 10  # rows of a top-kernel table
FIGURE_WIDTH = 10.0  # inches: the page's figures, with their legend beside the axes


def run_label(run: RunRecord) -> str:
    """workload (when not ResNet-50), framework precision device, image size or sequence length and data, as the
    settings in summary.json say; the step's settings where they are not the defaults (matmul precision other than
    highest, an optimizer other than the workload's reference, activation checkpointing, FSDP): two runs that differ
    only there are told apart."""
    header = RunHeader.read(run.header)
    data = header.data or "synthetic"
    parts: list[str | None] = [] if header.workload == WORKLOAD else [workload_title(header.workload)]
    parts += [header.framework, header.precision, *_step_words(header), f"on {header.device}"]
    if header.size not in (None, "full"):
        parts.append(str(header.size))
    parts += shape_words({name: value for name, value in settings_as_run(header).items() if value}, "label")
    parts.append("synthetic data" if data == "synthetic" else f"data {Path(str(data)).name}")
    if header.profiling is not None:
        parts.insert(0, f"{header.profiling.profiler} profile:")
    return " ".join(str(part) for part in parts if part)


def _step_words(header: RunHeader) -> list[str]:
    """"matmul high", "adamw", "checkpointing full", "fsdp": a step setting that is recorded and not its default
    (nothing for a file that records none: unknown, said elsewhere)."""
    words = []
    if header.matmul_precision not in (None, field_default(ModelConfig, "matmul_precision")):
        words.append(f"matmul {header.matmul_precision}")
    known = header.workload in workloads.names()
    if header.optimizer_name is not None and (not known or header.optimizer_name !=
                                              workloads.get(header.workload).optimizer.name):
        words.append(header.optimizer_name)
    if header.activation_checkpointing not in (None, field_default(ModelConfig, "activation_checkpointing")):
        words.append(f"checkpointing {header.activation_checkpointing}")
    if header.shard not in (None, field_default(ModelConfig, "shard")):
        words.append(str(header.shard))
    return words


BESIDE = fields.BESIDE  # a value shown right after its counterpart, and only where some row's differs from it


def beside(columns: Sequence[str]) -> tuple[str, ...]:
    """``columns`` with each ``BESIDE`` value right after its counterpart (where both are there)."""
    placed = [name for name in columns if not (name in BESIDE and BESIDE[name] in columns)]
    for name, counterpart in BESIDE.items():
        if name in columns and counterpart in columns:
            placed.insert(placed.index(counterpart) + 1, name)
    return tuple(placed)


def differs_from_model(name: str, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether some row holds ``name`` (a ``BESIDE`` value) other than its counterpart's: a checkpointed run's HFU,
    a sharded run's parameters held; a value whose counterpart is missing counts as other."""
    counterpart = BESIDE[name]
    for row in rows:
        value, model = row.get(name), row.get(counterpart)
        if missing(value):
            continue
        if missing(model) or not isinstance(value, int | float) or not isinstance(model, int | float) or \
                not math.isclose(float(value), float(model), rel_tol=1e-9):
            return True
    return False


def without_repeats(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """``columns`` (``beside``'s order) less the ``BESIDE`` values no row holds other than its counterpart."""
    return tuple(name for name in beside(columns) if name not in BESIDE or differs_from_model(name, rows))


def titled(run: RunRecord) -> str:
    return f"{run_label(run)} ({run.shown_name})"


def unique_labels(runs: Sequence[RunRecord]) -> list[str]:
    """Each run's label, with its name (``RunRecord.name``: unique in the page) where two runs would otherwise share
    one."""
    labels = [run_label(run) for run in runs]
    return [titled(run) if labels.count(label) > 1 else label for run, label in zip(runs, labels, strict=True)]


def filled(columns: Sequence[str], rows: Sequence[dict[str, Any]], keep: Sequence[str] = ()) -> list[str]:
    """The columns that hold a value in some row (and those in ``keep``): no column of blanks."""
    return [name for name in columns if name in keep or any(row.get(name) is not None for row in rows)]


def rows_table(columns: Sequence[str], rows: Sequence[dict[str, Any]], keep: Sequence[str] = ("batch_size",),
               failed: Sequence[bool] | None = None) -> str:
    """``rows`` under the ``columns`` that hold something, headed and in units as ``readable`` says; rows whose
    status is not ok (or those ``failed`` flags) shaded, an invalid row's NaN shown as such rather than as a blank."""
    names = filled(columns, rows, keep)
    flags = [row.get("status", "ok") != "ok" for row in rows] if failed is None else list(failed)
    return table([header(name) for name in names],
                 [[_as_shown(shown(name, row.get(name)), flag) for name in names]
                  for row, flag in zip(rows, flags, strict=True)], flags)


def words_table(frame: pd.DataFrame, failed: Sequence[bool] = ()) -> str:
    """A frame as a table, headed and in units as ``readable`` says."""
    names = [str(name) for name in frame.columns]
    rows = [[shown(name, value) for name, value in zip(names, row, strict=True)]
            for row in frame.astype(object).itertuples(index=False, name=None)]
    return table([header(name) for name in names], rows, failed)


def _as_shown(value: Any, marked: bool) -> Any:
    return "nan" if marked and isinstance(value, float) and math.isnan(value) else value


def left_out_note(reasons: Sequence[str], what: str, where: str) -> str:
    """'2 invalid results (shaded) left out of the figure: reason; reason', or nothing; ``what`` holds "{s}" where
    the plural's s goes."""
    if not reasons:
        return ""
    counted = f"{len(reasons)} {what.format(s='' if len(reasons) == 1 else 's')}"
    return paragraph(f"{counted} left out of {where}: {'; '.join(reasons)}", "warn")


def is_invalid(row: dict[str, Any]) -> bool:
    return row.get("status") == Status.INVALID


def absent(key: str, title: str, why: str) -> Section:
    return Section(key, title, None, why)


def capped_note(lines: int, what: str, where: str) -> str:
    """Says so when a figure draws fewer lines than it was given (``plot.MAX_LINES``)."""
    drawn = drawn_lines(lines)
    if drawn == lines:
        return ""
    return paragraph(f"The figure draws the first {drawn} of the {lines} {what} (one colour each); every one's "
                     f"numbers are in {where}.", "note")


def campaign_rows(campaign: Campaign) -> list[dict[str, Any]]:
    """One row per run folder x batch size (the table repeats a batch size's values on each window's row)."""
    frame = campaign.table.drop_duplicates(["run_folder", "batch_size"])
    return [{key: (None if missing(value) else value) for key, value in row.items()}
            for row in frame.to_dict("records")]


def missing(value: Any) -> bool:
    return not isinstance(value, list | tuple | dict) and bool(pd.isna(value))


def profiles_of(data: ReportData, tools: tuple[str, ...]) -> list[Profile]:
    return [profile for profile in data.profiles if profile.run.header.get("profiler") in tools]


def kernel_tables(profile: Profile, describe: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> str:
    """Each batch size's top kernels, first ``TOP_KERNELS`` of them, through ``describe`` (units) when given."""
    parts = []
    for batch, kernels in sorted(profile.top_kernels.items()):
        top = kernels.head(TOP_KERNELS)
        parts.append(heading(f"batch {batch}: top {len(top)} of {len(kernels)} kernels"))
        parts.append(words_table(describe(top) if describe else top))
    return "".join(parts)
