"""Average FMA, FP16, Tensor Core and SFU utilization over a profiled window, weighted per launch.

For every metric whose name contains ``pct_of_peak``: the weighted mean over launches. The weight is the first
of :data:`WEIGHT_METRICS` the profile has (cycles, else the duration in ns), else every launch counts equally.
A launch without a value is left out of that metric's mean; a launch without a weight is left out of all.
Each core maps to the first metric of its preference list the profile has (:func:`core_candidates`), as the
names differ by GPU generation. nvprof levels (0 to 10) are weighted by invocations and reported as x 10 %.
A utilization outside 0-100 %, or a cell that is neither a number nor ncu's ``n/a``, makes the file refused: averaging
it, or leaving it out as if it were missing, would print a number the profile does not support.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainbench.analysis.csv_table import NVPROF_METRICS
from trainbench.analysis.ncu_csv import KERNEL
from trainbench.analysis.nvprof_csv import INVOCATIONS
from trainbench.analysis.profiles import read_profile
from trainbench.errors import UsageError

CORES = ("fma", "fp16", "tensor", "sfu")

# Per core, metric bases in order of preference: the original suite's names first, then newer GPUs' names.
CORE_METRICS: dict[str, tuple[str, ...]] = {
    "fma": ("sm__inst_executed_pipe_fma", "sm__pipe_fma_cycles_active"),
    "fp16": ("sm__inst_executed_pipe_fp16", "sm__inst_executed_pipe_fma_type_fp16"),
    "tensor": (
        # Cycles before instruction counts, the original's sm__inst_executed_pipe_tensor included: measured on an
        # H100 (benchmarks/results/h100_torch), one ResNet-50 step had the tensor pipe busy 8.08 % of the cycles
        # while its instruction metric said 1.16 %. Profiles with only the instruction metric still get it.
        "sm__pipe_tensor_cycles_active",
        "sm__pipe_tensor_cycles_active_v2",
        "sm__pipe_tensor_op_hmma_cycles_active",
        "sm__pipe_tensor_subpipe_hmma_cycles_active",
        "sm__inst_executed_pipe_tensor",
        "sm__inst_executed_pipe_tensor_op_hmma",
        "sm__inst_executed_pipe_tensor_subpipe_hmma",
        "sm__inst_executed_pipe_tensor_op_gmma",
    ),
    "sfu": ("sm__inst_executed_pipe_xu",),
}
# Elapsed (share of all cycles, as the original) before active (share of the cycles the SM was busy).
PCT_SUFFIXES = (
    ".avg.pct_of_peak_sustained_elapsed",
    ".sum.pct_of_peak_sustained_elapsed",
    ".pct_of_peak_sustained_elapsed",
    ".avg.pct_of_peak_sustained_active",
    ".sum.pct_of_peak_sustained_active",
    ".pct_of_peak_sustained_active",
)
NVPROF_CORE_METRICS = {
    "fma": "single_precision_fu_utilization",
    "fp16": "half_precision_fu_utilization",
    "tensor": "tensor_precision_fu_utilization",
    "sfu": "special_fu_utilization",
}
# Weight per launch, in order of preference; the duration is in ns whatever unit each row was printed in.
WEIGHT_METRICS = (
    "gpc__cycles_elapsed.max",
    "sm__cycles_elapsed.avg",
    "smsp__cycles_elapsed.avg",
    "gpu__time_duration.sum",
)
EQUAL = "equal"
NVPROF_WEIGHT = "invocations"
NVPROF_LEVEL_PCT = 10.0  # one nvprof utilization level is 10 % of peak
NVPROF_NOTE = "nvprof utilization levels (0 to 10) reported as level x 10 %, weighted by invocations"
PCT_RANGE = (0.0, 100.5)  # a percentage of peak; the half point is slack for values printed rounded


def is_utilization(name: str) -> bool:
    return "pct_of_peak" in name


def is_nvprof_utilization(name: str) -> bool:
    return name.endswith("_fu_utilization")


def wanted_metric(name: str) -> bool:
    """The metrics coreutil reads; everything else in the file is skipped before numeric conversion."""
    return is_utilization(name) or is_nvprof_utilization(name) or name in WEIGHT_METRICS


def core_candidates(core: str) -> list[str]:
    """Full metric names for ``core`` in order of preference (suffix first, then base)."""
    return [base + suffix for suffix in PCT_SUFFIXES for base in CORE_METRICS[core]]


def map_cores(available: Iterable[str], nvprof: bool = False) -> dict[str, str | None]:
    """The metric each core is read from, or None where the profile has none of its names."""
    names = set(available)
    if nvprof:
        return {core: metric if metric in names else None for core, metric in NVPROF_CORE_METRICS.items()}
    return {core: next((m for m in core_candidates(core) if m in names), None) for core in CORES}


def choose_weight(frame: pd.DataFrame) -> tuple[str, pd.Series]:
    """(name, per-launch weight) from the first weight metric with any value; 0 where a launch lacks it."""
    for name in WEIGHT_METRICS:
        if name in frame and frame[name].notna().any():
            return name, frame[name].fillna(0.0).clip(lower=0.0)
    return EQUAL, pd.Series(1.0, index=frame.index)


def weighted_means(values: pd.DataFrame, weights: pd.Series) -> pd.Series:
    """Per column: sum(w * x) / sum(w) over the launches that have x; NaN where no weight remains."""
    x = values.to_numpy(dtype="float64")
    w = weights.to_numpy(dtype="float64")[:, None]
    present = ~np.isnan(x)
    numerator = np.where(present, x * w, 0.0).sum(axis=0)
    denominator = np.where(present, w, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(denominator > 0, numerator / denominator, np.nan)
    return pd.Series(means, index=values.columns, dtype="float64")


def per_kernel_table(values: pd.DataFrame, weights: pd.Series, kernels: pd.Series, launches: pd.Series) -> pd.DataFrame:
    """Per kernel name: launches, share of the total weight (%) and the weighted mean of each column."""
    groups, names = pd.factorize(kernels.to_numpy(dtype=object))
    count = len(names)
    x = values.to_numpy(dtype="float64")
    w = weights.to_numpy(dtype="float64")
    present = ~np.isnan(x)
    table = pd.DataFrame(index=pd.Index(names, name="kernel", dtype=object))
    table["launches"] = np.bincount(groups, weights=launches.to_numpy(dtype="float64"), minlength=count)
    total = w.sum()
    share = np.bincount(groups, weights=w, minlength=count)
    table["weight_share"] = share / total * 100.0 if total > 0 else np.nan
    for position, column in enumerate(values.columns):  # a loop over the four cores, each a whole column
        has = present[:, position]
        numerator = np.bincount(groups, weights=np.where(has, x[:, position] * w, 0.0), minlength=count)
        denominator = np.bincount(groups, weights=np.where(has, w, 0.0), minlength=count)
        with np.errstate(invalid="ignore", divide="ignore"):
            table[column] = np.where(denominator > 0, numerator / denominator, np.nan)
    table["launches"] = table["launches"].astype("int64")
    return table.sort_values("weight_share", ascending=False, kind="stable")


@dataclass(frozen=True)
class CoreValue:
    value: float | None  # weighted mean in %, None where the profile lacks the metric
    metric: str | None  # the metric it came from


@dataclass(frozen=True)
class CoreUtilization:
    file: str
    source: str  # the table layout: ncu-details, ncu-raw or nvprof-metrics
    launches: int
    weight: str  # weight metric name, "invocations" (nvprof) or "equal"
    cores: dict[str, CoreValue]
    metrics: pd.Series  # weighted mean of every utilization metric (%)
    per_kernel: pd.DataFrame = field(repr=False)  # see per_kernel_table, largest weight share first
    note: str | None = None  # how to read the values where it differs from ncu (nvprof levels)

    def to_json(self, per_kernel: int | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "file": self.file,
            "source": self.source,
            "kernels": self.launches,
            "weight": self.weight,
            "cores": {core: {"value": c.value, "metric": c.metric} for core, c in self.cores.items()},
            "metrics": {str(name): _float_or_none(v) for name, v in self.metrics.items()},
        }
        if self.note:
            data["note"] = self.note
        if per_kernel:
            data["per_kernel"] = per_kernel_records(self.per_kernel.head(per_kernel))
        return data


def per_kernel_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {"kernel": str(kernel), **{str(k): _float_or_none(v) if k != "launches" else int(v) for k, v in row.items()}}
        for kernel, row in zip(table.index, table.to_dict("records"), strict=True)
    ]


def _float_or_none(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def _utilization_values(frame: pd.DataFrame, nvprof: bool) -> pd.DataFrame:
    if nvprof:
        columns = [c for c in frame.columns if c != KERNEL and is_nvprof_utilization(c)]
        return frame[columns] * NVPROF_LEVEL_PCT
    return frame[[c for c in frame.columns if c != KERNEL and is_utilization(c)]]


def _launch(key: object) -> str:
    return " ".join(str(part) for part in key) if isinstance(key, tuple) else str(key)


def check_utilizations(values: pd.DataFrame, unreadable: dict[str, tuple[object, str]]) -> None:
    """UsageError naming the first metric with an unreadable cell or a value outside PCT_RANGE, and its launch."""
    for metric in values.columns:
        if metric in unreadable:
            key, text = unreadable[metric]
            raise UsageError(f"{metric}: {text!r} (launch {_launch(key)}) is not a number")
        column = values[metric].to_numpy(dtype="float64")
        with np.errstate(invalid="ignore"):
            outside = ((column < PCT_RANGE[0]) | (column > PCT_RANGE[1])).nonzero()[0]
        if len(outside):
            key = values.index[outside[0]]
            raise UsageError(f"{metric}: {column[outside[0]]:g} % (launch {_launch(key)}) is not a utilization "
                             f"between 0 and 100 %")


def analyze_profile(frame: pd.DataFrame, file: str = "") -> CoreUtilization:
    """Core utilization of a tidy table from :func:`read_profile`; UsageError when there is nothing to average."""
    nvprof = frame.attrs.get("layout") == NVPROF_METRICS
    if frame.empty:
        raise UsageError("the table has no kernel launches")
    values = _utilization_values(frame, nvprof)
    if values.shape[1] == 0:
        wanted = "*_fu_utilization" if nvprof else "*pct_of_peak*"
        raise UsageError(f"none of the utilization metrics ({wanted}) in the table")
    check_utilizations(values, frame.attrs.get("unreadable", {}))
    if nvprof:
        weight_name, weights = NVPROF_WEIGHT, frame[INVOCATIONS].fillna(0.0).clip(lower=0.0)
        launch_counts = frame[INVOCATIONS].fillna(0.0)
    else:
        weight_name, weights = choose_weight(frame)
        launch_counts = pd.Series(1, index=frame.index)
    means = weighted_means(values, weights)
    has_values = values.notna().to_numpy().any(axis=0)
    mapping = map_cores(values.columns[has_values], nvprof)
    cores = {core: CoreValue(_float_or_none(means[m]) if m else None, m) for core, m in mapping.items()}
    # Every core gets a column, all NaN where it is n/a, so the per-kernel table always has the same shape.
    core_columns = pd.DataFrame({core: values[m] if m else np.nan for core, m in mapping.items()}, index=frame.index)
    return CoreUtilization(
        file=file,
        source=str(frame.attrs.get("layout", "")),
        launches=int(launch_counts.sum()),
        weight=weight_name,
        cores=cores,
        metrics=means,
        per_kernel=per_kernel_table(core_columns, weights, frame[KERNEL], launch_counts),
        note=NVPROF_NOTE if nvprof else None,
    )


def analyze_file(path: str | Path) -> CoreUtilization:
    """Read ``path`` (any supported layout) and compute its core utilization."""
    return analyze_profile(read_profile(path, keep=wanted_metric), file=str(path))


SUMMARY_COLUMNS = ["file", "source", "kernels", "weight", *CORES, *(f"{core}_metric" for core in CORES)]


def summary_frame(results: Sequence[CoreUtilization]) -> pd.DataFrame:
    """One row per file: the four cores (NaN where n/a) and the metric each came from."""
    rows = [
        {
            "file": r.file,
            "source": r.source,
            "kernels": r.launches,
            "weight": r.weight,
            **{core: r.cores[core].value for core in CORES},
            **{f"{core}_metric": r.cores[core].metric for core in CORES},
        }
        for r in results
    ]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS).astype({core: "float64" for core in CORES})
