"""Nsight Compute ``--csv`` output (details/long page and ``--page raw``/wide page) as one tidy DataFrame.

The result has one row per launch, indexed by the launch key (``Process ID``, ``ID``): ncu numbers launches
per process, so several processes in one file reuse the same IDs. Columns: ``Kernel Name``, then one float
column per metric with units normalised (see :mod:`trainbench.analysis.units`; ``attrs["units"]`` names the
unit of each column). Values that are not numbers (``n/a``, ``(32, 4, 1)``) are NaN, never 0; ``attrs["unreadable"]``
names, per metric, the first launch whose cell held text that is neither a number nor ncu's ``n/a`` (``nan``,
``1e999``), so that an analysis can refuse it instead of taking it for a missing value. Everything is done on whole
columns (factorize, numpy indexing); nothing loops over launches.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from trainbench.analysis.csv_table import (
    NCU_DETAILS,
    NCU_RAW,
    Table,
    as_number,
    as_text,
    line_after_header,
    locate_table,
    read_columns,
    unreadable,
)
from trainbench.analysis.units import normalise_unit
from trainbench.errors import UsageError

PROCESS = "Process ID"
LAUNCH_ID = "ID"
KERNEL = "Kernel Name"
KEY = [PROCESS, LAUNCH_ID]

MetricFilter = Callable[[str], bool]

# Launch attributes of the raw page: text, not metrics.
_RAW_IDENTITY = frozenset(
    {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
     "Block Size", "Grid Size", "Device", "CC"}
)


def unit_factors(units: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per-row factor to the base unit and the base unit's name; computed once per distinct spelling."""
    codes, spellings = pd.factorize(as_text(units))
    normalised = [normalise_unit(str(spelling)) for spelling in spellings] + [("", 1.0)]  # code -1 -> last
    factors = np.array([factor for _, factor in normalised])
    names = np.array([name for name, _ in normalised], dtype=object)
    return factors[codes], names[codes]


def _is_key(numbers: np.ndarray) -> np.ndarray:
    # IDs are non-negative integers; anything else is a line that only looks like a row (app output, junk).
    with np.errstate(invalid="ignore"):
        return np.isfinite(numbers) & (numbers >= 0) & (numbers < 2.0**53) & (numbers == np.floor(numbers))


def launch_keys(frame: pd.DataFrame) -> tuple[np.ndarray, pd.MultiIndex]:
    """Launch code per row (-1: not a launch row, e.g. trailing output) and the launch index, sorted."""
    launch = as_number(frame[LAUNCH_ID]).to_numpy()
    process = as_number(frame[PROCESS]).to_numpy() if PROCESS in frame else np.zeros(len(frame))
    valid = _is_key(launch) & _is_key(process)
    launch_ids, process_ids = launch[valid].astype("int64"), process[valid].astype("int64")
    process_codes, processes = pd.factorize(process_ids, sort=True)
    span = int(launch_ids.max()) + 1 if len(launch_ids) else 1
    if span * max(len(processes), 1) < 2**62:  # one int64 per (process, ID): factorizes far faster than pairs
        valid_codes, combined = pd.factorize(process_codes * span + launch_ids, sort=True)
        index = pd.MultiIndex.from_arrays([processes[combined // span], combined % span], names=KEY)
    else:
        valid_codes, index = pd.MultiIndex.from_arrays([process_ids, launch_ids]).factorize(sort=True)
        index = index.set_names(KEY)
    codes = np.full(len(frame), -1, dtype="int64")
    codes[valid] = valid_codes
    return codes, index


def kernel_names(frame: pd.DataFrame, codes: np.ndarray, count: int) -> np.ndarray:
    """The kernel name of each launch, from its first row."""
    names = np.full(count, "", dtype=object)
    if KERNEL in frame:
        rows = (codes >= 0).nonzero()[0]
        # A launch's rows are usually consecutive: look for first rows only where a run of rows starts.
        starts = rows[np.diff(codes[rows], prepend=-2) != 0]
        launches, first = np.unique(codes[starts], return_index=True)
        names[launches] = as_text(frame[KERNEL].iloc[starts[first]]).to_numpy(dtype=object)
    return names


def _tidy(index: pd.MultiIndex, kernels: np.ndarray, grid: np.ndarray, metrics: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(grid, index=index, columns=pd.Index(metrics, dtype=object))
    frame.insert(0, KERNEL, pd.Series(kernels, index=index, dtype=object))
    return frame


def _select(names: pd.Series, keep: MetricFilter | None) -> tuple[np.ndarray, list[str]]:
    """Column number of each row's metric (-1: not kept) and the kept metric names, in order of appearance."""
    codes, uniques = pd.factorize(as_text(names))
    kept = np.array([bool(name) and (keep is None or keep(str(name))) for name in uniques], dtype=bool)
    column_of = np.append(np.where(kept, np.cumsum(kept) - 1, -1), -1)  # code -1 (missing) -> not kept
    return column_of[codes], [str(name) for name in uniques[kept]]


def read_details(table: Table, keep: MetricFilter | None = None) -> pd.DataFrame:
    """The long layout: one row per (launch, metric), pivoted with numpy; the first of duplicate rows wins."""
    wanted = [LAUNCH_ID, PROCESS, KERNEL, "Metric Name", "Metric Unit", "Metric Value"]
    frame = read_columns(table, [column for column in wanted if column in table.fields])
    codes, index = launch_keys(frame)
    columns, metrics = _select(frame["Metric Name"], keep)
    rows = ((codes >= 0) & (columns >= 0)).nonzero()[0]
    cells, first = np.unique(codes[rows] * len(metrics) + columns[rows], return_index=True)
    rows = rows[first]
    units = frame["Metric Unit"] if "Metric Unit" in frame else pd.Series("", index=frame.index)
    factors, base_units = unit_factors(units.iloc[rows])
    grid = np.full((len(index), len(metrics)), np.nan)
    grid.flat[cells] = as_number(frame["Metric Value"].iloc[rows]).to_numpy() * factors
    tidy = _tidy(index, kernel_names(frame, codes, len(index)), grid, metrics)
    metric_of_row = columns[rows]
    _, first_of_metric = np.unique(metric_of_row, return_index=True)
    tidy.attrs["units"] = {metrics[metric_of_row[i]]: str(base_units[i]) for i in first_of_metric}
    tidy.attrs["layout"] = NCU_DETAILS
    values = frame["Metric Value"].iloc[rows]
    bad = unreadable(values).nonzero()[0]
    tidy.attrs["unreadable"] = {}
    for position in bad[np.unique(metric_of_row[bad], return_index=True)[1]]:
        tidy.attrs["unreadable"][metrics[metric_of_row[position]]] = (
            index[codes[rows[position]]], str(values.iloc[position]))
    return tidy


def _units_row(table: Table) -> list[str] | None:
    """The raw page's second line (units), or None when the second line is already a launch."""
    fields = line_after_header(table)
    first = fields[0].strip() if fields else ""
    return None if first.isdigit() else fields


def read_raw(table: Table, keep: MetricFilter | None = None) -> pd.DataFrame:
    """The wide layout: a header, a units row, then one row per launch (duplicates: the first wins)."""
    identity = [column for column in (LAUNCH_ID, PROCESS, KERNEL) if column in table.fields]
    metrics = list(
        dict.fromkeys(f for f in table.fields if f and f not in _RAW_IDENTITY and (keep is None or keep(f)))
    )
    units_row = _units_row(table)
    frame = read_columns(table, identity + metrics, skip_units=units_row is not None)
    codes, index = launch_keys(frame)
    rows = (codes >= 0).nonzero()[0]
    launches, first = np.unique(codes[rows], return_index=True)
    rows = rows[first]
    unit_of = dict(zip(table.fields, units_row or [], strict=False))
    factors, base_units = unit_factors(pd.Series([unit_of.get(m, "") for m in metrics], dtype=object))
    grid = np.full((len(index), len(metrics)), np.nan)
    bad_cells = {}
    for position, metric in enumerate(metrics):  # a loop over columns, each converted whole
        cells = frame[metric].iloc[rows]
        grid[launches, position] = as_number(cells).to_numpy() * factors[position]
        bad = unreadable(cells).nonzero()[0]
        if len(bad):
            bad_cells[metric] = (index[launches[bad[0]]], str(cells.iloc[bad[0]]))
    tidy = _tidy(index, kernel_names(frame, codes, len(index)), grid, metrics)
    tidy.attrs["unreadable"] = bad_cells
    tidy.attrs["units"] = dict(zip(metrics, (str(u) for u in base_units), strict=True))
    tidy.attrs["layout"] = NCU_RAW
    return tidy


def read_ncu_csv(path: str | Path, keep: MetricFilter | None = None) -> pd.DataFrame:
    """Read either ncu layout into the tidy per-launch DataFrame; ``keep`` selects the metric names to read."""
    table = locate_table(path)
    if table.kind == NCU_DETAILS:
        return read_details(table, keep)
    if table.kind == NCU_RAW:
        return read_raw(table, keep)
    raise UsageError(f"not an Nsight Compute CSV but an {table.kind} table")
