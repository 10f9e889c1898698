"""GPU timeline of a profiled training window, from an Nsight Systems SQLite export, as pandas DataFrames.

Input: ``nsys export --type sqlite`` of a run whose harness marks each iteration with an NVTX range ``step:N``
(and the whole window with ``epoch:N``, not used here). Tables read: ``CUPTI_ACTIVITY_KIND_KERNEL`` (required),
``CUPTI_ACTIVITY_KIND_MEMCPY``/``_MEMSET``/``_RUNTIME``, ``NVTX_EVENTS`` and ``StringIds``. nsys creates tables
lazily, so a missing optional table means "no such activity", never an error. Times are nanoseconds.

Busy time is always a union of intervals: kernels of concurrent streams overlap, and summing their durations
would count the same nanosecond twice (``kernel_ns_sum`` in :func:`summarize` is that sum, for contrast). All
devices share one timeline: with several GPUs in one export, "busy" means "some GPU is busy".
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from trainbench.errors import UsageError

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"

# NVTX eventType values of ranges: 59 push/pop, 60 start/end (34, a mark, has no duration).
_NVTX_RANGE_TYPES = (59, 60)
# globalPid/globalTid keep the process in the bits above the low 24 (the thread id); dividing drops the thread.
_PROCESS_DIVISOR = 0x1000000

_KERNEL_COLUMNS = ["start", "end", "duration_ns", "device", "stream", "name"]
_MEMORY_COLUMNS = ["start", "end", "duration_ns", "device", "stream", "kind", "bytes"]
_TOP_COLUMNS = ["name", "total_ns", "instances", "mean_ns", "share"]


def open_export(path: str | Path) -> sqlite3.Connection:
    """Read-only connection to an nsys SQLite export; :class:`UsageError` naming the file when it is not one."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: {'not a file' if file.exists() else 'no such file'}")
    # A URI so that mode=ro holds: opening must never create or modify the export.
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        has_kernels = _has_table(conn, KERNEL_TABLE)
    except sqlite3.DatabaseError as error:  # sqlite only reads the header on the first query
        conn.close()
        problem = f"not an SQLite database ({error}); expected `nsys export --type sqlite` output"
        raise UsageError(f"{path}: {problem}") from None
    if not has_kernels:
        conn.close()
        raise UsageError(f"{path}: no {KERNEL_TABLE} table; was the run profiled with CUDA tracing (nsys -t cuda)?")
    return conn


def _has_table(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row is not None


def _frame(conn: sqlite3.Connection, sql: str, dtypes: dict[str, str]) -> pd.DataFrame:
    # Explicit dtypes: an empty result would otherwise come back as object columns.
    rows = conn.execute(sql).fetchall()
    return pd.DataFrame.from_records(rows, columns=list(dtypes)).astype(dtypes)


def _with_duration(frame: pd.DataFrame) -> pd.DataFrame:
    frame.insert(2, "duration_ns", frame["end"] - frame["start"])
    return frame


# --- raw activity -------------------------------------------------------------------------------------------

_KERNEL_SQL = f"""
SELECT k.start, k."end", k.deviceId, k.streamId, COALESCE(d.value, s.value, '<unnamed>'),
       k.correlationId, k.globalPid / {_PROCESS_DIVISOR}
FROM {KERNEL_TABLE} AS k
LEFT JOIN StringIds AS d ON d.id = k.demangledName
LEFT JOIN StringIds AS s ON s.id = k.shortName
ORDER BY k.start
"""
_KERNEL_DTYPES = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64", "name": "object",
                  "correlation": "int64", "process": "int64"}


def _kernel_rows(conn: sqlite3.Connection) -> pd.DataFrame:
    """Kernels with the columns of :func:`kernels` plus ``correlation`` and ``process`` to find the launch."""
    return _with_duration(_frame(conn, _KERNEL_SQL, _KERNEL_DTYPES))


def kernels(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row per kernel, by start: start, end, duration_ns, device, stream, name (demangled, else short)."""
    return _kernel_rows(conn)[_KERNEL_COLUMNS]


def _memory_table(conn: sqlite3.Connection, table: str) -> pd.DataFrame:
    dtypes = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64", "bytes": "int64"}
    if not _has_table(conn, table):
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in dtypes.items()})
    sql = f'SELECT start, "end", deviceId, streamId, bytes FROM {table}'
    return _frame(conn, sql, dtypes)


def memory_ops(conn: sqlite3.Connection) -> pd.DataFrame:
    """Memcpys and memsets, by start: start, end, duration_ns, device, stream, kind ('memcpy'|'memset'), bytes."""
    parts = [_memory_table(conn, MEMCPY_TABLE).assign(kind="memcpy"),
             _memory_table(conn, MEMSET_TABLE).assign(kind="memset")]
    frame = pd.concat(parts, ignore_index=True).sort_values("start", kind="stable", ignore_index=True)
    return _with_duration(frame)[_MEMORY_COLUMNS]


_STEP_SQL = f"""
SELECT n.start, n."end", COALESCE(NULLIF(n.text, ''), s.value)
FROM {NVTX_TABLE} AS n LEFT JOIN StringIds AS s ON s.id = n.textId
WHERE n.eventType IN {_NVTX_RANGE_TYPES} AND n."end" >= n.start
  AND COALESCE(NULLIF(n.text, ''), s.value) LIKE 'step:%'
"""


def step_ranges(conn: sqlite3.Connection) -> pd.DataFrame:
    """CPU-side NVTX ranges named ``step:N``, by step: step, start, end.

    A step recorded more than once (several threads or ranks) spans from its first start to its last end; ranges
    left open at the end of the capture (no end time) are dropped.
    """
    if not _has_table(conn, NVTX_TABLE):
        return pd.DataFrame({"step": pd.Series(dtype="int64"), "start": pd.Series(dtype="int64"),
                             "end": pd.Series(dtype="int64")})
    ranges = _frame(conn, _STEP_SQL, {"start": "int64", "end": "int64", "name": "object"})
    # LIKE only narrows; the exact form is checked here so that "step:3b" or "step:" is not a step.
    steps = ranges[ranges["name"].str.fullmatch(r"step:\d+").astype(bool)]
    steps = steps.assign(step=steps["name"].str.slice(len("step:")).astype("int64"))
    return steps.groupby("step", sort=True).agg(start=("start", "min"), end=("end", "max")).reset_index()


# --- interval arithmetic ------------------------------------------------------------------------------------

def _new_ns(starts: np.ndarray, ends: np.ndarray, prior_max_end: np.ndarray) -> np.ndarray:
    # With intervals sorted by start, what interval i adds to the union is the part past every earlier end: the
    # earlier interval that reaches prior_max_end starts no later than i, so it covers [start_i, prior_max_end).
    return np.clip(ends - np.maximum(starts, prior_max_end), 0, None)


def merged_busy_ns(intervals: pd.DataFrame, window_start: int, window_end: int) -> int:
    """Length of the union of ``intervals`` (columns start, end) clipped to [window_start, window_end), in ns."""
    if intervals.empty:
        return 0
    starts = np.clip(intervals["start"].to_numpy(dtype="int64"), window_start, window_end)
    ends = np.clip(intervals["end"].to_numpy(dtype="int64"), window_start, window_end)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    prior = np.empty_like(ends)
    prior[0] = starts[0]
    prior[1:] = np.maximum.accumulate(ends)[:-1]
    return int(_new_ns(starts, ends, prior).sum())


def _grouped_busy_ns(intervals: pd.DataFrame, by: str) -> pd.Series:
    """:func:`merged_busy_ns` of each group (no window), still without a loop: cummax restarts per group."""
    ordered = intervals.sort_values([by, "start"], kind="stable")
    running = ordered.groupby(by, sort=False)["end"].cummax()
    prior = running.groupby(ordered[by], sort=False).shift(1).fillna(ordered["start"]).astype("int64")
    added = _new_ns(ordered["start"].to_numpy(), ordered["end"].to_numpy(), prior.to_numpy())
    return pd.Series(added, index=ordered.index).groupby(ordered[by]).sum()


def _clipped(frame: pd.DataFrame, window: tuple[int, int]) -> pd.DataFrame:
    """Rows that overlap the window, start/end/duration_ns cut to it."""
    start, end = window
    inside = frame[(frame["end"] > start) & (frame["start"] < end)]
    cut = inside.assign(start=inside["start"].clip(start, end), end=inside["end"].clip(start, end))
    return cut.assign(duration_ns=cut["end"] - cut["start"])


# --- the window and the steps -------------------------------------------------------------------------------

def _window(steps: pd.DataFrame, gpu: list[pd.DataFrame]) -> tuple[int, int]:
    gpu_starts = [int(frame["start"].min()) for frame in gpu if not frame.empty]
    gpu_ends = [int(frame["end"].max()) for frame in gpu if not frame.empty]
    if not steps.empty:
        # The first step's CPU range opens before any of its GPU work, so the window starts there, which leaves
        # out warm-up work launched before the first marked step.
        return int(steps["start"].min()), max([int(steps["end"].max()), *gpu_ends])
    if not gpu_starts:
        return 0, 0
    return min(gpu_starts), max(gpu_ends)


def analysis_window(conn: sqlite3.Connection) -> tuple[int, int]:
    """The profiled window [start, end) in ns on the export's timeline.

    start: the start of the first ``step:N`` range, or without step ranges the first kernel/memory op start.
    end: the later of the last step range's end and the last kernel/memory op end (GPU work of the last step
    runs after its CPU range has closed). (0, 0) when there is neither.
    """
    return _window(step_ranges(conn), [kernels(conn), memory_ops(conn)])


def _launch_times(conn: sqlite3.Connection, rows: pd.DataFrame) -> pd.Series:
    """CPU time of the runtime call that launched each kernel; the kernel's own start where none is recorded."""
    if not _has_table(conn, RUNTIME_TABLE):
        return rows["start"]
    # correlationId is unique only within a process, hence the process in the key; MIN guards against repeats.
    sql = (f"SELECT globalTid / {_PROCESS_DIVISOR}, correlationId, MIN(start) FROM {RUNTIME_TABLE} "
           "GROUP BY 1, 2")
    calls = _frame(conn, sql, {"process": "int64", "correlation": "int64", "launch": "int64"})
    launches = rows[["process", "correlation"]].merge(calls, how="left", on=["process", "correlation"])
    return pd.Series(launches["launch"].to_numpy(), index=rows.index).fillna(rows["start"]).astype("int64")


def _step_of(times: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """The step whose range contains each time, or -1: one binary search over the sorted step starts."""
    if steps.empty:
        return pd.Series(-1, index=times.index, dtype="int64")
    ordered = steps.sort_values("start", kind="stable")
    position = np.searchsorted(ordered["start"].to_numpy(), times.to_numpy(), side="right") - 1
    safe = np.clip(position, 0, None)
    inside = (position >= 0) & (times.to_numpy() < ordered["end"].to_numpy()[safe])
    return pd.Series(np.where(inside, ordered["step"].to_numpy()[safe], -1), index=times.index)


def _step_gpu(rows: pd.DataFrame, launch: pd.Series, steps: pd.DataFrame) -> pd.DataFrame:
    attributed = rows.assign(step=_step_of(launch, steps))
    attributed = attributed[attributed["step"] >= 0]
    busy = _grouped_busy_ns(attributed, "step") if not attributed.empty else pd.Series(dtype="int64")
    counts = attributed.groupby("step").size()
    result = steps[["step"]].assign(gpu_busy_ns=steps["step"].map(busy).fillna(0).astype("int64"),
                                    kernels=steps["step"].map(counts).fillna(0).astype("int64"))
    return result.reset_index(drop=True)


def step_gpu_time(conn: sqlite3.Connection) -> pd.DataFrame:
    """GPU busy time (union of its kernels, ns) and kernel count of each step, by step: step, gpu_busy_ns, kernels.

    A kernel belongs to the step whose CPU range contains the start of the runtime call that launched it
    (``CUPTI_ACTIVITY_KIND_RUNTIME`` joined on correlationId): its GPU start is later and may fall in the next
    step's range. Without a runtime record the kernel's own start decides. Steps without kernels have zeros.
    """
    rows = _kernel_rows(conn)
    return _step_gpu(rows, _launch_times(conn, rows), step_ranges(conn))


def _top(rows: pd.DataFrame, window: tuple[int, int], n: int) -> pd.DataFrame:
    inside = _clipped(rows, window)
    total = int(inside["duration_ns"].sum())
    table = inside.groupby("name").agg(total_ns=("duration_ns", "sum"), instances=("duration_ns", "size"))
    table = table.reset_index().assign(mean_ns=lambda t: t["total_ns"] / t["instances"],
                                       share=lambda t: t["total_ns"] / total if total else 0.0)
    table = table.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable", ignore_index=True)
    return table[_TOP_COLUMNS].head(n)


def top_kernels(conn: sqlite3.Connection, n: int = 10) -> pd.DataFrame:
    """The n kernel names with the most time in the analysis window: name, total_ns, instances, mean_ns, share.

    Times are cut to the window; share is of all kernel time in the window (a plain sum, so shares add to 1).
    """
    rows = kernels(conn)
    return _top(rows, _window(step_ranges(conn), [rows, memory_ops(conn)]), n)


# --- the summary --------------------------------------------------------------------------------------------

def summarize(path: str | Path) -> dict:
    """Window, GPU busy time, memory traffic and per-step GPU time of an export, as plain JSON-ready values.

    Kernels and memory ops are cut to :func:`analysis_window`; ``kernels`` counts those that overlap it and
    ``memcpy_bytes`` sums the whole size of each memcpy that does. ``step_gpu_ms`` follows step order.
    """
    with closing(open_export(path)) as conn:
        rows, memory, steps = _kernel_rows(conn), memory_ops(conn), step_ranges(conn)
        per_step = _step_gpu(rows, _launch_times(conn, rows), steps)
    window = _window(steps, [rows, memory])
    window_ns = window[1] - window[0]
    busy = merged_busy_ns(rows, *window)
    in_window = _clipped(rows, window)
    memcpy = memory[memory["kind"] == "memcpy"]
    step_ms = (per_step["gpu_busy_ns"] / 1e6).tolist()
    return {
        "window_ns": int(window_ns),
        "gpu_busy_ns": busy,
        "gpu_busy_fraction": busy / window_ns if window_ns else 0.0,
        "kernel_ns_sum": int(in_window["duration_ns"].sum()),
        "memcpy_ns": merged_busy_ns(memcpy, *window),
        "memset_ns": merged_busy_ns(memory[memory["kind"] == "memset"], *window),
        "memcpy_bytes": int(_clipped(memcpy, window)["bytes"].sum()),
        "steps": len(steps),
        "step_gpu_ms_median": float(np.median(step_ms)) if step_ms else None,
        "step_gpu_ms": [float(ms) for ms in step_ms],
        "kernels": len(in_window),
        "top_kernels": _records(_top(rows, window, 10)),
    }


def _records(frame: pd.DataFrame) -> list[dict]:
    # .item() turns numpy scalars into Python ones so that json.dumps accepts the summary.
    return [{key: value.item() if isinstance(value, np.generic) else value for key, value in row.items()}
            for row in frame.to_dict("records")]
