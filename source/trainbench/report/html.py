"""One self-contained HTML page of everything measured: tables of numbers and the pictures, nothing fetched.

The page is built from plain data (``ReportData``: result rows, DataFrames, PNG paths) that ``cli/report_cmd.py``
gathers through the results model; every section is present when there is data for it and otherwise says in one
line why it is absent. Every value is HTML-escaped; images are embedded as ``data:`` URIs and the style is inline,
so the file renders the same offline and can be sent as it is.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1300px;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #aaa;padding-bottom:.2em;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:right}th{background:#eee}td.text{text-align:left}p.absent{color:#777;font-style:italic}
tr.failed td{background:#fde2e2}img{max-width:min(100%,900px);border:1px solid #ddd;margin:.3em 0}
nav a{margin-right:1em}code{background:#f4f4f4;padding:0 .2em}"""


@dataclass(frozen=True)
class Run:
    """A throughput run: its folder, settings (summary header), result rows and pictures."""

    path: Path
    header: dict[str, Any]
    rows: list[dict[str, Any]]
    pictures: list[Path] = field(default_factory=list)


@dataclass
class ReportData:
    """Everything found under the folders; an empty field is a section that explains its absence."""

    sources: list[str]
    environment: dict[str, Any] | None = None
    runs: list[Run] = field(default_factory=list)
    profiles: list[Run] = field(default_factory=list)
    campaigns: list[tuple[Path, pd.DataFrame]] = field(default_factory=list)  # campaign summary tables
    variability: list[tuple[Path, pd.DataFrame]] = field(default_factory=list)  # per-GPU tables
    comparisons: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    comparison_note: str | None = None
    models: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)  # model.json contents
    trainings: list[tuple[Path, list[dict[str, Any]]]] = field(default_factory=list)  # metrics.jsonl rows


# --- building blocks ------------------------------------------------------------------------------------------


def cell(value: Any) -> str:
    """A value as table text: numbers to 4 significant digits, None and NaN empty, everything escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], failed: Sequence[bool] = ()) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in header)
    lines = []
    for index, row in enumerate(rows):
        marked = ' class="failed"' if index < len(failed) and failed[index] else ""
        cells = "".join(f'<td{" class=text" if isinstance(v, str) else ""}>{cell(v)}</td>' for v in row)
        lines.append(f"<tr{marked}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def frame_table(frame: pd.DataFrame) -> str:
    return table(list(map(str, frame.columns)), frame.astype(object).itertuples(index=False, name=None))


def image(path: Path) -> str:
    """A PNG embedded in the page."""
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{encoded}">'


def figure_image(figure: Any) -> str:
    """A matplotlib Figure embedded in the page."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode("ascii")}">'


def paragraph(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    body: str | None  # None: absent
    absent: str  # why, when absent

    def render(self) -> str:
        content = self.body if self.body is not None else f'<p class="absent">{html.escape(self.absent)}</p>'
        return f'<h2 id="{self.key}">{html.escape(self.title)}</h2>{content}'


def page(title: str, sources: Sequence[str], sections: Sequence[Section]) -> str:
    links = " ".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in sections)
    listed = ", ".join(f"<code>{html.escape(source)}</code>" for source in sources)
    body = "".join(section.render() for section in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1><p>From {listed}.</p>"
            f"<nav>{links}</nav>{body}</body></html>")


# --- sections -------------------------------------------------------------------------------------------------


def run_label(run: Run) -> str:
    header = run.header
    model = header.get("model") or {}
    data = header.get("data") or "synthetic"
    parts = [header.get("framework") or model.get("framework"), header.get("precision") or model.get("precision"),
             header.get("device") or model.get("device"), data if data == "synthetic" else f"data {Path(data).name}"]
    if header.get("profiler"):
        parts.insert(0, f"{header['profiler']} profile")
    return " ".join(str(part) for part in parts if part) + f" ({run.path.name})"


def environment_section(data: ReportData) -> Section:
    env = data.environment
    if not env:
        return Section("environment", "Environment", None, "No env.json in the folders given.")
    gpu = env.get("gpu") or {}
    rows = [("command", " ".join(map(str, env.get("command") or []))), ("time (UTC)", env.get("time_utc")),
            ("suite", f"{env.get('trainbench_version')} ({env.get('suite_commit')})"),
            ("host", env.get("hostname")), ("platform", env.get("platform")), ("python", env.get("python")),
            ("CPU", env.get("cpu_model")), ("CPU cores", env.get("cpu_count")),
            ("driver", gpu.get("driver_version") or gpu.get("driver")),
            *((f"GPU {i}", f"{g.get('name')} (SM clock {g.get('sm_clock_mhz')} MHz, power limit "
                           f"{g.get('power_limit_w')} W)") for i, g in enumerate(gpu.get("gpus") or [])),
            *((f"{name}", value) for name, value in (env.get("framework") or {}).items()
              if isinstance(value, str | int | float))]
    if not gpu.get("gpus"):
        rows.append(("GPU", f"none seen by NVML ({gpu.get('unavailable') or 'no GPU'})"))
    return Section("environment", "Environment", table(["", "value"], [(k, v) for k, v in rows if v is not None]),
                   "")


_THROUGHPUT = ("batch_size", "status", "images_per_sec", "images_per_sec_median", "images_per_sec_min",
               "images_per_sec_max", "windows", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
               "world_size", "input_images_per_sec", "input_bound", "compile_s")


def filled(columns: Sequence[str], rows: Sequence[dict[str, Any]], keep: Sequence[str] = ()) -> list[str]:
    """The columns that hold a value in some row (and those in ``keep``): no column of blanks."""
    return [name for name in columns if name in keep or any(row.get(name) is not None for row in rows)]


def throughput_section(data: ReportData) -> Section:
    if not data.runs:
        return Section("throughput", "Throughput against batch size", None,
                       "No throughput run (summary.json) in the folders given.")
    parts = []
    for run in data.runs:
        columns = filled(_THROUGHPUT, run.rows, keep=("batch_size", "status", "images_per_sec"))
        rows = [[row.get(name) for name in columns] for row in run.rows]
        failed = [row.get("status") != "ok" for row in run.rows]
        parts.append(f"<h3>{html.escape(run_label(run))}</h3>{table(columns, rows, failed)}")
        parts.extend(image(picture) for picture in run.pictures if picture.name == "throughput.png")
    note = paragraph("images/s: all timed images / the timed windows' wall time (warm-up excluded); median, min and "
                     "max across the timed windows; failed batch sizes in red, their reasons under Failed batch sizes.")
    return Section("throughput", "Throughput against batch size", note + "".join(parts), "")


def failures_section(data: ReportData) -> Section:
    rows = [(run_label(run), row["batch_size"], row["status"], row.get("error"))
            for run in [*data.runs, *data.profiles] for row in run.rows if row.get("status") != "ok"]
    if not rows:
        return Section("failures", "Failed batch sizes", None, "Every batch size measured ran to the end.")
    return Section("failures", "Failed batch sizes", table(["run", "batch_size", "status", "reason"], rows,
                                                           [True] * len(rows)), "")


def input_section(data: ReportData) -> Section:
    rows = [(run_label(run), row["batch_size"], row.get("images_per_sec"), row.get("input_images_per_sec"),
             row.get("input_bound")) for run in data.runs for row in run.rows
            if row.get("input_images_per_sec") is not None]
    if not rows:
        return Section("input", "Input-bound verdicts", None, "No run on real data (--data): nothing to judge.")
    intro = paragraph("input_bound: the input pipeline alone has less than 10 % headroom over the training rate.")
    return Section("input", "Input-bound verdicts", intro + table(
        ["run", "batch_size", "training images/s", "pipeline alone images/s", "input_bound"], rows), "")


def scaling_section(data: ReportData) -> Section:
    parts = []
    for path, summary in data.campaigns:
        parts.append(f"<h3>campaign {html.escape(path.name)}</h3>{frame_table(summary)}")
    if not parts:
        return Section("campaigns", "Campaigns and scaling efficiency", None, "No campaign folder given.")
    note = paragraph("scaling_efficiency: median images/s with N processes / (N x the same configuration with 1).")
    return Section("campaigns", "Campaigns and scaling efficiency", note + "".join(parts), "")


_TELEMETRY = ("batch_size", "energy_j", "joules_per_image", "images_per_joule", "mean_power_w", "sampled_power_w",
              "sm_clock_median_mhz", "temperature_max_c", "throttle_power_fraction", "throttle_thermal_fraction",
              "telemetry_note")


def telemetry_section(data: ReportData) -> Section:
    parts = []
    for run in data.runs:
        measured = [row for row in run.rows if row.get("energy_j") is not None]
        columns = filled(_TELEMETRY, measured)
        pictures = [picture for picture in run.pictures if picture.name == "telemetry.png"]
        if measured or pictures:
            rows = [[row.get(name) for name in columns] for row in measured]
            parts.append(f"<h3>{html.escape(run_label(run))}</h3>" + (table(columns, rows) if rows else ""))
            parts.extend(image(picture) for picture in pictures)
    if not parts:
        return Section("telemetry", "GPU telemetry", None,
                       "No GPU telemetry: the runs found ran on the CPU (energy is read from NVML on GPUs only).")
    return Section("telemetry", "GPU telemetry", "".join(parts), "")


def _profile_section(data: ReportData, key: str, title: str, tools: tuple[str, ...], absent: str) -> Section:
    parts = []
    for run in data.profiles:
        if run.header.get("profiler") not in tools:
            continue
        others = sorted({name for row in run.rows for name in row} - {"batch_size", "status", "error"})
        columns = filled(["batch_size", "status", *others], run.rows)
        rows = [[row.get(name) for name in columns] for row in run.rows]
        parts.append(f"<h3>{html.escape(run_label(run))}</h3>{table(columns, rows)}")
        parts.extend(image(picture) for picture in run.pictures)
    return Section(key, title, "".join(parts) if parts else None, absent)


def coreutil_section(data: ReportData) -> Section:
    return _profile_section(data, "coreutil", "Core utilization (Nsight Compute, nvprof)", ("ncu", "nvprof"),
                            "No ncu or nvprof profile (profiled_data_ncu/profile.json) in the folders given.")


def nsys_section(data: ReportData) -> Section:
    return _profile_section(data, "nsys", "GPU timeline (Nsight Systems)", ("nsys",),
                            "No nsys profile (profiled_data_nsys/profile.json) in the folders given.")


def variability_section(data: ReportData) -> Section:
    if not data.variability:
        return Section("variability", "Variability across GPUs", None, "No variability folder given.")
    body = "".join(f"<h3>{html.escape(path.name)}</h3>{frame_table(frame)}" for path, frame in data.variability)
    return Section("variability", "Variability across GPUs", body, "")


def comparison_section(data: ReportData) -> Section:
    if not data.comparisons:
        return Section("comparisons", "Comparisons", None,
                       data.comparison_note or "Fewer than two throughput runs: nothing to compare.")
    body = "".join(f"<h3>{html.escape(title)}</h3>{frame_table(frame)}" for title, frame in data.comparisons)
    return Section("comparisons", "Comparisons", body, "")


_MODEL = ("label", "metric", "function", "smape", "adjusted_r2", "rss", "values")


def models_section(data: ReportData) -> Section:
    if not data.models:
        return Section("models", "Performance models", None, "No model (trainbench model's model.json) given.")
    parts = []
    for path, saved in data.models:
        models = saved.get("models") or []
        parts.append(f"<h3>{html.escape(path.name)}</h3>" + table(
            [*_MODEL, "predictions"], [[*(model.get(name) for name in _MODEL), _predictions(model)]
                                       for model in models]))
        if (path / "model.png").is_file():
            parts.append(image(path / "model.png"))
    return Section("models", "Performance models", "".join(parts), "")


def _predictions(model: dict[str, Any]) -> str:
    items = [f"{p['at']}: {p['value']:.4g}" + (" (extrapolated)" if p.get("extrapolated") else "")
             for p in model.get("predictions") or []]
    items += [f"left out {c['at']}: measured {c['measured']:.4g}, predicted {c['predicted']:.4g}"
              for c in model.get("checks") or []]
    return "; ".join(items)


_CURVES = ("epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "train_images_per_sec")


def training_section(data: ReportData) -> Section:
    if not data.trainings:
        return Section("training", "Training curves", None, "No training run (metrics.jsonl) given.")
    parts = []
    for path, rows in data.trainings:
        epochs = [row for row in rows if "epoch" in row]
        parts.append(f"<h3>{html.escape(path.name)}</h3>" + table(_CURVES, [[r.get(n) for n in _CURVES]
                                                                            for r in epochs]))
        if epochs:
            parts.append(figure_image(_curves_figure(epochs)))
    return Section("training", "Training curves", "".join(parts), "")


def _curves_figure(epochs: list[dict[str, Any]]) -> Any:
    from matplotlib.figure import Figure  # no pyplot: files only

    figure = Figure(figsize=(10, 3.5), dpi=100)
    loss, accuracy = figure.subplots(1, 2)
    x = [row["epoch"] for row in epochs]
    for name in ("train_loss", "eval_loss"):
        loss.plot(x, [row.get(name) for row in epochs], marker="o", label=name)
    for name in ("eval_top1", "eval_top5"):
        accuracy.plot(x, [row.get(name) for row in epochs], marker="o", label=name)
    for axes, ylabel in ((loss, "loss"), (accuracy, "accuracy")):
        axes.set_xlabel("epoch")
        axes.set_ylabel(ylabel)
        axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


SECTIONS = (environment_section, throughput_section, failures_section, input_section, scaling_section,
            telemetry_section, coreutil_section, nsys_section, variability_section, comparison_section,
            models_section, training_section)


def render(data: ReportData, title: str = "trainbench report") -> str:
    return page(title, data.sources, [make(data) for make in SECTIONS])
