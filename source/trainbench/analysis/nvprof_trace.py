"""nvprof's GPU trace (``--print-gpu-trace --csv``): one row per kernel or memory copy, reduced like nsys' timeline.

Layout: ``==PID==`` lines, a quoted header starting ``"Start","Duration"``, a units row (``ms,ms,...``), then rows.
Memory operations are named in brackets (``[CUDA memcpy HtoD]``, ``[CUDA memset]``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.analysis.timeline import merged_busy_ns
from trainbench.analysis.units import normalise_unit
from trainbench.errors import UsageError

HEADER_START = '"Start","Duration"'


def _table_text(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror})") from None
    start = text.find(HEADER_START)
    if start < 0:
        raise UsageError(f"{path}: no nvprof GPU trace in it (no header line \"Start\",\"Duration\",...)")
    return text[start:]


def _nanoseconds(values: pd.Series, unit: str) -> pd.Series:
    base, factor = normalise_unit(unit)
    if base != "nsecond":
        raise ValueError(f"time unit {unit!r}")
    return (pd.to_numeric(values, errors="coerce") * factor).round().astype("Int64")


def read_gpu_trace(path: str | Path) -> pd.DataFrame:
    """DataFrame[start, end, duration_ns, kind ('kernel' | 'memory'), name], times in ns."""
    path = Path(path)
    frame = pd.read_csv(io.StringIO(_table_text(path)), dtype=str, keep_default_na=False)
    if len(frame) < 2 or not {"Start", "Duration", "Name"} <= set(frame.columns):  # units row + data
        raise UsageError(f"{path}: the GPU trace has no rows")
    units, rows = frame.iloc[0], frame.iloc[1:]
    try:
        start = _nanoseconds(rows["Start"], units["Start"])
        duration = _nanoseconds(rows["Duration"], units["Duration"])
    except ValueError as error:
        raise UsageError(f"{path}: unexpected {error} in the units row") from None
    names = rows["Name"].astype(str)
    trace = pd.DataFrame({"start": start, "end": start + duration, "duration_ns": duration,
                          "kind": names.str.startswith("[CUDA ").map({True: "memory", False: "kernel"}),
                          "name": names})
    return trace.dropna(subset=["start", "duration_ns"]).astype({"start": "int64", "end": "int64",
                                                                 "duration_ns": "int64"}).reset_index(drop=True)


def summarize_gpu_trace(path: str | Path) -> dict[str, Any]:
    """Kernel count and the GPU's busy fraction from the first to the last GPU activity of the trace."""
    trace = read_gpu_trace(path)
    kernels = trace[trace["kind"] == "kernel"]
    window_start, window_end = int(trace["start"].min()), int(trace["end"].max())
    busy = merged_busy_ns(kernels, window_start, window_end)
    return {
        "kernels": len(kernels),
        "window_ms": (window_end - window_start) / 1e6,
        "gpu_busy_fraction": busy / (window_end - window_start) if window_end > window_start else None,
        "memory_ops": int((trace["kind"] == "memory").sum()),
    }
