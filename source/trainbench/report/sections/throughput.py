"""The Throughput section: each run's rates against batch size, a figure per workload and sample shape, and every
run's table with its trust checks."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from trainbench.render.console import per_second, workload_title
from trainbench.render.page import Section, figure_image, heading, paragraph
from trainbench.render.plot import batch_size_figure
from trainbench.render.readable import with_trust
from trainbench.report.found import ReportData, RunRecord
from trainbench.report.sections.common import (
    FIGURE_WIDTH,
    absent,
    capped_note,
    left_out_note,
    rows_table,
    titled,
    unique_labels,
)
from trainbench.results import fields
from trainbench.results.header import RunHeader, Timing
from trainbench.results.records import Status
from trainbench.results.run_settings import settings_as_run
from trainbench.telemetry.schema import telemetry_values
from trainbench.workloads.settings import SHAPES, named, shape_words


def throughput_columns() -> tuple[str, ...]:
    """Every field a run's summary.csv holds, apart from the telemetry (its own section)."""
    return ("batch_size", "status", *(name for name in fields.written_to(fields.Where.SUMMARY_CSV)
                                      if name not in telemetry_values()))


_TRUST = ("checks",)  # the page's own column: the trust flags (readable.with_trust)


def shape_of(run: RunRecord) -> str:
    """What one sample is the size of: "224 px", "seq_len 128", or "" (a rate depends on it as much as on the
    framework: runs of different shapes never share a figure's axis)."""
    words = shape_words({name: value for name, value in settings_as_run(run.header).items() if value})
    return words[0] if words else ""


def by_workload_and_shape(runs: Sequence[RunRecord]) -> dict[tuple[str, str | None, str], list[RunRecord]]:
    """The runs grouped by workload, size and sample shape (``shape_of``), in the order first seen: a figure each
    (a tiny network's rate is no point on the full one's line)."""
    groups: dict[tuple[str, str | None, str], list[RunRecord]] = {}
    for run in runs:
        header = RunHeader.read(run.header)
        groups.setdefault((header.workload, header.size, shape_of(run)), []).append(run)
    return groups


def _has_windows(rows: Sequence[dict[str, Any]]) -> bool:
    """Some ok result measured 2 or more windows: there is a slowest and a fastest to draw as a bar."""
    return any(row.get("status") == Status.OK and isinstance(row.get("windows"), int) and row["windows"] >= 2
               and row.get("samples_per_sec_min") is not None for row in rows)


THROUGHPUT_STATISTIC = "overall {unit}: all timed samples / timed wall time"


def throughput_figure(runs: Sequence[RunRecord]) -> str:
    """One figure per workload and sample shape: samples of different workloads are different things, each in its
    own unit, and a 64 px image is not a 224 px one. The point is the overall rate (the table's first rate); the
    bars, drawn only where windows were repeated, run from the slowest to the fastest window."""
    parts = []
    for (workload, size, shape), group in by_workload_and_shape(runs).items():
        sample_unit = RunHeader.read(group[0].header).sample_unit
        unit = per_second(sample_unit)
        lines = {label: (run.rows, "samples_per_sec") for label, run in zip(unique_labels(group), group, strict=True)}
        bars = any(_has_windows(run.rows) for run in group)
        statistic = THROUGHPUT_STATISTIC.format(unit=unit) + ("; bars: slowest to fastest window" if bars else "")
        title = f"{workload_title(workload, size)}{f', {shape}' if shape else ''}: {statistic}"
        picture = figure_image(partial(batch_size_figure, lines, title, f"overall {unit}",
                                       spread=("samples_per_sec_min", "samples_per_sec_max") if bars else None,
                                       width=FIGURE_WIDTH, sample_unit=sample_unit),
                               f"{unit} against batch size{f' ({shape})' if shape else ''}")
        parts.append(capped_note(len(lines), "runs", "its table below") + picture)
    return "".join(parts)


def throughput_section(data: ReportData) -> Section:
    title = "Throughput against batch size"
    if not data.runs:
        return absent("throughput", title, "No throughput run (summary.json) in the folders given.")
    parts = [paragraph("samples/s: all timed samples / all timed wall time (warm-up excluded), the rate each figure "
                       "draws; the median, min and max of the windows' own samples/s (--windows) show the spread, "
                       "and so do CV (%: the windows' standard deviation / mean x 100) and spread (%: (fastest - "
                       "slowest) / median x 100); checks: windows shorter than 5 s or more than 10 % apart. Step "
                       "times are in milliseconds, over every timed step. One figure per workload and "
                       f"{' or '.join(named(name).words for name in SHAPES)}. Failed batch sizes are shaded, with "
                       "their reasons under Failed batch sizes; an invalid result (a rate or time that is no "
                       "measurement) is shaded too and left out of the figure; its run is not compared.", "note"),
             throughput_figure(data.runs)]
    for run in data.runs:
        header = RunHeader.read(run.header)
        timing = header.timing or Timing()
        steps = f"{timing.warmup_steps} warm-up + {timing.timed_steps} timed steps per window; " \
            f"samples are {header.sample_unit}s ({per_second(header.sample_unit)}){_work_note(header)}"
        parts += [heading(titled(run)), paragraph(steps, "note"),
                  rows_table((*throughput_columns(), *_TRUST), [with_trust(row) for row in run.rows],
                             ("batch_size", "status")),
                  left_out_note([str(row.get("error")) for row in run.invalid_rows()], "invalid result{s} (shaded)",
                                "the figure, and the run out of the comparisons")]
    return Section("throughput", title, "".join(parts))


def _work_note(header: RunHeader) -> str:
    """"; 110,104,890 parameters, 3.4e+10 training FLOP per sample (FlopCounterMode)" where recorded."""
    parts = []
    if header.parameters is not None:
        parts.append(f"{header.parameters:,} parameters")
    if header.train_flops_per_sample is not None:
        parts.append(f"{header.train_flops_per_sample:.3g} training FLOP per sample")
    if header.flops_note:
        parts.append(f"FLOPs: {header.flops_note}")
    return "; " + ", ".join(parts) if parts else ""
