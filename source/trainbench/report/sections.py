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
from trainbench.report.page import Section, cell_text, figure_image, heading, image, paragraph, table
from trainbench.report.plot import batch_size_figure, drawn_lines
from trainbench.report.ranking_sections import comparisons_section, headline_section
from trainbench.report.readable import (
    VERDICT_RULE,
    header,
    percent_error,
    short_numbers,
    shown,
    verdict,
    with_trust,
)
from trainbench.report.telemetry_plot import telemetry_figure
from trainbench.results import fields
from trainbench.results.header import WORKLOAD, RunHeader, Timing
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
    parts: list[str | None] = [] if header.workload == WORKLOAD else [workload_title(header.workload)]
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
        "CPU": env.get("cpu_class") or env.get("cpu_model"),  # older runs recorded the model name only
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
    """Each environment's first folder (named apart from the others') and how many more share it (the "runs" row
    names them all)."""
    names = short_names([environment.folders[0] for environment in environments])
    return [names[environment.folders[0]] + (f" and {len(environment.folders) - 1} more"
                                             if len(environment.folders) > 1 else "") for environment in environments]


_PER_RUN = ("command", "time (UTC)")  # what each run of one environment has of its own


def _environment_column(environment: Environment, names: dict[Path, str]) -> dict[str, Any]:
    """One environment's values: every run it holds by name, and a run's own command and time where the runs
    differ in them (each run's, named), rather than the first run's standing for all."""
    column = {"runs": ", ".join(names[folder] for folder in environment.folders),
              **_environment_fields(environment.env)}
    own = [_environment_fields(env) for env in environment.envs] or [column]
    for name in _PER_RUN:
        values = [each.get(name) for each in own]
        if len(set(map(str, values))) > 1:
            column[name] = "; ".join(f"{names[folder]}: {_text_or_none(value) or '-'}"
                                    for folder, value in zip(environment.folders, values, strict=True))
    return column


def environment_section(data: ReportData) -> Section:
    title = "Environment"
    if not data.environments:
        return absent("environment", title, "No env.json in the folders given: the runs' machine is unknown.")
    names = short_names([folder for environment in data.environments for folder in environment.folders])
    fields = [_environment_column(environment, names) for environment in data.environments]
    rows_of = list(dict.fromkeys(name for each in fields for name in each))
    # as text (left-aligned like the rest of the column); a row empty in every column is left out
    rows = [[name, *(_text_or_none(each.get(name)) for each in fields)] for name in rows_of]
    rows = [row for row in rows if any(value is not None for value in row[1:])]
    parts = [paragraph("As each run recorded it before measuring (env.json); runs on the same machine and software "
                       "share a column (versions compared in any notation: cuDNN 90100 is 9.1.0); runs: every run "
                       "the column holds; a command or time that differs between them is given per run.", "note"),
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


_TRUST = ("checks",)  # the page's own column: the trust flags (readable.with_trust)


def shape_of(run: RunRecord) -> str:
    """What one sample is the size of: "224 px", "seq_len 128", or "" (a rate depends on it as much as on the
    framework: runs of different shapes never share a figure's axis)."""
    header = RunHeader.read(run.header)
    if header.image_size:
        return f"{header.image_size} px"
    seq_len = (header.params or {}).get("seq_len")
    return f"seq_len {seq_len}" if seq_len else ""


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
    parts = [paragraph("samples/s: all timed samples / all timed wall time (warm-up excluded), the rate each figure "
                       "draws; the median, min and max of the windows' own samples/s (--windows) show the spread, "
                       "and so do CV (%: the windows' standard deviation / mean x 100) and spread (%: (fastest - "
                       "slowest) / median x 100); checks: windows shorter than 5 s or more than 10 % apart. Step "
                       "times are in milliseconds, over every timed step. One figure per workload and image size or "
                       "sequence length. Failed batch sizes are shaded, with their reasons under Failed batch sizes; "
                       "an invalid result (a rate or time that is no measurement) is shaded too and left out of the "
                       "figure; its run is not compared.", "note"),
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
                 "repetitions": None if _missing(row["ok"]) else int(row["ok"]),
                 **{name: None if _missing(row[name]) else row[name] for name in
                    ("samples_per_sec_median", "samples_per_sec_min", "samples_per_sec_max")}}
        lines.setdefault(str(row["config"]), ([], "samples_per_sec_median"))[0].append(point)
    return lines


def campaign_part(campaign: Campaign) -> str:
    summary = campaign.summary
    runs = campaign.table["run_folder"].nunique() if "run_folder" in campaign.table else 0
    parts = [heading(f"campaign {campaign.path.name}"),
             paragraph(f"{runs} finished run folders; one row per configuration and batch size over its "
                       "repetitions (ok of runs); spread (%) = (max - min) / median x 100; CV (%) = standard "
                       "deviation / mean x 100 over the repetitions.", "note")]
    if summary["scaling_efficiency"].notna().any():
        parts.append(paragraph("scaling efficiency: the median samples/s with N processes / (N x the same "
                               "configuration's median with 1 process).", "note"))
    else:
        summary = summary.drop(columns="scaling_efficiency")
        parts.append(paragraph("No scaling efficiency: the matrix has no gpus axis with 1 and more processes.",
                               "note"))
    parts.append(words_table(summary, [not ok for ok in summary["ok"].fillna(0)]))
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


def _config_workloads(table: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """Each configuration's workload, sample unit and sample shape ("64 px", "seq_len 128" where the matrix varies
    it, else ""), as its runs recorded them (results.csv's columns)."""
    known = table.dropna(subset=["workload"]).drop_duplicates("config")
    shapes = [(name, "{} px" if name == "image_size" else "seq_len {}") for name in ("image_size", "seq_len")
              if name in known.columns]
    found = {}
    for row in known.to_dict("records"):
        shape = next((text.format(_whole_text(row[name])) for name, text in shapes if not _missing(row[name])), "")
        unit = row["sample_unit"]
        found[str(row["config"])] = (str(row["workload"]), "sample" if _missing(unit) else str(unit), shape)
    return found


def _whole_text(value: Any) -> str:
    """64.0 (a column pandas made float) as "64"."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _by_workload(lines: dict[str, Any], workload_of: dict[str, tuple[str, str, str]]
                 ) -> dict[tuple[str, str, str], list[str]]:
    """The figure's configurations grouped by (workload, sample unit, shape), in the order first seen: a figure
    each (a 64 px image is not a 224 px one)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for config in lines:
        groups.setdefault(workload_of.get(config, (_UNKNOWN, "sample", "")), []).append(config)
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


def _campaign_workload_part(campaign: Campaign, workload: tuple[str, str, str],
                            lines: dict[str, tuple[list[dict[str, Any]], str]]) -> str:
    """One workload's (and shape's) figure in its own unit ("sequences/s"), and what its samples cost (tokens/s,
    FLOPs, MFU)."""
    name, sample_unit, shape = workload
    title, unit = workload_title(name) if name != _UNKNOWN else "unknown workload", per_second(sample_unit)
    title += f", {shape}" if shape else ""
    parts = [heading(f"{title}: {unit}"),
             paragraph(f"samples are {sample_unit}s: samples/s is in {unit}; tokens/s: samples/s x the tokens one "
                       "sample holds, for sequence workloads only; TFLOP/s: samples/s x the training FLOP per sample; "
                       "MFU (%): achieved / the GPUs' dense peak x 100 (empty on the CPU or an unknown GPU).",
                       "note")]
    work = _work_rows(campaign, list(lines))
    if any(row.get(key) is not None for row in work for key in _WORK):
        parts.append(rows_table(("config", "batch_size", *_WORK), work, ("config", "batch_size")))
    bars = any((point.get("repetitions") or 0) >= 2 for points, _ in lines.values() for point in points)
    statistic = f"median {unit} over repetitions" + ("; bars: slowest to fastest repetition" if bars else "")
    parts += [capped_note(len(lines), "configurations", "the table above"), figure_image(
        partial(batch_size_figure, lines, f"campaign {campaign.path.name}: {title}: {statistic}",
                f"median {unit} over repetitions",
                spread=("samples_per_sec_min", "samples_per_sec_max") if bars else None, width=FIGURE_WIDTH,
                sample_unit=sample_unit),
        f"campaign {unit} against batch size{f' ({shape})' if shape else ''}")]
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
        top = kernels.head(TOP_KERNELS)
        parts.append(heading(f"batch {batch}: top {len(top)} of {len(kernels)} kernels"))
        parts.append(words_table(describe(top) if describe else top))
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
        ["batch size", "steps", "min (ms)", "median (ms)", "max (ms)", "each step (ms)"], rows)


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
                  words_table(study.gpus, list(study.gpus["outlier"].astype(bool))),
                  left_out_note([f"{row['run']} batch {row['batch_size']}: {row['error']}"
                                 for row in study.runs.to_dict("records") if is_invalid(row)],
                                "invalid result{s}", "the medians, the comparison with the median GPU and the spread"),
                  heading("spread per batch size (over the GPUs' medians, and over every repetition)"),
                  words_table(study.across)]
    return Section("variability", title, "".join(parts))


_MODEL = ("label", "metric", "function", "verdict", "smape", "adjusted_r2", "rss", "values")
_SECONDS_METRICS = ("step_time", "gpu_time")  # the metrics model.json fits that are no result field


def metric_unit(metric: Any) -> str:
    """A modelled metric's unit: its field's (``results.fields``), seconds for the step and GPU times."""
    if metric in _SECONDS_METRICS:
        return "s"
    found = fields.BY_NAME.get(str(metric))
    return found.unit if found is not None and found.unit != "fraction" else ""


def _model_predictions(model: dict[str, Any]) -> str:
    unit = metric_unit(model.get("metric"))
    items = [f"at {_point(p.get('at'))}: {cell_text(p.get('value'))} {unit}".rstrip()
             + (f" (extrapolated: {', '.join(map(str, p['extrapolated']))})" if p.get("extrapolated") else "")
             for p in model.get("predictions") or []]
    return "; ".join(items)


def _model_checks(model: dict[str, Any]) -> str:
    """Each left-out point: measured, predicted (with the unit), the error in % and whether it was extrapolated."""
    unit = f" {metric_unit(model.get('metric'))}".rstrip()
    items = []
    for check in model.get("checks") or []:
        error = percent_error(check.get("relative_error"))
        items.append(f"left out {_point(check.get('at'))}: measured {cell_text(check.get('measured'))}{unit}, "
                     f"predicted {cell_text(check.get('predicted'))}{unit}" + (f", error {error}" if error else "")
                     + (" (extrapolated)" if check.get("extrapolated") else ""))
    return "; ".join(items)


def _model_runs(model: dict[str, Any]) -> str:
    """What the model was fitted on: its configuration and the settings of its runs (model.json's record)."""
    settings = model.get("run_settings") if isinstance(model.get("run_settings"), dict) else {}
    facts = [f"config {model['config']}" if model.get("config") else "",
             ", ".join(f"{name}={value}" for name, value in (settings or model.get("settings") or {}).items())]
    return "; ".join(fact for fact in facts if fact)


def _model_row(model: dict[str, Any]) -> list[Any]:
    values = {**model, "function": short_numbers(str(model.get("function") or "")),
              "verdict": verdict(model.get("smape"), model.get("adjusted_r2")),
              "metric": f"{model.get('metric')} ({unit})" if (unit := metric_unit(model.get("metric"))) else
              model.get("metric")}
    return [*(values.get(name) for name in _MODEL), _model_predictions(model) or None, _model_checks(model) or None,
            _model_runs(model) or None, model.get("warnings") or None]


def _point(at: Any) -> str:
    if not isinstance(at, dict):
        return str(at)
    return ", ".join(f"{name}={cell_text(value)}" for name, value in at.items())


def _model_part(found: ModelFile) -> str:
    models = [model for index, model in enumerate(found.content.get("models") or []) if index not in found.invalid]
    rows = [_model_row(model) for model in models]
    sources = found.content.get("sources")
    parts = [heading(found.path.name)]
    if isinstance(sources, list) and sources:
        parts.append(paragraph(f"Fitted on the runs under: {', '.join(map(str, sources))}.", "note"))
    parts += [table([*map(header, _MODEL), "predictions", "left-out checks", "runs", "warnings"], rows),
              left_out_note([found.invalid[index] for index in sorted(found.invalid)], "model{s}", "the table")]
    if (found.path / MODEL_PLOT).is_file():
        parts.append(image(found.path / MODEL_PLOT))
    return "".join(parts)


def models_section(data: ReportData) -> Section:
    title = "Performance models"
    if not data.models:
        return absent("models", title, "No performance model (trainbench model's model.json) in the folders given.")
    note = paragraph("Fitted by Extra-P; numbers in functions to 4 significant digits. SMAPE: symmetric mean "
                     f"absolute percentage error of the fit (%); verdict: {VERDICT_RULE}. values: the measurements it "
                     "stands on; an extrapolated prediction or check lies outside the measured range; a left-out "
                     "check's error is (predicted - measured) / measured.", "note")
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
