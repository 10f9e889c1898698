"""The Throughput section: each run's rates and peak memory against batch size, a figure of each per workload and
sample shape, every run's table with its trust checks and how its step ran, and what the memory at each run's
largest batch size that ran holds (parameters, gradients, optimizer, activations). HFU stands beside MFU, the
hardware FLOPs beside the training FLOPs and the parameters one process holds beside the parameters, where a run's
differ (recomputation, FSDP): elsewhere they would repeat them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from trainbench.render.console import per_second, workload_title
from trainbench.render.page import Section, figure_image, heading, paragraph
from trainbench.render.plot import PEAK_MEMORY, PEAK_MEMORY_KIND, batch_size_figure, memory_figure
from trainbench.render.readable import header as column_header
from trainbench.render.readable import size_text, with_trust
from trainbench.report.found import ReportData, RunRecord
from trainbench.report.sections.common import (
    FIGURE_WIDTH,
    absent,
    capped_note,
    left_out_note,
    rows_table,
    titled,
    unique_labels,
    without_repeats,
)
from trainbench.results import fields
from trainbench.results.header import RunHeader, Timing
from trainbench.results.records import Status
from trainbench.results.run_settings import STEP_SINCE_5, settings_as_run, step_as_run
from trainbench.telemetry.schema import telemetry_values
from trainbench.workloads.settings import SHAPES, named, shape_words


def step_fields() -> tuple[str, ...]:
    """How the step ran (the registry's STEP group): said once per run, under its table."""
    return tuple(f.name for f in fields.in_groups(fields.Group.STEP) if f.written_to(fields.Where.SUMMARY_CSV))


def memory_fields() -> tuple[str, ...]:
    """The memory's breakdown and notes (the registry's MEMORY group, the peak apart): the breakdown table's."""
    return tuple(f.name for f in fields.in_groups(fields.Group.MEMORY)
                 if f.written_to(fields.Where.SUMMARY_CSV) and f.name != PEAK_MEMORY)


def throughput_columns() -> tuple[str, ...]:
    """Every field a run's summary.csv holds that this section shows: all but the telemetry (its own section)."""
    return ("batch_size", "status", *(name for name in fields.written_to(fields.Where.SUMMARY_CSV)
                                      if name not in telemetry_values()))


def table_columns() -> tuple[str, ...]:
    """A run's table: ``throughput_columns`` less how the step ran (a line under the table: ``step_text``) and the
    memory's breakdown (its own table: ``memory_part``); the peak memory is a column."""
    apart = {*step_fields(), *memory_fields()}
    return tuple(name for name in throughput_columns() if name not in apart)


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
        named = f"{workload_title(workload, size)}{f', {shape}' if shape else ''}"
        against = f"against batch size{f' ({shape})' if shape else ''}"
        picture = figure_image(partial(batch_size_figure, lines, f"{named}: {statistic}", f"overall {unit}",
                                       spread=("samples_per_sec_min", "samples_per_sec_max") if bars else None,
                                       width=FIGURE_WIDTH, sample_unit=sample_unit), f"{unit} {against}")
        peaks = {label: (rows, PEAK_MEMORY) for label, (rows, _) in lines.items()}  # "" where none is recorded
        memory = figure_image(partial(memory_figure, peaks, named, width=FIGURE_WIDTH, sample_unit=sample_unit),
                              f"peak memory {against}")
        parts.append(capped_note(len(lines), "runs", "its table below") + picture + memory)
    return "".join(parts)


def step_text(run: RunRecord) -> str:
    """"Step: matmul precision highest; optimizer adamw (torch, fused); attention kernel flash": each STEP field's
    values over the ok results (distinct ones joined), else the header's (matmul precision, optimizer); a run that
    records none (a file from before format 5) says they are unknown, not "highest" or the reference optimizer.
    Activation checkpointing and shard are said as the results record them (shard: none with one process), never
    from the header: a file from before format 6 ran without either, which needs no saying."""
    ok = [row for row in run.rows if row.get("status") == Status.OK]
    recorded = step_as_run(run.header)
    said = []
    for name in step_fields():
        values = list(dict.fromkeys(str(row[name]) for row in ok if row.get(name) is not None))
        if not values and name in STEP_SINCE_5 and recorded.get(name) is not None:
            values = [str(recorded[name])]
        if values:
            said.append(f"{column_header(name)} {', '.join(values)}")
    if not said:
        return "Step: matmul precision and optimizer not recorded (a run from before format 5): unknown, not " \
            "taken as highest or the reference optimizer."
    return f"Step: {'; '.join(said)}."


def largest_ran(run: RunRecord) -> dict[str, Any] | None:
    """The ok result of the largest batch size, where it holds a memory value; None otherwise."""
    held = [row for row in run.rows if row.get("status") == Status.OK
            and any(row.get(name) is not None for name in (PEAK_MEMORY, *memory_fields()))]
    return max(held, key=lambda row: row["batch_size"]) if held else None


# What the peak holds, by the registry's names (a typo is an import error): the optimizer's state is part of its memory.
_PARTS = tuple(fields.BY_NAME[name].name for name in ("memory_parameters_bytes", "memory_gradients_bytes",
                                                      "memory_optimizer_bytes", "memory_activations_bytes"))
REST = "rest_of_peak"  # the page's own column: the peak less the four parts


def _rest(row: dict[str, Any]) -> str | None:
    """The peak less the four parts (workspaces, the input, the allocator's cache; on the CPU the whole process's
    libraries too), where all five are recorded and the parts fit in the peak; as the page shows a size."""
    values = [value for name in (PEAK_MEMORY, *_PARTS)
              if isinstance(value := row.get(name), int | float) and not isinstance(value, bool)]
    if len(values) < 1 + len(_PARTS):
        return None
    rest = values[0] - sum(values[1:])
    return size_text(rest) if rest >= 0 else None


def memory_part(runs: Sequence[RunRecord]) -> str:
    """One row per run: its largest batch size that ran, the peak memory and what holds it."""
    found = [(run, row) for run in runs if (row := largest_ran(run)) is not None]
    if not found:
        return ""
    rows = [{"run": titled(run), **row, REST: _rest(row)} for run, row in found]
    kind, notes = PEAK_MEMORY_KIND, [name for name in memory_fields() if name not in (*_PARTS, PEAK_MEMORY_KIND)]
    columns = ("run", "batch_size", PEAK_MEMORY, kind, *_PARTS, REST, *notes)
    return heading("Memory at each run's largest batch size that ran") + paragraph(
        "peak memory: the highest in use during the timed windows (a GPU allocator's peak, or on the CPU the "
        "worker's peak resident set: measured by says which); parameter, gradient, optimizer (its per-parameter "
        "state and step counters; optimizer state: the per-parameter state alone) and activation memory (what the "
        "forward pass keeps for the backward pass), measured once per batch size outside the windows; rest of peak: "
        "the peak less those four (workspaces, the input, the allocator's cache; on the CPU the process's libraries "
        "too). Empty: not measured (the note says why).", "note") + rows_table(columns, rows, ("run", "batch_size"))


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
                       "measurement) is shaded too and left out of the figure; its run is not compared. Below each "
                       "throughput figure, the peak memory against batch size (where recorded: an oom marks where "
                       "the memory ran out).", "note"),
             throughput_figure(data.runs)]
    for run in data.runs:
        header = RunHeader.read(run.header)
        timing = header.timing or Timing()
        steps = f"{timing.warmup_steps} warm-up + {timing.timed_steps} timed steps per window; " \
            f"samples are {header.sample_unit}s ({per_second(header.sample_unit)}){_work_note(header)}"
        parts += [heading(titled(run)), paragraph(steps, "note"),
                  rows_table((*without_repeats(table_columns(), run.rows), *_TRUST),
                             [with_trust(row) for row in run.rows], ("batch_size", "status")),
                  paragraph(step_text(run), "note"),
                  left_out_note([str(row.get("error")) for row in run.invalid_rows()], "invalid result{s} (shaded)",
                                "the figure, and the run out of the comparisons")]
    parts.append(memory_part(data.runs))
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
