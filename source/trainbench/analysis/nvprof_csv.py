"""nvprof ``--csv --metrics ...`` output as a tidy DataFrame: one row per (device, kernel).

nvprof aggregates per kernel: each row carries the kernel's ``Invocations`` and the Min/Max/Avg over them; the
``Avg`` column is read. Utilization metrics are levels printed as ``"Low (3)"`` (0 to 10) and become the level
number (unit ``level``); ``"12.5%"`` becomes 12.5 (unit ``%``); plain numbers stay; values with other unit
suffixes (``976.5KB/s``) are NaN rather than guessed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trainbench.analysis.csv_table import (
    NVPROF_METRICS,
    Table,
    as_number,
    as_text,
    locate_table,
    read_columns,
)
from trainbench.analysis.ncu_csv import KERNEL, MetricFilter
from trainbench.errors import UsageError

DEVICE = "Device"
INVOCATIONS = "Invocations"
_LEVEL = r"\((\d+)\)\s*$"


def parse_values(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(number, unit) per row: levels, percentages and plain numbers; NaN for anything else."""
    text = as_text(column).str.strip()
    level = as_number(text.str.extract(_LEVEL, expand=False)).to_numpy()
    percent = text.str.endswith("%").to_numpy(dtype=bool)
    number = as_number(text.str.removesuffix("%")).to_numpy()
    has_level = ~np.isnan(level)
    units = np.where(has_level, "level", np.where(percent, "%", "")).astype(object)
    return np.where(has_level, level, number), units


def _kernel_keys(frame: pd.DataFrame) -> tuple[np.ndarray, pd.MultiIndex]:
    """Code per row and the (device, kernel) index, in order of first appearance."""
    device = as_text(frame[DEVICE]) if DEVICE in frame else pd.Series("", index=frame.index)
    keys = pd.MultiIndex.from_arrays([device.to_numpy(dtype=object), as_text(frame["Kernel"]).to_numpy(dtype=object)])
    codes, kernels = keys.factorize()
    return codes, kernels.set_names([DEVICE, "Kernel"])


def read_metrics(table: Table, keep: MetricFilter | None = None) -> pd.DataFrame:
    """Pivot the metric rows to one row per (device, kernel); the first of duplicated rows wins."""
    columns = [c for c in (DEVICE, "Kernel", INVOCATIONS, "Metric Name", "Avg") if c in table.fields]
    frame = read_columns(table, columns)
    if "Kernel" not in frame or INVOCATIONS not in frame:
        raise UsageError("nvprof table without Kernel and Invocations columns")
    frame = frame[(as_text(frame["Kernel"]) != "").to_numpy()]  # lines after the table name no kernel
    codes, kernels = _kernel_keys(frame)  # every kernel, whether or not it has a metric that is kept
    names = as_text(frame["Metric Name"])
    metrics = [str(name) for name in names.unique() if name and (keep is None or keep(str(name)))]
    rows = names.isin(metrics).to_numpy().nonzero()[0]
    metric_codes = pd.Categorical(names.iloc[rows].to_numpy(dtype=object), categories=metrics).codes
    values, units = parse_values(frame["Avg"].iloc[rows])
    cells, first = np.unique(codes[rows] * len(metrics) + metric_codes, return_index=True)
    grid = np.full((len(kernels), len(metrics)), np.nan)
    grid.flat[cells] = values[first]
    tidy = pd.DataFrame(grid, index=kernels, columns=pd.Index(metrics, dtype=object))
    _, first_of_kernel = np.unique(codes, return_index=True)
    tidy.insert(0, INVOCATIONS, as_number(frame[INVOCATIONS].iloc[first_of_kernel]).to_numpy())
    tidy.insert(0, KERNEL, kernels.get_level_values("Kernel").to_numpy(dtype=object))
    _, first_of_metric = np.unique(metric_codes, return_index=True)
    tidy.attrs["units"] = {metrics[metric_codes[i]]: str(units[i]) for i in first_of_metric}
    tidy.attrs["layout"] = NVPROF_METRICS
    return tidy


def read_nvprof_csv(path: str | Path, keep: MetricFilter | None = None) -> pd.DataFrame:
    """Read an nvprof metrics CSV; ``keep`` selects the metric names to read."""
    table = locate_table(path)
    if table.kind != NVPROF_METRICS:
        raise UsageError(f"not an nvprof metrics CSV but an {table.kind} table")
    return read_metrics(table, keep)
