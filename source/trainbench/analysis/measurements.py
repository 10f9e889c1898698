"""Measurements for performance models: every timed window, repetition or profiled step as its own value.

A tidy table, one row per value: ``config`` (what was measured, apart from the model's parameters: framework,
precision, device, data, step settings, in short), ``settings`` (every setting of the run that is not a parameter,
as JSON: ``run_settings``), ``region`` (``train step`` for throughput runs; ``step (GPU)`` and
``kernel <name>`` for Nsight Systems profiles), the parameters ``batch_size`` (per GPU), ``gpus`` (processes that
measured together), ``image_size`` and ``seq_len`` (the sequence workloads': Extra-P models over it where runs vary
it; None for a workload without one), ``metric``, ``value`` and ``source`` (the summary file it came from).

Read through the results model only (``summary.json`` of throughput runs, ``profile.json`` and the per-batch
``.timeline.json`` of nsys profiles), from run folders, folders of runs and campaigns alike: every such file under
the folders given, except those of unfinished campaign runs (``_inprogress``, ``_abandoned-``, ``_refused``).
A result whose values are no measurement (``invalid`` as the results model reads it, a rate of 0, a GPU time or a
GPU count that is not a finite non-negative number) is left out, and named: ``Gathered.left_out``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.errors import UsageError
from trainbench.results import fields
from trainbench.results.header import WORKLOAD, RunHeader
from trainbench.results.layout import ENV, NSYS_TIMELINE, PROFILE, SUMMARY, batch_file, in_unfinished_run
from trainbench.results.records import BatchResult, RunSummary, Status, is_measurement
from trainbench.results.run_settings import recorded_at, settings_as_run
from trainbench.results.store import read_summary
from trainbench.workloads.settings import MODELLED

# The model's parameters: the batch size, the processes, and the shape settings a model may fit over (declared in
# workloads.settings).
PARAMETERS: tuple[str, ...] = ("batch_size", "gpus", *MODELLED)
# metric -> its unit, for tables and plots: the step time per timed window, the result fields a model may fit
# (``results.fields``: samples_per_sec per timed window, energy and power once per batch size) and nsys' GPU time
# per step (step ranges) or per step of one kernel.
METRICS: dict[str, str] = {
    "step_time": "s",  # samples per step / the window's samples/s: all GPUs' samples, so the step's wall time
    **{f.name: f.unit for f in fields.FIELDS if f.modelled},
    "gpu_time": "s",
}
# A metric's name before results counted samples (``--metric images_per_sec`` still works).
METRIC_ALIASES: dict[str, str] = {old: new for old, new in fields.RENAMED.items() if new in METRICS}
COLUMNS = ("config", "settings", "region", *PARAMETERS, "metric", "value", "source")
TRAIN_STEP, GPU_STEP, KERNEL_PREFIX = "train step", "step (GPU)", "kernel "
TOP_KERNELS = 5  # kernels modelled per profile: the ones with the most GPU time over all its batch sizes


def summary_files(folders: list[Path]) -> list[Path]:
    """Every throughput summary.json and nsys profile.json under the folders (a folder may be a run itself)."""
    found: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            what = "a file" if folder.exists() else "no such folder"
            raise UsageError(f"{folder}: not a folder of runs ({what})")
        for name in (SUMMARY, PROFILE):
            found.extend(path for path in sorted(folder.rglob(name)) if not in_unfinished_run(path, folder))
    return sorted(set(found))


# Header fields that are no setting of what a run measured: the parameters (image_size; processes per node times
# nodes is gpus), where its processes met or its profiler wrote its trace, and how many windows took the values
# (each window is a value of its own).
# The workload's shape settings are parameters too (``params.*``), and what one sample costs follows from them.
NOT_SETTINGS = frozenset({*MODELLED, *(f"params.{name}" for name in MODELLED), "parameters",
                          "train_flops_per_sample", "flops_note", "launch.processes_per_node", "launch.nodes",
                          "launch.rdzv_endpoint", "launch.rdzv_id", "window.trace_dir", "windows"})
NOT_RECORDED = "not recorded"


def _flatten(prefix: str, value: Any, into: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, into)
    else:
        into[prefix] = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _hardware(env: Any, device: str) -> dict[str, str]:
    """The CPU model and (unless the run was on the CPU) the GPU models of the machine, from env.json."""
    if not isinstance(env, dict):
        return {}
    found: dict[str, str] = {}
    if env.get("cpu_model") is not None:
        found["CPU"] = str(env["cpu_model"])
    gpu = env.get("gpu")
    if device != "cpu" and isinstance(gpu, dict) and isinstance(gpu.get("gpus"), list):
        found["GPU"] = ", ".join(sorted({str(g.get("name")) for g in gpu["gpus"] if isinstance(g, dict)})) or "none"
    return found


def run_settings(header: dict[str, Any], env: Any = None) -> dict[str, str]:
    """Every setting of a run that is not a model parameter, flat (``launch.torchrun``, ``num_classes``, ...), its
    value as text: the summary's header (the model's fields at the top level) and the machine's CPU and GPU models
    from its env.json. Runs that differ in any of them measured different things."""
    model = header.get("model")
    flat: dict[str, str] = {}
    _flatten("", {**(model if isinstance(model, dict) else {}), **{k: v for k, v in header.items() if k != "model"}},
             flat)
    settings = {key: value for key, value in flat.items() if key not in NOT_SETTINGS}
    settings.update(_hardware(env, settings.get("device", "")))
    return dict(sorted(settings.items()))


def config_label(header: dict[str, Any]) -> str:
    """What a run measured apart from the parameters: "torch fp32 cpu synthetic" plus its step settings."""
    run = RunHeader.read(header)
    model = run.model
    parts = [] if run.workload == WORKLOAD else [run.workload]  # runs of ResNet-50 keep their labels
    parts += ["tiny"] if run.size == "tiny" else []
    parts += [str("?" if value is None else value) for value in (run.framework, run.precision, run.device)]
    parts.append("synthetic" if run.data in (None, "synthetic") else f"data={Path(str(run.data)).name}")
    if model.get("compile"):
        parts.append(f"compile={model.get('compile_mode', 'default')}")
    parts.extend(flag.replace("_", "-") for flag in ("xla", "cuda_graph", "channels_last") if model.get(flag))
    if run.profiling is not None:
        parts.append(f"under {run.profiling.profiler}")
    return " ".join(parts)


class _LeftOut(Exception):
    """A result whose values cannot be modelled: the field and its value; ``file`` when not the summary itself."""

    def __init__(self, problem: str, file: Path | None = None) -> None:
        super().__init__(problem)
        self.file = file


def _finite(value: Any, where: str, positive: bool = False) -> float:
    if value is None or not is_measurement(value) or (positive and value == 0):
        raise _LeftOut(f"{where} is {value!r}, not a finite {'positive' if positive else 'non-negative'} number")
    return float(value)


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _LeftOut(f"{where} is {value!r}, not a positive whole number")
    return value


def _gpus(header: dict[str, Any], result: BatchResult, where: str) -> int:
    if result.values.get("world_size") is not None:  # None: not recorded (a single-process run)
        return _whole(result.values["world_size"], f"{where}.world_size")
    launch = header.get("launch") or {}
    if not isinstance(launch, dict):
        raise _LeftOut(f"launch is {launch!r}, not an object")
    return _whole(launch.get("processes_per_node", 1), "launch.processes_per_node") * \
        _whole(launch.get("nodes", 1), "launch.nodes")


def _shape_parameters(header: dict[str, Any]) -> dict[str, int | None]:
    """The shape settings a model fits over, as run (``results.run_settings.settings_as_run``); None for a workload
    without one (a sequence length on ResNet-50)."""
    found = settings_as_run(header)
    return {name: None if found[name] is None else _whole(found[name], recorded_at(name)) for name in MODELLED}


def _throughput_values(result: BatchResult, gpus: int, where: str) -> Iterator[tuple[str, str, float]]:
    """(region, metric, value): each window's step time and images/s, and the run's energy figures."""
    windows = result.values.get(fields.WINDOW_SAMPLES_PER_SEC)
    field_name = fields.WINDOW_SAMPLES_PER_SEC if windows else fields.SAMPLES_PER_SEC
    for index, rate in enumerate(windows or [result.values.get(fields.SAMPLES_PER_SEC)]):
        # read_summary let only finite non-negative rates through; 0 images/s is no step time either
        rate = _finite(rate, f"{where}.{field_name}" + (f"[{index}]" if windows else ""), positive=True)
        yield TRAIN_STEP, fields.SAMPLES_PER_SEC, rate
        yield TRAIN_STEP, "step_time", result.batch_size * gpus / rate
    for metric in (f.name for f in fields.FIELDS if f.modelled and f.name != fields.SAMPLES_PER_SEC):
        if (value := result.values.get(metric)) is not None:
            yield TRAIN_STEP, metric, _finite(value, f"{where}.{metric}")


def _timeline_values(path: Path, result: BatchResult) -> list[tuple[str, str, float]]:
    """nsys: each step's GPU busy time, and per kernel name its GPU time per step (one value per batch size)."""
    timeline = batch_file(path.parent, result.batch_size, NSYS_TIMELINE)
    try:
        summary = json.loads(timeline.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _LeftOut(f"no GPU times to model ({type(error).__name__})", timeline) from None
    try:
        return list(_gpu_times(summary))
    except _LeftOut as problem:
        raise _LeftOut(str(problem), timeline) from None


def _gpu_times(summary: Any) -> Iterator[tuple[str, str, float]]:
    step_ms = summary.get("step_gpu_ms") if isinstance(summary, dict) else None
    kernels = (summary.get("top_kernels") or []) if isinstance(summary, dict) else None
    if not isinstance(step_ms, list) or not step_ms or not isinstance(kernels, list):
        raise _LeftOut("step_gpu_ms is no list of step times, or top_kernels no list")
    for index, milliseconds in enumerate(step_ms):
        yield GPU_STEP, "gpu_time", _finite(milliseconds, f"step_gpu_ms[{index}]") / 1e3
    for index, kernel in enumerate(kernels):
        total = _finite(kernel.get("total_ns") if isinstance(kernel, dict) else kernel,
                        f"top_kernels[{index}].total_ns")
        yield f"{KERNEL_PREFIX}{kernel.get('name')}", "gpu_time", total / 1e9 / len(step_ms)


@dataclass
class Gathered:
    """The measurements (``COLUMNS``) and, for each result left out, why (its file and field)."""

    table: pd.DataFrame
    left_out: list[str] = field(default_factory=list)

    def left_out_line(self) -> str:
        """"2 results left out (no measurement): the first, FILE: results[0].samples_per_sec is nan, ..."; "" if
        none."""
        if not self.left_out:
            return ""
        count = len(self.left_out)
        first = "" if count == 1 else "the first, "
        return f"{count} result{'s' * (count > 1)} left out (no measurement): {first}{self.left_out[0]}"


def _env(path: Path) -> Any:
    try:
        return json.loads((path.parent / ENV).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # a run copied without it: its CPU and GPU count as not recorded


def _rows(path: Path, summary: RunSummary, left_out: list[str]) -> Iterator[dict[str, Any]]:
    header = summary.header
    label = config_label(header)
    settings = json.dumps(run_settings(header, _env(path)))
    for index, result in enumerate(summary.results):
        if result.status is Status.INVALID:
            left_out.append(str(result.error))
        if not result.ok:
            continue
        where = f"results[{index}]"
        try:
            gpus, shapes = _gpus(header, result, where), _shape_parameters(header)
            values = (_timeline_values(path, result) if path.name == PROFILE
                      else list(_throughput_values(result, gpus, where)))
        except _LeftOut as problem:
            left_out.append(f"{problem.file or path}: {problem}")
            continue
        for region, metric, value in values:
            yield {"config": label, "settings": settings, "region": region, "batch_size": result.batch_size,
                   "gpus": gpus, **shapes, "metric": metric, "value": value,
                   "source": str(path)}


def _top_kernels_only(table: pd.DataFrame) -> pd.DataFrame:
    """Keep the TOP_KERNELS kernel regions with the most GPU time in each config (cuDNN picks other kernels at
    other batch sizes: a kernel seen at few points cannot be modelled)."""
    is_kernel = table["region"].str.startswith(KERNEL_PREFIX)
    kernels = table[is_kernel]
    totals = kernels.groupby(["config", "settings", "region"])["value"].sum().reset_index()
    top = totals.sort_values("value", ascending=False).groupby(["config", "settings"]).head(TOP_KERNELS)
    keep = set(zip(top["config"], top["settings"], top["region"], strict=True))
    chosen = [key in keep for key in zip(kernels["config"], kernels["settings"], kernels["region"], strict=True)]
    return pd.concat([table[~is_kernel], kernels[chosen]], ignore_index=True)


def collect(folders: list[Path]) -> Gathered:
    """The measurements under the folders and the results left out; a folder with none is a UsageError."""
    files = summary_files(folders)
    left_out: list[str] = []
    rows = [row for path in files for row in _rows(path, read_summary(path, "throughput run or profile"), left_out)]
    gathered = Gathered(pd.DataFrame(rows, columns=list(COLUMNS)), left_out)
    if not rows:
        where = ", ".join(str(folder) for folder in folders)
        also = f"; {gathered.left_out_line()}" if left_out else ""
        raise UsageError(f"{where}: no measured batch size found (no summary.json or nsys profile.json with an ok "
                         f"result){also}")
    gathered.table = _top_kernels_only(gathered.table)
    return gathered


def gather(folders: list[Path]) -> pd.DataFrame:
    """The measurements under the folders as a tidy table (``COLUMNS``), without the record of what was left out."""
    return collect(folders).table
