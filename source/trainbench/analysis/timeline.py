"""GPU timeline of a profiled window, from an Nsight Systems SQLite export, as pandas DataFrames.

Input: ``nsys export --type sqlite`` of any release, read by :mod:`trainbench.analysis.nsys_export` (tables,
columns and refusals live there). The suite's harness marks each iteration with an NVTX range ``step:N`` (and the
whole window with ``epoch:N``); captures made by others name their steps otherwise, hence a pattern saying which
NVTX ranges are steps (:data:`STEP_PATTERN` by default). Times are nanoseconds.

Busy time is always a union of intervals: kernels of concurrent streams overlap, and summing their durations
would count the same nanosecond twice (``kernel_ns_sum`` in :func:`summarize` is that sum, for contrast). All
devices share one timeline: with several GPUs in one export, "busy" means "some GPU is busy".
"""

from __future__ import annotations

import re
import sqlite3
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainbench.analysis.nsys_export import (
    MEMCPY_TABLE,
    MEMSET_TABLE,
    ExportError,
    export_info,
    kernel_rows,
    launch_rows,
    memory_rows,
    nvtx_ranges,
    open_export,
    reading,
    recorded_extent,
)
from trainbench.errors import UsageError

__all__ = ["AUTOMATIC", "STEP_PATTERN", "WindowChoice", "analysis_window", "compare_files", "kernels",
           "matching_ranges", "memory_ops", "merged_busy_ns", "open_export", "parse_window", "step_gpu_time",
           "step_pattern", "step_ranges", "straggler", "summarize", "top_kernels"]

# The suite's step ranges; the group is the step's number, and ranges of one number (several threads) are one step.
STEP_PATTERN = r"step:(\d+)"

_KERNEL_COLUMNS = ["start", "end", "duration_ns", "device", "stream", "name"]
_MEMORY_COLUMNS = ["start", "end", "duration_ns", "device", "stream", "kind", "bytes"]
_TOP_COLUMNS = ["name", "total_ns", "instances", "mean_ns", "share"]
_RANGE_DTYPES = {"step": "int64", "name": "object", "start": "int64", "end": "int64"}


def _with_duration(frame: pd.DataFrame) -> pd.DataFrame:
    frame.insert(2, "duration_ns", frame["end"] - frame["start"])
    return frame


# --- raw activity -------------------------------------------------------------------------------------------

def _kernel_rows(conn: sqlite3.Connection) -> pd.DataFrame:
    """Kernels with the columns of :func:`kernels` plus ``correlation`` and ``process`` to find the launch."""
    return _with_duration(kernel_rows(conn))


def kernels(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row per kernel, by start: start, end, duration_ns, device, stream, name (demangled, else short)."""
    return _kernel_rows(conn)[_KERNEL_COLUMNS]


def memory_ops(conn: sqlite3.Connection) -> pd.DataFrame:
    """Memcpys and memsets, by start: start, end, duration_ns, device, stream, kind ('memcpy'|'memset'), bytes."""
    parts = [memory_rows(conn, MEMCPY_TABLE).assign(kind="memcpy"),
             memory_rows(conn, MEMSET_TABLE).assign(kind="memset")]
    frame = pd.concat(parts, ignore_index=True).sort_values("start", kind="stable", ignore_index=True)
    return _with_duration(frame)[_MEMORY_COLUMNS]


# --- which NVTX ranges are steps ----------------------------------------------------------------------------

def step_pattern(text: str) -> re.Pattern[str]:
    """``text`` compiled as a regular expression; :class:`UsageError` when it is not one."""
    try:
        return re.compile(text)
    except re.error as error:
        raise UsageError(f"not a regular expression: {text!r} ({error})") from None


# Characters that stand for themselves at the start of a pattern (outside a class, without the verbose flag).
_LITERAL = frozenset(string.ascii_letters + string.digits + ":_-/ =@,")


def _literal_prefix(pattern: str) -> str:
    """A prefix of every name that ``pattern`` matches whole, to narrow the NVTX query ("" when none is sure)."""
    if "|" in pattern:  # an alternative could match without the prefix
        return ""
    length = 0
    while length < len(pattern) and pattern[length] in _LITERAL:
        length += 1
    if length < len(pattern) and pattern[length] in "?*{":  # a quantifier makes the last character optional
        length -= 1
    return pattern[:max(length, 0)]


def _steps_from(ranges: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Ranges (by start) with the key of their step merged into steps: all-digit keys are the steps' numbers,
    otherwise steps are numbered from 0 in the order they start."""
    if ranges.empty:
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in _RANGE_DTYPES.items()})
    numbered = all(key.isdigit() for key in keys)
    keyed = ranges.assign(key=[int(key) for key in keys] if numbered else keys)
    steps = keyed.groupby("key", sort=False).agg(name=("name", "first"), start=("start", "min"),
                                                 end=("end", "max"))
    steps = steps.reset_index().sort_values("key" if numbered else "start", kind="stable", ignore_index=True)
    steps["step"] = steps["key"] if numbered else range(len(steps))
    return steps[list(_RANGE_DTYPES)].astype(_RANGE_DTYPES)


def matching_ranges(conn: sqlite3.Connection, pattern: str = STEP_PATTERN) -> pd.DataFrame:
    """The steps that NVTX ranges named by ``pattern`` (a regular expression matching the whole name) mark, by
    step: step, name, start, end.

    The pattern's first group, when it has one, says which step a range belongs to: ranges with the same group
    text (a step recorded on several threads or ranks) are one step, from the first start to the last end, and a
    group of digits is the step's number (``step:(\\d+)``). Without a group every range is a step of its own. Steps
    are numbered from 0 in the order they start unless their groups are all digits.
    """
    compiled = step_pattern(pattern)
    ranges = nvtx_ranges(conn, _literal_prefix(pattern))
    matches = [compiled.fullmatch(name) for name in ranges["name"]]
    found = ranges[[match is not None for match in matches]]
    hits = [match for match in matches if match is not None]
    keys = [(hit.group(1) or "") if compiled.groups else str(i) for i, hit in enumerate(hits)]
    return _steps_from(found, keys)


def step_ranges(conn: sqlite3.Connection, pattern: str = STEP_PATTERN) -> pd.DataFrame:
    """CPU-side NVTX ranges of the steps (``step:N`` by default), by step: step, start, end.

    A step recorded more than once (several threads or ranks) spans from its first start to its last end; ranges
    left open at the end of the capture (no end time) are dropped. See :func:`matching_ranges` for ``pattern``.
    """
    return matching_ranges(conn, pattern)[["step", "start", "end"]]


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


def _collective(names: pd.Series) -> pd.Series:
    # NCCL's kernels (ncclKernel_*, ncclDevKernel_*) spin on the GPU until every rank has arrived: on the ranks
    # that wait for a straggler they are busy doing nothing.
    return names.str.contains("nccl", case=False, regex=False).astype(bool)


# --- the window ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WindowChoice:
    """The part of the timeline to analyse: chosen automatically (neither field), the NVTX range(s) named
    ``nvtx_name`` (from the first start to the last end), or ``bounds`` [start, end) in ns on the export's
    timeline."""

    nvtx_name: str | None = None
    bounds: tuple[int, int] | None = None


AUTOMATIC = WindowChoice()


# Timestamps are int64 nanoseconds: a bound past this is no time a capture can hold (about 292 years).
LAST_NS = 2**63 - 1


def parse_window(text: str) -> WindowChoice:
    """``nvtx:NAME`` or ``START:END`` (ns, 0 <= START < END < 2^63); :class:`UsageError` saying what is expected."""
    if text.startswith("nvtx:"):
        if text == "nvtx:":
            raise UsageError("nvtx: needs the name of a range, e.g. nvtx:epoch:0")
        return WindowChoice(nvtx_name=text[len("nvtx:"):])
    start, colon, end = text.partition(":")
    if not (colon and start.strip().isdigit() and end.strip().isdigit()):
        raise UsageError(f"expected nvtx:NAME or START:END in ns, got {text!r}")
    if int(start) >= int(end):
        raise UsageError(f"START must be below END, got {text!r}")
    if int(end) > LAST_NS:
        raise UsageError(f"END must be below 2^63 ns (about 292 years), got {text!r}")
    return WindowChoice(bounds=(int(start), int(end)))


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


def _range_names(conn: sqlite3.Connection) -> str:
    names = nvtx_ranges(conn)["name"].drop_duplicates().tolist()
    if not names:
        return "the export has no closed NVTX range"
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"its ranges: {', '.join(repr(name) for name in names[:5])}{more}"


def _named_window(conn: sqlite3.Connection, name: str) -> tuple[int, int]:
    ranges = nvtx_ranges(conn, name)
    named = ranges[ranges["name"] == name]
    if named.empty:
        raise ExportError(f"no closed NVTX range named {name!r} ({_range_names(conn)})")
    return int(named["start"].min()), int(named["end"].max())


def _chosen_window(conn: sqlite3.Connection, choice: WindowChoice, steps: pd.DataFrame,
                   gpu: list[pd.DataFrame]) -> tuple[tuple[int, int], str]:
    """The window's bounds and where they come from: given, an NVTX range, the steps, or the GPU's activity."""
    if choice.bounds is not None:
        return choice.bounds, "given"
    if choice.nvtx_name is not None:
        return _named_window(conn, choice.nvtx_name), f"nvtx:{choice.nvtx_name}"
    return _window(steps, gpu), "steps" if not steps.empty else "GPU activity"


def _span(bounds: tuple[int, int]) -> str:
    return f"[{bounds[0]}, {bounds[1]}) ns"


def _asked(choice: WindowChoice, bounds: tuple[int, int], source: str) -> str:
    """The window as the user asked for it (or as it was chosen), for a refusal."""
    if choice.bounds is not None:
        return f"--window {bounds[0]}:{bounds[1]}"
    if choice.nvtx_name is not None:
        return f"--window {source} {_span(bounds)}"
    return f"the window from {source} {_span(bounds)}"


def _within_capture(choice: WindowChoice, bounds: tuple[int, int], source: str,
                    extent: tuple[int, int] | None) -> tuple[int, int]:
    """A given window cut to what the capture recorded (outside it nothing was seen: neither busy nor idle);
    :class:`ExportError` when the two do not overlap. NVTX and automatic windows lie inside by construction."""
    if choice.bounds is None or extent is None:
        return bounds
    if bounds[1] <= extent[0] or bounds[0] >= extent[1]:
        side = "before the first" if bounds[1] <= extent[0] else "after the last"
        raise ExportError(f"{_asked(choice, bounds, source)} lies outside the capture ({side} recorded event; "
                          f"its events span {_span(extent)})")
    return max(bounds[0], extent[0]), min(bounds[1], extent[1])


def _overlapping(frame: pd.DataFrame, bounds: tuple[int, int]) -> bool:
    return bool(((frame["end"] > bounds[0]) & (frame["start"] < bounds[1])).any())


def _gpu_extent(gpu: list[pd.DataFrame]) -> tuple[int, int]:
    busy = [frame for frame in gpu if not frame.empty]
    return min(int(frame["start"].min()) for frame in busy), max(int(frame["end"].max()) for frame in busy)


def _require_activity(choice: WindowChoice, bounds: tuple[int, int], source: str,
                      gpu: list[pd.DataFrame]) -> None:
    """:class:`ExportError` when no kernel, memcpy or memset overlaps the window: every figure would be 0, which
    reads like a measurement of an idle GPU rather than a window that missed the work."""
    if any(_overlapping(frame, bounds) for frame in gpu):
        return
    advice = "; choose a window that overlaps it" if choice != AUTOMATIC else ""
    raise ExportError(f"{_asked(choice, bounds, source)} holds no kernel, memcpy or memset time (the capture's "
                      f"GPU activity spans {_span(_gpu_extent(gpu))}){advice}")


# --- steps --------------------------------------------------------------------------------------------------

def _launch_times(conn: sqlite3.Connection, rows: pd.DataFrame) -> pd.Series:
    """CPU time of the runtime call that launched each kernel; the kernel's own start where none is recorded."""
    calls = launch_rows(conn)
    if calls is None:
        return rows["start"]
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


def step_gpu_time(conn: sqlite3.Connection, pattern: str = STEP_PATTERN) -> pd.DataFrame:
    """GPU busy time (union of its kernels, ns) and kernel count of each step, by step: step, gpu_busy_ns, kernels.

    A kernel belongs to the step whose CPU range contains the start of the runtime call that launched it
    (``CUPTI_ACTIVITY_KIND_RUNTIME`` joined on correlationId): its GPU start is later and may fall in the next
    step's range. Without a runtime record the kernel's own start decides. Steps without kernels have zeros.
    """
    rows = _kernel_rows(conn)
    return _step_gpu(rows, _launch_times(conn, rows), step_ranges(conn, pattern))


def _per_step(rows: pd.DataFrame, launch: pd.Series, steps: pd.DataFrame) -> pd.DataFrame:
    """:func:`_step_gpu` with the steps' names and ranges, and their busy time outside collective kernels."""
    every = _step_gpu(rows, launch, steps)
    computing = ~_collective(rows["name"])
    compute = _step_gpu(rows[computing], launch[computing], steps)
    return steps.reset_index(drop=True).assign(gpu_busy_ns=every["gpu_busy_ns"],
                                               compute_busy_ns=compute["gpu_busy_ns"], kernels=every["kernels"])


# --- top kernels --------------------------------------------------------------------------------------------

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

def _median_ms(values_ns: pd.Series) -> float | None:
    return float(np.median(values_ns)) / 1e6 if len(values_ns) else None


def _busy_fields(rows: pd.DataFrame, window: tuple[int, int]) -> dict[str, Any]:
    window_ns = window[1] - window[0]
    busy = merged_busy_ns(rows, *window)
    in_window = _clipped(rows, window)
    return {
        "window_ns": int(window_ns),
        "gpu_busy_ns": busy,
        "gpu_busy_fraction": busy / window_ns if window_ns else 0.0,
        "kernel_ns_sum": int(in_window["duration_ns"].sum()),
        "compute_busy_ns": merged_busy_ns(rows[~_collective(rows["name"])], *window),
        "kernels": len(in_window),
    }


def _memory_fields(memory: pd.DataFrame, window: tuple[int, int]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for kind in ("memcpy", "memset"):
        ops = memory[memory["kind"] == kind]
        inside = _clipped(ops, window)
        fields |= {f"{kind}_ns": merged_busy_ns(ops, *window), f"{kind}_bytes": int(inside["bytes"].sum()),
                   f"{kind}s": len(inside)}
    return fields


def _step_fields(per_step: pd.DataFrame) -> dict[str, Any]:
    step_ms = (per_step["gpu_busy_ns"] / 1e6).tolist()
    records = per_step.rename(columns={"start": "start_ns", "end": "end_ns"})
    return {
        "steps": len(per_step),
        "step_gpu_ms_median": _median_ms(per_step["gpu_busy_ns"]),
        "step_compute_ms_median": _median_ms(per_step["compute_busy_ns"]),
        "step_gpu_ms": [float(ms) for ms in step_ms],
        "per_step": _records(records),
    }


def _starting_in(steps: pd.DataFrame, window: tuple[int, int]) -> pd.DataFrame:
    return steps[(steps["start"] >= window[0]) & (steps["start"] < window[1])]


def summarize(path: str | Path, *, window: WindowChoice = AUTOMATIC, range_pattern: str = STEP_PATTERN,
              top: int = 10) -> dict[str, Any]:
    """Window, GPU busy time, memory traffic, per-step GPU time and top kernels of an export, as JSON-ready values.

    Kernels and memory ops are cut to the window (:func:`analysis_window` unless ``window`` says otherwise; with a
    chosen window the steps are those that start in it); ``kernels``, ``memcpys`` and ``memsets`` count those that
    overlap it and ``*_bytes`` sum the whole size of each. ``compute_busy_ns`` and ``step_compute_ms_median`` leave
    collective (NCCL) kernels out. ``step_gpu_ms`` and ``per_step`` follow step order. :class:`UsageError` naming
    the file for anything it cannot read, and for a window with no GPU activity in it. A window given in ns is cut
    to the capture's recorded events (``window.requested_ns`` then holds what was asked); one outside them is
    refused.
    """
    with reading(path) as conn:
        rows, memory, steps = _kernel_rows(conn), memory_ops(conn), matching_ranges(conn, range_pattern)
        launch = _launch_times(conn, rows)
        asked, source = _chosen_window(conn, window, steps, [rows, memory])
        bounds = _within_capture(window, asked, source, recorded_extent(conn))
        _require_activity(window, bounds, source, [rows, memory])
        info = export_info(conn, set(rows["device"].unique().tolist()))
    if window != AUTOMATIC:
        steps = _starting_in(steps, bounds)
    return {
        **_busy_fields(rows, bounds),
        **_memory_fields(memory, bounds),
        **_step_fields(_per_step(rows, launch, steps)),
        "top_kernels": _records(_top(rows, bounds, top)),
        "window": {"start_ns": bounds[0], "end_ns": bounds[1], "from": source,
                   **({"requested_ns": list(asked)} if asked != bounds else {})},
        **info,
    }


def _records(frame: pd.DataFrame) -> list[dict]:
    # .item() turns numpy scalars into Python ones so that json.dumps accepts the summary.
    return [{key: value.item() if isinstance(value, np.generic) else value for key, value in row.items()}
            for row in frame.to_dict("records")]


# --- several files, one per rank ----------------------------------------------------------------------------

_COMPARED = {  # column: (summary field, factor)
    "window_ms": ("window_ns", 1e-6), "gpu_busy_fraction": ("gpu_busy_fraction", 1.0),
    "gpu_busy_ms": ("gpu_busy_ns", 1e-6), "compute_busy_ms": ("compute_busy_ns", 1e-6), "steps": ("steps", 1),
    "step_gpu_ms_median": ("step_gpu_ms_median", 1.0), "step_compute_ms_median": ("step_compute_ms_median", 1.0),
    "kernels": ("kernels", 1), "memcpy_ms": ("memcpy_ns", 1e-6),
}


def _compared_row(file: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"file": file}
    for column, (field, factor) in _COMPARED.items():
        value = summary[field]
        row[column] = None if value is None else value * factor
    return row


def straggler(frame: pd.DataFrame) -> dict[str, Any] | None:
    """The slowest rank among :func:`compare_files`' rows, or None with fewer than two.

    Slowest: the largest median GPU time per step when every file has steps, else the largest GPU busy time, both
    outside collective (NCCL) kernels: those spin on the ranks that wait for the slowest one, which would make the
    waiting ranks look the busiest. Returns file, basis, ms, fastest_file, fastest_ms and over_fastest (the
    fraction by which the straggler's figure exceeds the fastest's; None when that is 0).
    """
    if len(frame) < 2:
        return None
    by_steps = bool((frame["steps"] > 0).all())
    column = "step_compute_ms_median" if by_steps else "compute_busy_ms"
    values = frame[column].astype(float)
    slow, fast = values.idxmax(), values.idxmin()
    basis = "median GPU time per step" if by_steps else "GPU busy time in the window"
    return {"file": frame.at[slow, "file"], "basis": f"{basis}, NCCL kernels left out", "ms": float(values[slow]),
            "fastest_file": frame.at[fast, "file"], "fastest_ms": float(values[fast]),
            "over_fastest": float(values[slow] / values[fast] - 1) if values[fast] > 0 else None}


def compare_files(summaries: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """:func:`summarize` results of several files (one rank each) side by side, one row per file in the order
    given: file, window_ms, gpu_busy_fraction, gpu_busy_ms, compute_busy_ms, steps, step_gpu_ms_median,
    step_compute_ms_median, kernels, memcpy_ms, and straggler (True on the row :func:`straggler` names)."""
    frame = pd.DataFrame([_compared_row(file, summary) for file, summary in summaries.items()],
                         columns=["file", *_COMPARED])
    slowest = straggler(frame)
    return frame.assign(straggler=frame["file"] == (slowest["file"] if slowest else None))
