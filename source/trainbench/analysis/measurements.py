"""Measurements for performance models: every timed window, repetition or profiled step as its own value.

A tidy table, one row per value: ``config`` (what was measured, apart from the model's parameters: framework,
precision, device, data, step settings), ``region`` (``train step`` for throughput runs; ``step (GPU)`` and
``kernel <name>`` for Nsight Systems profiles), the parameters ``batch_size`` (per GPU), ``gpus`` (processes that
measured together) and ``image_size``, ``metric``, ``value`` and ``source`` (the summary file it came from).

Read through the results model only (``summary.json`` of throughput runs, ``profile.json`` and the per-batch
``.timeline.json`` of nsys profiles), from run folders, folders of runs and campaigns alike: every such file under
the folders given, except those of unfinished campaign runs (``_inprogress``, ``_abandoned-``, ``_refused``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.errors import UsageError
from trainbench.results.files import in_unfinished_run
from trainbench.results.records import BatchResult, RunSummary
from trainbench.results.store import read_summary

PARAMETERS: tuple[str, ...] = ("batch_size", "gpus", "image_size")
# metric -> its unit, for tables and plots; step_time and images_per_sec are per timed window
METRICS: dict[str, str] = {
    "step_time": "s",  # images per step / the window's images/s: all GPUs' images, so the step's wall time
    "images_per_sec": "images/s",
    "joules_per_image": "J",  # GPU energy over all windows of the batch size: one value per run
    "mean_power_w": "W",
    "gpu_time": "s",  # nsys: GPU busy time per step (step ranges) or per step of one kernel
}
COLUMNS = ("config", "region", *PARAMETERS, "metric", "value", "source")
TRAIN_STEP, GPU_STEP, KERNEL_PREFIX = "train step", "step (GPU)", "kernel "
TOP_KERNELS = 5  # kernels modelled per profile: the ones with the most GPU time over all its batch sizes

def summary_files(folders: list[Path]) -> list[Path]:
    """Every throughput summary.json and nsys profile.json under the folders (a folder may be a run itself)."""
    found: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            what = "a file" if folder.exists() else "no such folder"
            raise UsageError(f"{folder}: not a folder of runs ({what})")
        for name in ("summary.json", "profile.json"):
            found.extend(path for path in sorted(folder.rglob(name)) if not in_unfinished_run(path, folder))
    return sorted(set(found))


def config_label(header: dict[str, Any]) -> str:
    """What a run measured apart from the parameters: "torch fp32 cpu synthetic" plus its step settings."""
    model = header.get("model") or {}
    parts = [str(header.get(key, model.get(key, "?"))) for key in ("framework", "precision", "device")]
    data = header.get("data")
    parts.append("synthetic" if data in (None, "synthetic") else f"data={Path(str(data)).name}")
    if model.get("compile"):
        parts.append(f"compile={model.get('compile_mode', 'default')}")
    parts.extend(flag.replace("_", "-") for flag in ("xla", "cuda_graph", "channels_last") if model.get(flag))
    if header.get("profiler"):
        parts.append(f"under {header['profiler']}")
    return " ".join(parts)


def _gpus(header: dict[str, Any], result: BatchResult) -> int:
    world = result.values.get("world_size")
    if isinstance(world, int) and world > 0:
        return world
    launch = header.get("launch") or {}
    return int(launch.get("processes_per_node", 1)) * int(launch.get("nodes", 1))


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _throughput_values(result: BatchResult, gpus: int) -> Iterator[tuple[str, str, float]]:
    """(region, metric, value): each window's step time and images/s, and the run's energy figures."""
    windows = result.values.get("window_images_per_sec") or [result.values.get("images_per_sec")]
    for rate in map(_number, windows):
        if rate:
            yield TRAIN_STEP, "images_per_sec", rate
            yield TRAIN_STEP, "step_time", result.batch_size * gpus / rate
    for metric in ("joules_per_image", "mean_power_w"):
        if (value := _number(result.values.get(metric))) is not None:
            yield TRAIN_STEP, metric, value


def _timeline_values(path: Path, result: BatchResult) -> Iterator[tuple[str, str, float]]:
    """nsys: each step's GPU busy time, and per kernel name its GPU time per step (one value per batch size)."""
    timeline = path.parent / f"batch_{result.batch_size}.timeline.json"
    try:
        summary = json.loads(timeline.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the profile row names why its timeline is missing; nothing to model from it
    step_ms = summary.get("step_gpu_ms") or []
    for milliseconds in map(_number, step_ms):
        if milliseconds is not None:
            yield GPU_STEP, "gpu_time", milliseconds / 1e3
    for kernel in summary.get("top_kernels") or []:
        if step_ms and (total := _number(kernel.get("total_ns"))) is not None:
            yield f"{KERNEL_PREFIX}{kernel.get('name')}", "gpu_time", total / 1e9 / len(step_ms)


def _rows(path: Path, summary: RunSummary) -> Iterator[dict[str, Any]]:
    header = summary.header
    label = config_label(header)
    image_size = header.get("image_size") or (header.get("model") or {}).get("image_size")
    for result in summary.ok_results():
        gpus = _gpus(header, result)
        values = (_timeline_values(path, result) if path.name == "profile.json"
                  else _throughput_values(result, gpus))
        for region, metric, value in values:
            yield {"config": label, "region": region, "batch_size": result.batch_size, "gpus": gpus,
                   "image_size": image_size, "metric": metric, "value": value, "source": str(path)}


def _top_kernels_only(table: pd.DataFrame) -> pd.DataFrame:
    """Keep the TOP_KERNELS kernel regions with the most GPU time in each config (cuDNN picks other kernels at
    other batch sizes: a kernel seen at few points cannot be modelled)."""
    is_kernel = table["region"].str.startswith(KERNEL_PREFIX)
    kernels = table[is_kernel]
    totals = kernels.groupby(["config", "region"])["value"].sum().reset_index()
    top = totals.sort_values("value", ascending=False).groupby("config").head(TOP_KERNELS)
    keep = set(zip(top["config"], top["region"], strict=True))
    chosen = [(config, region) in keep for config, region in zip(kernels["config"], kernels["region"], strict=True)]
    return pd.concat([table[~is_kernel], kernels[chosen]], ignore_index=True)


def gather(folders: list[Path]) -> pd.DataFrame:
    """The measurements under the folders as a tidy table (``COLUMNS``); a folder with none is a UsageError."""
    files = summary_files(folders)
    rows = [row for path in files for row in _rows(path, read_summary(path, "throughput run or profile"))]
    if not rows:
        where = ", ".join(str(folder) for folder in folders)
        raise UsageError(f"{where}: no measured batch size found (no summary.json or nsys profile.json with an ok "
                         "result)")
    return _top_kernels_only(pd.DataFrame(rows, columns=list(COLUMNS)))
