"""The report's sections, one function each: the numbers in tables, the pictures beside them, or one line saying
why there is nothing to show. They draw ``report.found`` records and read no other command's output."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.config import FRAMEWORK_PROFILERS
from trainbench.report.console import per_second, workload_title
from trainbench.report.found import (
    Campaign,
    Environment,
    ModelFile,
    Profile,
    ReportData,
    RunRecord,
    Training,
    short_names,
)
from trainbench.report.page import Section, cell_text, figure_image, frame_table, heading, image, paragraph, table
from trainbench.report.plot import batch_size_figure, drawn_lines
from trainbench.report.ranking_sections import comparisons_section, headline_section
from trainbench.report.telemetry_plot import telemetry_figure
from trainbench.results import fields
from trainbench.results.header import RunHeader, Timing
from trainbench.results.layout import MODEL_PLOT
from trainbench.results.records import Status
from trainbench.telemetry.schema import TELEMETRY_DIR, telemetry_values

TOP_KERNELS = 10  # rows of a top-kernel table
FIGURE_WIDTH = 10.0  # inches: the page's figures, with their legend beside the axes


# --- labels and shared helpers --------------------------------------------------------------------------------


def run_label(run: RunRecord) -> str:
    """workload (when not ResNet-50), framework precision device, image size or sequence length and data, as the
    settings in summary.json say."""
    header = RunHeader.read(run.header)
    data = header.data or "synthetic"
    parts: list[str | None] = [] if header.workload == "resnet50" else [workload_title(header.workload)]
    parts += [header.framework, header.precision, f"on {header.device}"]
    if header.size not in (None, "full"):
        parts.append(str(header.size))
    if header.image_size:
        parts.append(f"{header.image_size}px")
    if (header.params or {}).get("seq_len"):
        parts.append(f"seq_len {(header.params or {})['seq_len']}")
    parts.append("synthetic data" if data == "synthetic" else f"data {Path(str(data)).name}")
    if header.profiling is not None:
        parts.insert(0, f"{header.profiling.profiler} profile:")
    return " ".join(str(part) for part in parts if part)


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
    """``rows`` under the ``columns`` that hold something; rows whose status is not ok (or those ``failed``
    flags) shaded, an invalid row's NaN shown as such rather than as a blank."""
    shown = filled(columns, rows, keep)
    flags = [row.get("status", "ok") != "ok" for row in rows] if failed is None else list(failed)
    return table(shown, [[_as_shown(row.get(name), flag) for name in shown] for row, flag in zip(rows, flags,
                                                                                                  strict=True)],
                 flags)


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


# --- environment ----------------------------------------------------------------------------------------------


def _gpus(env: dict[str, Any]) -> list[dict[str, Any]]:
    gpu = found if isinstance(found := env.get("gpu"), dict) else {}
    gpus = listed if isinstance(listed := gpu.get("gpus"), list) else []
    return [each for each in gpus if isinstance(each, dict)]


def _environment_fields(env: dict[str, Any]) -> dict[str, Any]:
    gpu = found if isinstance(found := env.get("gpu"), dict) else {}
    command = env.get("command")
    names = [str(g.get("name")) for g in _gpus(env) if g.get("name")]
    fields = {
        "command": (" ".join(map(str, command)) if isinstance(command, list) else command) or None,
        "time (UTC)": env.get("time_utc"),
        "trainbench": f"{env.get('trainbench_version')} (commit {env.get('suite_commit')})",
        "host": env.get("hostname"),
        "platform": env.get("platform"),
        "python": env.get("python"),
        "CPU": env.get("cpu_model"),
        "CPU cores (usable)": f"{env.get('cpu_count')} ({env.get('cpus_usable', env.get('cpu_count'))})",
        "CUDA_VISIBLE_DEVICES": env.get("cuda_visible_devices"),
        "GPUs": ", ".join(names) or f"none seen by NVML ({gpu.get('unavailable') or 'no GPU'})",
        "GPU driver": gpu.get("driver"),
        "CUDA driver": gpu.get("cuda_driver"),
    }
    framework = found if isinstance(found := env.get("framework"), dict) else {}
    for name, value in framework.items():  # what the workers' framework reported
        fields[name if name not in fields else f"framework: {name}"] = value
    return fields


def _text_or_none(value: Any) -> str | None:
    return None if value is None or value == "" or value == [] else cell_text(value)


_GPU_COLUMNS = ("index", "name", "compute_capability", "memory_total_mib", "sm_clock_mhz", "sm_clock_max_mhz",
                "sm_application_clock_mhz", "memory_clock_mhz", "memory_clock_max_mhz", "power_w", "power_limit_w",
                "temperature_c", "performance_state", "persistence_mode", "unavailable")


def _environment_columns(environments: Sequence[Environment]) -> list[str]:
    """Each environment's first folder (named apart from the others') and how many more share it."""
    names = short_names([environment.folders[0] for environment in environments])
    return [names[environment.folders[0]] + (f" and {len(environment.folders) - 1} more"
                                             if len(environment.folders) > 1 else "") for environment in environments]


def environment_section(data: ReportData) -> Section:
    title = "Environment"
    if not data.environments:
        return absent("environment", title, "No env.json in the folders given: the runs' machine is unknown.")
    fields = [_environment_fields(environment.env) for environment in data.environments]
    names = list(dict.fromkeys(name for each in fields for name in each))
    # as text (left-aligned like the rest of the column); a row empty in every column is left out
    rows = [[name, *(_text_or_none(each.get(name)) for each in fields)] for name in names]
    rows = [row for row in rows if any(value is not None for value in row[1:])]
    parts = [paragraph("As each run recorded it before measuring (env.json); runs on the same machine and software "
                       "share a column.", "note"),
             table(["", *_environment_columns(data.environments)], rows)]
    for environment, column in zip(data.environments, _environment_columns(data.environments), strict=True):
        gpus = _gpus(environment.env)
        if gpus:
            parts.append(heading(f"GPUs of {column} (NVML, idle, before the run)"))
            parts.append(rows_table(_GPU_COLUMNS, gpus, keep=("index", "name")))
    return Section("environment", title, "".join(parts))


# --- throughput, failures, input ------------------------------------------------------------------------------

def throughput_columns() -> tuple[str, ...]:
    """Every field a run's summary.csv holds, apart from the telemetry (its own section)."""
    return ("batch_size", "status", *(name for name in fields.written_to(fields.Where.SUMMARY_CSV)
                                      if name not in telemetry_values()))


def by_workload(runs: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    """The runs grouped by workload, in the order first seen: each group's rates are in one unit."""
    groups: dict[str, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(RunHeader.read(run.header).workload, []).append(run)
    return groups


def throughput_figure(runs: Sequence[RunRecord]) -> str:
    """One figure per workload: samples of different workloads are different things, each in its own unit."""
    parts = []
    for workload, group in by_workload(runs).items():
        unit = per_second(RunHeader.read(group[0].header).sample_unit)
        lines = {label: (run.rows, "samples_per_sec") for label, run in zip(unique_labels(group), group, strict=True)}
        title = f"{workload_title(workload)} training throughput (bars: slowest to fastest window)"
        picture = figure_image(partial(batch_size_figure, lines, title, f"{unit} ({unit.removesuffix('/s')} / timed "
                                       "window)", spread=("samples_per_sec_min", "samples_per_sec_max"),
                                       width=FIGURE_WIDTH), f"{unit} against batch size")
        parts.append(capped_note(len(lines), "runs", "its table below") + picture)
    return "".join(parts)


def capped_note(lines: int, what: str, where: str) -> str:
    """Says so when a figure draws fewer lines than it was given (``plot.MAX_LINES``)."""
    drawn = drawn_lines(lines)
    if drawn == lines:
        return ""
    return paragraph(f"The figure draws the first {drawn} of the {lines} {what} (one colour each); every one's "
                     f"numbers are in {where}.", "note")


def throughput_section(data: ReportData) -> Section:
    title = "Throughput against batch size"
    if not data.runs:
        return absent("throughput", title, "No throughput run (summary.json) in the folders given.")
    parts = [paragraph("samples_per_sec: all timed samples / all timed wall time (warm-up excluded); its median, min "
                       "and max over the timed windows (--windows) show the spread; step times over every timed step. "
                       "Failed batch sizes are shaded, with their reasons under Failed batch sizes; an invalid result "
                       "(a rate or time that is no measurement) is shaded too and left out of the figure; its run is "
                       "not compared.", "note"),
             throughput_figure(data.runs)]
    for run in data.runs:
        header = RunHeader.read(run.header)
        timing = header.timing or Timing()
        steps = f"{timing.warmup_steps} warm-up + {timing.timed_steps} timed steps per window; " \
            f"samples are {header.sample_unit}s ({per_second(header.sample_unit)}){_work_note(header)}"
        parts += [heading(titled(run)), paragraph(steps, "note"),
                  rows_table(throughput_columns(), run.rows, ("batch_size", "status")),
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


def _campaign_rows(campaign: Campaign) -> list[dict[str, Any]]:
    """One row per run folder x batch size (the table repeats a batch size's values on each window's row)."""
    frame = campaign.table.drop_duplicates(["run_folder", "batch_size"])
    return [{key: (None if _missing(value) else value) for key, value in row.items()}
            for row in frame.to_dict("records")]


def _missing(value: Any) -> bool:
    return not isinstance(value, list | tuple | dict) and bool(pd.isna(value))


def _failed(row: dict[str, Any]) -> bool:
    """A batch size that did not run to the end (an invalid one ran: its file holds no measurement)."""
    return row.get("status") not in (Status.OK, Status.INVALID)


def failures_section(data: ReportData) -> Section:
    title = "Failed batch sizes"
    rows = [(titled(run), row.get("batch_size"), row.get("status"), row.get("error"))
            for run in [*data.runs, *(profile.run for profile in data.profiles)]
            for row in run.rows if _failed(row)]
    rows += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", row.get("batch_size"), row.get("status"),
              row.get("error")) for campaign in data.campaigns for row in _campaign_rows(campaign) if _failed(row)]
    rows += [(f"variability {study.path.name}: {row['run']}", row["batch_size"], row["status"], row["error"])
             for study in data.variability for row in study.runs.to_dict("records") if _failed(row)]
    rows += [(f"training {training.path.name}", failure.get("batch_size"), failure.get("status"),
              f"{failure.get('error')} (after {failure.get('epochs_finished')} epochs)")
             for training in data.trainings for failure in training.failures]
    if not rows:
        return absent("failures", title, "Every batch size measured ran to the end (no oom, error or interruption).")
    return Section("failures", title, table(["where", "batch_size", "status", "reason"], rows, [True] * len(rows)))


def invalid_items(data: ReportData) -> list[tuple[str, str, str]]:
    """Every value left out as no measurement: (where, what, why: its file and field)."""
    items = []
    for run in [*data.runs, *(profile.run for profile in data.profiles)]:
        items += [(titled(run), f"batch {row.get('batch_size')}", str(row.get("error"))) for row in run.invalid_rows()]
        items += [(titled(run), "telemetry", why) for why in run.left_out]
    items += [(titled(profile.run), "profiler's details", why) for profile in data.profiles for why in profile.left_out]
    items += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", f"batch {row.get('batch_size')}",
               str(row.get("error"))) for campaign in data.campaigns for row in _campaign_rows(campaign)
              if is_invalid(row)]
    items += [(f"variability {study.path.name}: {row['run']}", f"batch {row['batch_size']}", str(row["error"]))
              for study in data.variability for row in study.runs.to_dict("records") if is_invalid(row)]
    items += [(f"model {found.path.name}", f"models[{index}]", why) for found in data.models
              for index, why in sorted(found.invalid.items())]
    for training in data.trainings:
        items += [(f"training {training.path.name}", f"epoch {training.epochs[index].get('epoch')}", why)
                  for index, why in sorted(training.invalid.items())]
        items += [(f"training {training.path.name}", "a line", why) for why in training.left_out]
    return items


def invalid_section(data: ReportData) -> Section:
    title = "Invalid values"
    items = invalid_items(data)
    if not items:
        return absent("invalid", title, "Every rate, time and curve value read is a number that a run can measure.")
    note = paragraph("Values that no run measures (NaN, infinite, negative, a text where a number belongs): each is "
                     "shown where it was found, marked, and left out of every figure, comparison and statistic.",
                     "note")
    return Section("invalid", title, note + table(["where", "what", "reason"], items, [True] * len(items)))


def input_section(data: ReportData) -> Section:
    title = "Input-bound verdicts"
    rows = [(titled(run), row["batch_size"], row.get("samples_per_sec"), row.get("input_samples_per_sec"),
             row.get("input_bound")) for run in data.runs for row in run.rows
            if row.get("input_samples_per_sec") is not None and not is_invalid(row)]
    rows += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", row.get("batch_size"),
              row.get("samples_per_sec"), row.get("input_samples_per_sec"), row.get("input_bound"))
             for campaign in data.campaigns for row in _campaign_rows(campaign)
             if row.get("input_samples_per_sec") is not None and not is_invalid(row)]
    if not rows:
        return absent("input", title, "No run on real data (--data): the input pipeline was not measured alone, so "
                      "there is nothing to judge.")
    note = paragraph("input_bound: the input pipeline alone (same batch size, no model) delivers less than 1.1 x the "
                     "training rate measured with it: the run measured the pipeline at least as much as the step.",
                     "note")
    return Section("input", title, note + table(
        ["run", "batch_size", "training images/s", "pipeline alone images/s", "input_bound"], rows))


# --- campaigns ------------------------------------------------------------------------------------------------


def _summary_lines(summary: pd.DataFrame) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """The summary as figure lines: one per configuration, a point per batch size with its repetitions' range."""
    lines: dict[str, tuple[list[dict[str, Any]], str]] = {}
    for row in summary.to_dict("records"):
        if _missing(row["batch_size"]):
            continue
        point = {"batch_size": int(row["batch_size"]), "status": "ok" if row["ok"] else "error",
                 **{name: None if _missing(row[name]) else row[name] for name in
                    ("samples_per_sec_median", "samples_per_sec_min", "samples_per_sec_max")}}
        lines.setdefault(str(row["config"]), ([], "samples_per_sec_median"))[0].append(point)
    return lines


def campaign_part(campaign: Campaign) -> str:
    summary = campaign.summary
    runs = campaign.table["run_folder"].nunique() if "run_folder" in campaign.table else 0
    parts = [heading(f"campaign {campaign.path.name}"),
             paragraph(f"{runs} finished run folders; one row per configuration and batch size over its "
                       "repetitions (ok of runs); spread_pct = (max - min) / median x 100.", "note")]
    if summary["scaling_efficiency"].notna().any():
        parts.append(paragraph("scaling_efficiency: the median samples/s with N processes / (N x the same "
                               "configuration's median with 1 process).", "note"))
    else:
        summary = summary.drop(columns="scaling_efficiency")
        parts.append(paragraph("No scaling efficiency: the matrix has no gpus axis with 1 and more processes.",
                               "note"))
    parts.append(frame_table(summary, [not ok for ok in summary["ok"].fillna(0)]))
    invalid = [f"{row.get('run_folder')} batch {row.get('batch_size')}: {row.get('error')}"
               for row in _campaign_rows(campaign) if is_invalid(row)]
    parts.append(left_out_note(invalid, "invalid result{s}", "the median, min, max, spread, CV and the figure"))
    if campaign.left_out:
        parts.append(paragraph(f"Not counted: {'; '.join(campaign.left_out)}.", "warn"))
    lines = _summary_lines(campaign.summary)
    workload_of = _config_workloads(campaign.table)
    for workload, configs in _by_workload(lines, workload_of).items():
        parts.append(_campaign_workload_part(campaign, workload, {config: lines[config] for config in configs}))
    return "".join(parts)


_UNKNOWN = "unknown"  # configurations none of whose runs could be read


def _config_workloads(table: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Each configuration's workload and sample unit, as its runs recorded them (results.csv's columns)."""
    known = table.dropna(subset=["workload"]).drop_duplicates("config")
    return {str(config): (str(workload), "sample" if _missing(unit) else str(unit))
            for config, workload, unit in known[["config", "workload", "sample_unit"]].itertuples(index=False)}


def _by_workload(lines: dict[str, Any], workload_of: dict[str, tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """The figure's configurations grouped by (workload, sample unit), in the order first seen: a figure each."""
    groups: dict[tuple[str, str], list[str]] = {}
    for config in lines:
        groups.setdefault(workload_of.get(config, (_UNKNOWN, "sample")), []).append(config)
    return groups


_WORK = ("parameters", "train_flops_per_sample", "tokens_per_sec", "achieved_flops", "mfu")


def _work_rows(campaign: Campaign, configs: list[str]) -> list[dict[str, Any]]:
    """Per configuration and batch size, the median over its ok repetitions of what a sample costs and the
    tokens/s, FLOP/s and MFU it gave."""
    rows = [row for row in _campaign_rows(campaign) if row.get("config") in configs and row.get("status") == "ok"]
    frame = pd.DataFrame(rows, columns=["config", "batch_size", *_WORK])
    frame[list(_WORK)] = frame[list(_WORK)].apply(pd.to_numeric, errors="coerce")  # a column of blanks: NaN
    medians = frame.groupby(["config", "batch_size"], sort=False)[list(_WORK)].median()
    return [{"config": config, "batch_size": int(batch), **{key: (None if _missing(value) else value)
                                                           for key, value in values.items()}}
            for (config, batch), values in medians.to_dict("index").items()]


def _campaign_workload_part(campaign: Campaign, workload: tuple[str, str],
                            lines: dict[str, tuple[list[dict[str, Any]], str]]) -> str:
    """One workload's figure in its own unit ("sequences/s"), and what its samples cost (tokens/s, FLOPs, MFU)."""
    name, sample_unit = workload
    title, unit = workload_title(name) if name != _UNKNOWN else "unknown workload", per_second(sample_unit)
    parts = [heading(f"{title}: {unit}"),
             paragraph(f"samples are {sample_unit}s: samples_per_sec is in {unit}; tokens_per_sec: tokens/s "
                       "(samples/s x the tokens one sample holds), for sequence workloads only; achieved_flops: "
                       "FLOP/s (samples/s x train_flops_per_sample); mfu: achieved / the GPUs' dense peak (empty on "
                       "the CPU or an unknown GPU).", "note")]
    work = _work_rows(campaign, list(lines))
    if any(row.get(key) is not None for row in work for key in _WORK):
        parts.append(rows_table(("config", "batch_size", *_WORK), work, ("config", "batch_size")))
    parts += [capped_note(len(lines), "configurations", "the table above"), figure_image(
        partial(batch_size_figure, lines, f"campaign {campaign.path.name}: {title}, median over repetitions "
                "(bars: min-max)", unit, spread=("samples_per_sec_min", "samples_per_sec_max"), width=FIGURE_WIDTH),
        f"campaign {unit} against batch size")]
    return "".join(parts)


def campaigns_section(data: ReportData) -> Section:
    title = "Campaigns and scaling efficiency"
    if not data.campaigns:
        return absent("campaigns", title, "No campaign folder (campaign.json) in the folders given.")
    return Section("campaigns", title, "".join(campaign_part(campaign) for campaign in data.campaigns))


# --- telemetry ------------------------------------------------------------------------------------------------

def _run_telemetry(run: RunRecord) -> str:
    measured = [row for row in run.rows if row.get("energy_j") is not None or row.get("telemetry_samples")]
    picture = figure_image(lambda: telemetry_figure(run.path / TELEMETRY_DIR, f"GPU telemetry: {run_label(run)}"),
                           "SM clock, power and temperature against time")
    if not measured and not picture and not run.left_out:
        return ""
    parts = [heading(titled(run))]
    if measured:
        parts.append(rows_table(("batch_size", *telemetry_values()), measured))
    parts.append(picture)
    parts.append(left_out_note(run.left_out, "column{s} with values that are no reading", "the figure"))
    return "".join(parts)


def _campaign_telemetry(campaign: Campaign) -> str:
    rows = [row for row in _campaign_rows(campaign) if row.get("energy_j") is not None]
    if not rows:
        return ""
    columns = ["run_folder", "config", "batch_size",
               *(name for name in telemetry_values() if name != "telemetry_note")]
    return heading(f"campaign {campaign.path.name}") + rows_table(columns, rows, ("run_folder", "batch_size"))


def telemetry_section(data: ReportData) -> Section:
    title = "GPU telemetry"
    parts = [part for part in [*map(_run_telemetry, data.runs), *map(_campaign_telemetry, data.campaigns)] if part]
    if not parts:
        notes = {note for run in data.runs for row in run.rows if (note := row.get("telemetry_note"))}
        why = f" Recorded: {'; '.join(sorted(notes))}." if notes else ""
        return absent("telemetry", title, "No GPU telemetry in the runs found: energy, power and clocks are read "
                      f"from NVML during runs on a GPU.{why}")
    note = paragraph("Over the timed windows: energy from NVML's energy counter, joules per sample, mean power, the "
                     "SM clock's median and the share of time held down by the power cap or heat; the figure shows "
                     "the whole run with the timed windows shaded.", "note")
    return Section("telemetry", title, note + "".join(parts))


# --- profiles -------------------------------------------------------------------------------------------------

_COREUTIL = ("batch_size", "status", "kernels", "fma", "fp16", "tensor", "sfu", "profiled_iterations")
_TIMELINE = ("batch_size", "status", "gpu_busy_fraction", "window_ms", "steps", "step_gpu_ms_median", "memcpy_ms",
             "kernels", "top_kernel", "profiled_iterations")
_FRAMEWORK = ("batch_size", "status", "profiled_iterations", "profiled_samples_per_sec", "trace", "top_operator")
_COREUTIL_TOOLS, _TIMELINE_TOOLS, _FRAMEWORK_TOOLS = ("ncu",), ("nsys", "nvprof"), FRAMEWORK_PROFILERS


def _profiles_of(data: ReportData, tools: tuple[str, ...]) -> list[Profile]:
    return [profile for profile in data.profiles if profile.run.header.get("profiler") in tools]


def _kernel_tables(profile: Profile, describe: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> str:
    """Each batch size's top kernels, first ``TOP_KERNELS`` of them, through ``describe`` (units) when given."""
    parts = []
    for batch, kernels in sorted(profile.top_kernels.items()):
        shown = kernels.head(TOP_KERNELS)
        parts.append(heading(f"batch {batch}: top {len(shown)} of {len(kernels)} kernels"))
        parts.append(frame_table(describe(shown) if describe else shown))
    return "".join(parts)


def _metrics_note(run: RunRecord) -> str:
    first = next((row for row in run.rows if row.get("fma_metric")), None)
    metrics = "; ".join(f"{core}: {first[f'{core}_metric']}" for core in ("fma", "fp16", "tensor", "sfu")
                        if first and first.get(f"{core}_metric"))
    clocks = run.header.get("clock_control")
    text = ("% of peak sustained, averaged over the window's kernels weighted by their cycles"
            + (f"; clock control {clocks}" if clocks else "") + (f". Metrics: {metrics}" if metrics else ""))
    return paragraph(text, "note")


def coreutil_section(data: ReportData) -> Section:
    title = "Core utilization (Nsight Compute)"
    profiles = _profiles_of(data, _COREUTIL_TOOLS)
    if not profiles:
        return absent("coreutil", title, "No ncu profile (profiled_data_ncu/profile.json) in the folders given.")
    parts = []
    for profile in profiles:
        run = profile.run
        parts += [heading(titled(run)), _metrics_note(run), rows_table(_COREUTIL, run.rows, ("batch_size", "status"))]
        parts += [image(picture) for picture in run.pictures]
        parts.append(_kernel_tables(profile))  # coreutil's per-kernel table as written
    return Section("coreutil", title, "".join(parts))


def _nsys_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """nsys' top kernels in readable units: total ms, mean µs, share of the kernel time (a value absent from the
    file: blank)."""
    kernels = kernels.reindex(columns=["name", "total_ns", "instances", "mean_ns", "share"])
    number = {name: pd.to_numeric(kernels[name], errors="coerce") for name in ("total_ns", "mean_ns")}
    return pd.DataFrame({"name": kernels["name"], "total_ms": number["total_ns"] / 1e6,
                         "instances": kernels["instances"], "mean_us": number["mean_ns"] / 1e3,
                         "share": kernels["share"]})


def _step_table(profile: Profile) -> str:
    rows = [(batch, len(steps), min(steps), pd.Series(steps).median(), max(steps), steps)
            for batch, steps in sorted(profile.step_gpu_ms.items()) if steps]
    if not rows:
        return ""
    return heading("GPU time per profiled step (ms, kernels merged across streams)") + table(
        ["batch_size", "steps", "min_ms", "median_ms", "max_ms", "each step (ms)"], rows)


def timeline_section(data: ReportData) -> Section:
    title = "GPU timeline (Nsight Systems, nvprof)"
    profiles = _profiles_of(data, _TIMELINE_TOOLS)
    if not profiles:
        return absent("timeline", title, "No nsys or nvprof profile (profiled_data_nsys/profile.json) in the folders "
                      "given.")
    parts = [paragraph("gpu_busy_fraction: the share of the profiled window in which some kernel ran (kernels of "
                       "concurrent streams merged, not summed).", "note")]
    for profile in profiles:
        run = profile.run
        parts += [heading(titled(run)), rows_table(_TIMELINE, run.rows, ("batch_size", "status")), _step_table(profile),
                  left_out_note(profile.left_out, "list{s}", "the step and kernel tables")]
        parts += [image(picture) for picture in run.pictures]
        parts.append(_kernel_tables(profile, _nsys_kernels))
    return Section("timeline", title, "".join(parts))


def framework_profiles_section(data: ReportData) -> Section:
    title = "Framework profiler traces"
    profiles = _profiles_of(data, _FRAMEWORK_TOOLS)
    if not profiles:
        return absent("framework-profiles", title, "No torch or tf profiler run (profiled_data_torch, "
                      "profiled_data_tf) in the folders given.")
    parts = [paragraph("Traces to open in TensorBoard or Perfetto, relative to each profile's folder.", "note")]
    for profile in profiles:
        parts += [heading(titled(profile.run)), rows_table(_FRAMEWORK, profile.run.rows, ("batch_size", "status"))]
    return Section("framework-profiles", title, "".join(parts))


# --- variability, comparisons, models, training ---------------------------------------------------------------


def variability_section(data: ReportData) -> Section:
    title = "Variability across GPUs"
    if not data.variability:
        return absent("variability", title, "No variability folder (variability.json) in the folders given.")
    parts = []
    for study in data.variability:
        parts += [heading(f"{study.path.name}: each GPU's median over its repetitions"),
                  paragraph(f"vs_median_pct: against the median GPU at that batch size; outlier: slower than it by "
                            f"more than {study.threshold * 100:g} %.", "note"),
                  frame_table(study.gpus, list(study.gpus["outlier"].astype(bool))),
                  left_out_note([f"{row['run']} batch {row['batch_size']}: {row['error']}"
                                 for row in study.runs.to_dict("records") if is_invalid(row)],
                                "invalid result{s}", "the medians, the comparison with the median GPU and the spread"),
                  heading("spread per batch size (over the GPUs' medians, and over every repetition)"),
                  frame_table(study.across)]
    return Section("variability", title, "".join(parts))


_MODEL = ("label", "metric", "function", "smape", "adjusted_r2", "rss", "relative_error", "values")


def _model_predictions(model: dict[str, Any]) -> str:
    items = [f"at {_point(p.get('at'))}: {cell_text(p.get('value'))}"
             + (" (extrapolated)" if p.get("extrapolated") else "") for p in model.get("predictions") or []]
    items += [f"left out {_point(c.get('at'))}: measured {cell_text(c.get('measured'))}, predicted "
              f"{cell_text(c.get('predicted'))}" for c in model.get("checks") or []]
    return "; ".join(items)


def _point(at: Any) -> str:
    if not isinstance(at, dict):
        return str(at)
    return ", ".join(f"{name}={cell_text(value)}" for name, value in at.items())


def _model_part(found: ModelFile) -> str:
    models = [model for index, model in enumerate(found.content.get("models") or []) if index not in found.invalid]
    rows = [[*(model.get(name) for name in _MODEL), _model_predictions(model), model.get("warnings") or None]
            for model in models]
    parts = [heading(found.path.name), table([*_MODEL, "predictions and checks", "warnings"], rows),
             left_out_note([found.invalid[index] for index in sorted(found.invalid)], "model{s}", "the table")]
    if (found.path / MODEL_PLOT).is_file():
        parts.append(image(found.path / MODEL_PLOT))
    return "".join(parts)


def models_section(data: ReportData) -> Section:
    title = "Performance models"
    if not data.models:
        return absent("models", title, "No performance model (trainbench model's model.json) in the folders given.")
    note = paragraph("Fitted by Extra-P: smape (symmetric mean absolute percentage error, %), adjusted_r2 and rss "
                     "of the fit; values: the measurements it stands on; an extrapolated prediction lies outside "
                     "the measured range.", "note")
    return Section("models", title, note + "".join(map(_model_part, data.models)))


_CURVES = ("epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "train_images_per_sec", "train_s",
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
    for axes, names, ylabel in ((loss, ("train_loss", "eval_loss"), "loss"),
                                (accuracy, ("eval_top1", "eval_top5"), "accuracy (fraction)")):
        for name in names:
            axes.plot(x, [_drawable(row.get(name)) for row in epochs], marker="o", label=name)
        axes.set_xlabel("epoch")
        axes.set_ylabel(ylabel)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
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


# --- what the page was made from ------------------------------------------------------------------------------


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


SECTIONS: tuple[Callable[[ReportData], Section], ...] = (
    headline_section,
    environment_section, throughput_section, failures_section, invalid_section, input_section, campaigns_section,
    telemetry_section,
    coreutil_section, timeline_section, framework_profiles_section, variability_section, comparisons_section,
    models_section, training_section)
