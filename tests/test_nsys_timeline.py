"""Timeline analysis of Nsight Systems SQLite exports, on exports built by hand with the real table layout."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trainbench.analysis.timeline import (
    WindowChoice,
    analysis_window,
    kernels,
    memory_ops,
    merged_busy_ns,
    open_export,
    parse_window,
    step_gpu_time,
    step_ranges,
    summarize,
    top_kernels,
)
from trainbench.errors import UsageError

# Column layout of nsys 2024 exports (every column, so the queries meet the width and names of the real thing).
SCHEMA = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
        "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
        "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
        "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
        "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
        "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
        "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, "
        "migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
        "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
        "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT"
    ),
}

# nsys serialises ids as flag bits, then a 24-bit pid, then a 24-bit tid; globalPid has the tid bits zero.
TRAIN_PID = (1 << 48) | (4242 << 24)
OTHER_PID = (1 << 48) | (5000 << 24)
MAIN_TID = TRAIN_PID | 4242
AUTOGRAD_TID = TRAIN_PID | 4250
OTHER_TID = OTHER_PID | 5000

STRINGS = {
    1: "void gemm_kernel<float>(Params)", 2: "gemm_kernel",
    3: "void relu_kernel(float*)", 4: "relu_kernel",
    5: "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)", 6: "nccl_short",
    10: "step:1", 11: "cudaLaunchKernel_v7000",
}
GEMM, RELU, NCCL = (1, 2), (3, 4), (5, 6)
MISSING_DEMANGLED = (99, 6)  # demangledName with no string: the short name stands in

# (start, end, stream, correlationId, globalPid, (demangledName, shortName)); launch: (start, correlationId, globalTid).
KERNELS = [
    (500, 700, 7, 1, TRAIN_PID, RELU),  # K0 warm-up, before the window
    (950, 1100, 7, 2, TRAIN_PID, RELU),  # K1 straddles the window start (launched before step 0)
    (1100, 1200, 7, 3, TRAIN_PID, GEMM),  # K2 step 0
    (1150, 1300, 13, 4, TRAIN_PID, GEMM),  # K3 step 0, overlaps K2 on another stream
    (1450, 1620, 21, 5, TRAIN_PID, RELU),  # K4 step 0 by its launch, though it runs beside step 1's kernels
    (1500, 1600, 7, 6, TRAIN_PID, GEMM),  # K5 step 1 (autograd thread)
    (1550, 1650, 13, 7, TRAIN_PID, RELU),  # K6 step 1
    (1700, 1750, 20, 5, OTHER_PID, MISSING_DEMANGLED),  # K8 other process reusing correlationId 5, no step
    (1900, 2030, 7, 8, TRAIN_PID, NCCL),  # K7 step 1, runs after its CPU range closed
]
LAUNCHES = [
    (450, 1, MAIN_TID), (940, 2, MAIN_TID), (1010, 3, MAIN_TID), (1020, 4, MAIN_TID), (1390, 5, MAIN_TID),
    (1410, 6, AUTOGRAD_TID), (1420, 7, AUTOGRAD_TID), (1790, 8, MAIN_TID), (100, 5, OTHER_TID),
]
# (start, end, eventType, text, textId)
NVTX = [
    (900, 2100, 59, "epoch:0", None),
    (1000, 1400, 59, "step:0", None),
    (1020, 1100, 59, "forward", None),
    (1400, 1800, 59, None, 10),  # step:1 through StringIds
    (1800, 1850, 60, "step:2", None),  # a start/end range
    (1500, None, 34, "step:9", None),  # a mark, not a range
    (1600, 1700, 59, "step:2x", None),
    (2000, None, 59, "step:3", None),  # never closed
]
# (start, end, stream, bytes)
MEMCPYS = [(100, 200, 20, 7), (800, 1020, 20, 500), (1050, 1150, 20, 4096), (1120, 1200, 21, 1000)]
MEMSETS = [(1300, 1340, 7, 256), (2050, 2100, 7, 128)]


def _create(conn: sqlite3.Connection, table: str) -> None:
    conn.execute(f"CREATE TABLE {table} ({SCHEMA[table]})")


def _insert(conn: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    for row in rows:
        names = ", ".join(f'"{name}"' for name in row)
        conn.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def _kernel_row(start: int, end: int, stream: int, correlation: int, pid: int, names: tuple[int, int]) -> dict:
    return {"start": start, "end": end, "deviceId": 0, "contextId": 1, "streamId": stream,
            "correlationId": correlation, "globalPid": pid, "demangledName": names[0], "shortName": names[1],
            "registersPerThread": 32, "gridX": 80, "gridY": 1, "gridZ": 1, "blockX": 256, "blockY": 1, "blockZ": 1,
            "staticSharedMemory": 0, "dynamicSharedMemory": 0, "localMemoryPerThread": 0, "localMemoryTotal": 0,
            "gridId": correlation, "launchType": 0}


def _memory_row(start: int, end: int, stream: int, size: int) -> dict:
    return {"start": start, "end": end, "deviceId": 0, "contextId": 1, "streamId": stream, "correlationId": 0,
            "globalPid": TRAIN_PID, "bytes": size}


def build_export(path: Path, *, kernel_rows: list[tuple] | None = KERNELS, launches: list[tuple] | None = LAUNCHES,
                 nvtx: list[tuple] | None = NVTX, memcpys: list[tuple] | None = MEMCPYS,
                 memsets: list[tuple] | None = MEMSETS) -> Path:
    """An export holding the given activity; None leaves the table out, as nsys does when there was none."""
    with sqlite3.connect(path) as conn:
        _create(conn, "StringIds")
        _insert(conn, "StringIds", [{"id": key, "value": value} for key, value in STRINGS.items()])
        if kernel_rows is not None:
            _create(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
            _insert(conn, "CUPTI_ACTIVITY_KIND_KERNEL", [_kernel_row(*row) for row in kernel_rows])
        if launches is not None:
            _create(conn, "CUPTI_ACTIVITY_KIND_RUNTIME")
            _insert(conn, "CUPTI_ACTIVITY_KIND_RUNTIME", [
                {"start": start, "end": start + 5, "eventClass": 1, "globalTid": tid, "correlationId": correlation,
                 "nameId": 11, "returnValue": 0} for start, correlation, tid in launches])
        if nvtx is not None:
            _create(conn, "NVTX_EVENTS")
            _insert(conn, "NVTX_EVENTS", [
                {"start": start, "end": end, "eventType": kind, "text": text, "textId": text_id, "globalTid": MAIN_TID}
                for start, end, kind, text, text_id in nvtx])
        if memcpys is not None:
            _create(conn, "CUPTI_ACTIVITY_KIND_MEMCPY")
            _insert(conn, "CUPTI_ACTIVITY_KIND_MEMCPY",
                    [{**_memory_row(*row), "copyKind": 1, "srcKind": 1, "dstKind": 2} for row in memcpys])
        if memsets is not None:
            _create(conn, "CUPTI_ACTIVITY_KIND_MEMSET")
            _insert(conn, "CUPTI_ACTIVITY_KIND_MEMSET", [{**_memory_row(*row), "value": 0} for row in memsets])
    conn.close()
    return path


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return build_export(tmp_path / "train.sqlite")


def intervals(*pairs: tuple[int, int]) -> pd.DataFrame:
    return pd.DataFrame(pairs, columns=["start", "end"])


# --- merged_busy_ns --------------------------------------------------------------------------------------------

def test_overlapping_streams_count_once() -> None:
    assert merged_busy_ns(intervals((0, 100), (50, 150)), 0, 1000) == 150


def test_intervals_are_clipped_to_the_window() -> None:
    # [-50, 30) and [20, 60) merge to [0, 60) inside the window; [90, 200) keeps [90, 100).
    assert merged_busy_ns(intervals((90, 200), (-50, 30), (20, 60)), 0, 100) == 70
    assert merged_busy_ns(intervals((0, 10), (200, 300)), 50, 150) == 0
    assert merged_busy_ns(intervals(), 0, 100) == 0


def test_nested_interval_adds_nothing() -> None:
    assert merged_busy_ns(intervals((0, 100), (10, 20), (30, 40), (120, 130)), 0, 1000) == 110


def _reference_union(pairs: np.ndarray, window_start: int, window_end: int) -> int:
    total, current_start, current_end = 0, None, None
    for start, end in sorted((max(s, window_start), min(e, window_end)) for s, e in pairs):
        if end <= start:
            continue
        if current_end is None or start > current_end:
            total += 0 if current_end is None else current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return total + (0 if current_end is None else current_end - current_start)


@pytest.mark.parametrize("window", [(0, 100_000), (20_000, 70_000), (-5_000, 10_000)])
def test_vectorised_merge_matches_a_loop(window: tuple[int, int]) -> None:
    rng = np.random.default_rng(1234)
    starts = rng.integers(0, 100_000, size=400)
    pairs = np.column_stack([starts, starts + rng.integers(0, 3_000, size=400)])
    frame = pd.DataFrame(pairs, columns=["start", "end"])
    expected = _reference_union(pairs, *window)
    assert expected > 0
    assert merged_busy_ns(frame, *window) == expected


# --- tables -------------------------------------------------------------------------------------------------

def test_kernels_names_and_durations(export: Path) -> None:
    with closing(open_export(export)) as conn:
        frame = kernels(conn)
    assert list(frame.columns) == ["start", "end", "duration_ns", "device", "stream", "name"]
    assert frame["start"].tolist() == sorted(row[0] for row in KERNELS)
    assert frame["duration_ns"].tolist() == [200, 150, 100, 150, 170, 100, 100, 50, 130]
    assert frame["stream"].tolist() == [7, 7, 7, 13, 21, 7, 13, 20, 7]
    assert frame["name"].iloc[2] == "void gemm_kernel<float>(Params)"
    assert frame["name"].iloc[7] == "nccl_short"  # demangledName 99 is no string
    assert frame["name"].iloc[8].startswith("ncclDevKernel_AllReduce")


def test_memory_ops_of_both_kinds(export: Path) -> None:
    with closing(open_export(export)) as conn:
        frame = memory_ops(conn)
    assert list(frame.columns) == ["start", "end", "duration_ns", "device", "stream", "kind", "bytes"]
    assert frame["start"].tolist() == [100, 800, 1050, 1120, 1300, 2050]
    assert frame["kind"].tolist() == ["memcpy"] * 4 + ["memset"] * 2
    assert frame["bytes"].tolist() == [7, 500, 4096, 1000, 256, 128]
    assert frame["duration_ns"].tolist() == [100, 220, 100, 80, 40, 50]


def test_missing_memset_table_means_no_memsets(tmp_path: Path) -> None:
    path = build_export(tmp_path / "nomemset.sqlite", memsets=None)
    with closing(open_export(path)) as conn:
        frame = memory_ops(conn)
        window = analysis_window(conn)
    assert frame["kind"].tolist() == ["memcpy"] * 4
    assert window == (1000, 2030)  # without the late memset the last kernel ends the window
    summary = summarize(path)
    assert summary["memset_ns"] == 0
    assert summary["window_ns"] == 1030


def test_step_ranges_from_text_and_text_id(export: Path) -> None:
    with closing(open_export(export)) as conn:
        frame = step_ranges(conn)
    # Not steps: epoch:0, forward, the step:9 mark, step:2x, the never-closed step:3.
    assert frame.to_dict("list") == {"step": [0, 1, 2], "start": [1000, 1400, 1800], "end": [1400, 1800, 1850]}
    assert frame["step"].dtype == np.int64


def test_window_runs_from_first_step_to_last_gpu_work(export: Path) -> None:
    with closing(open_export(export)) as conn:
        assert analysis_window(conn) == (1000, 2100)  # the memset at [2050, 2100) is the last GPU work


def test_window_without_steps_is_the_gpu_activity(tmp_path: Path) -> None:
    path = build_export(tmp_path / "nonvtx.sqlite", nvtx=None)
    with closing(open_export(path)) as conn:
        assert analysis_window(conn) == (100, 2100)
        assert step_ranges(conn).empty
        assert step_gpu_time(conn).empty


# --- steps --------------------------------------------------------------------------------------------------

def test_kernels_belong_to_the_step_that_launched_them(export: Path) -> None:
    with closing(open_export(export)) as conn:
        frame = step_gpu_time(conn)
    # step 0: K2 [1100,1200) + K3 [1150,1300) union 200, K4 [1450,1620) 170 (launched at 1390, in step 0).
    # step 1: K5 [1500,1600) + K6 [1550,1650) union 150 (K4's overlap is step 0's), K7 [1900,2030) 130.
    # The other process's K8 shares correlationId 5 with K4 but was launched at 100: in no step.
    assert frame.to_dict("list") == {"step": [0, 1, 2], "gpu_busy_ns": [370, 280, 0], "kernels": [3, 3, 0]}


def test_without_runtime_table_kernel_start_decides(tmp_path: Path) -> None:
    path = build_export(tmp_path / "noruntime.sqlite", launches=None)
    with closing(open_export(path)) as conn:
        frame = step_gpu_time(conn)
    # step 0 [1000,1400): K2, K3. step 1 [1400,1800): K4, K5, K6 ([1450,1650) = 200) and K8 (50). K7 at 1900: none.
    assert frame.to_dict("list") == {"step": [0, 1, 2], "gpu_busy_ns": [200, 250, 0], "kernels": [2, 4, 0]}


def test_top_kernels_in_the_window(export: Path) -> None:
    with closing(open_export(export)) as conn:
        frame = top_kernels(conn, n=3)
    # Cut to [1000, 2100): relu 100 (K1 cut) + 170 + 100 (K0 outside), gemm 100+150+100, nccl 130, nccl_short 50.
    assert list(frame.columns) == ["name", "total_ns", "instances", "mean_ns", "share"]
    assert frame["name"].tolist() == ["void relu_kernel(float*)", "void gemm_kernel<float>(Params)", STRINGS[5]]
    assert frame["total_ns"].tolist() == [370, 350, 130]
    assert frame["instances"].tolist() == [3, 3, 1]
    assert frame["mean_ns"].tolist() == pytest.approx([370 / 3, 350 / 3, 130])
    assert frame["share"].tolist() == pytest.approx([370 / 900, 350 / 900, 130 / 900])


# --- summary ------------------------------------------------------------------------------------------------

def test_summary_of_a_training_window(export: Path) -> None:
    summary = summarize(export)
    assert json.loads(json.dumps(summary)) == summary
    # Kernel union in [1000, 2100): [1000,1300) 300 + [1450,1650) 200 + [1700,1750) 50 + [1900,2030) 130.
    assert summary["window_ns"] == 1100
    assert summary["gpu_busy_ns"] == 680
    assert summary["gpu_busy_fraction"] == pytest.approx(680 / 1100)
    assert summary["kernel_ns_sum"] == 900
    assert summary["kernels"] == 8
    # memcpy: [800,1020) cut to [1000,1020) 20, [1050,1150) + [1120,1200) union 150; [100,200) outside.
    assert summary["memcpy_ns"] == 170
    assert summary["memcpy_bytes"] == 500 + 4096 + 1000
    assert summary["memset_ns"] == 90
    assert summary["steps"] == 3
    assert summary["step_gpu_ms"] == pytest.approx([370e-6, 280e-6, 0.0])
    assert summary["step_gpu_ms_median"] == pytest.approx(280e-6)
    assert [row["name"] for row in summary["top_kernels"]] == [STRINGS[3], STRINGS[1], STRINGS[5], "nccl_short"]
    assert summary["top_kernels"][3] == {"name": "nccl_short", "total_ns": 50, "instances": 1, "mean_ns": 50.0,
                                         "share": pytest.approx(50 / 900)}


def test_summary_of_two_overlapping_streams(tmp_path: Path) -> None:
    rows = [(0, 100, 7, 1, TRAIN_PID, GEMM), (50, 150, 13, 2, TRAIN_PID, RELU)]
    path = build_export(tmp_path / "two.sqlite", kernel_rows=rows, launches=None, nvtx=None, memcpys=None,
                        memsets=None)
    summary = summarize(path)
    assert (summary["window_ns"], summary["gpu_busy_ns"], summary["kernel_ns_sum"]) == (150, 150, 200)
    assert summary["gpu_busy_fraction"] == 1.0
    assert (summary["steps"], summary["step_gpu_ms"], summary["step_gpu_ms_median"]) == (0, [], None)
    assert (summary["memcpy_ns"], summary["memcpy_bytes"]) == (0, 0)


# --- bad input ----------------------------------------------------------------------------------------------

def test_not_sqlite_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "report.nsys-rep"
    path.write_bytes(b"QDSTRM\x00" + bytes(range(256)) * 8)
    with pytest.raises(UsageError, match="not an SQLite database") as caught:
        open_export(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert "\n" not in str(caught.value)


def test_missing_kernel_table_is_a_usage_error(tmp_path: Path) -> None:
    path = build_export(tmp_path / "cpuonly.sqlite", kernel_rows=None)
    with pytest.raises(UsageError, match="no CUPTI_ACTIVITY_KIND_KERNEL table") as caught:
        summarize(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite"
    with pytest.raises(UsageError, match="no such file") as caught:
        open_export(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert not path.exists()


def test_export_is_opened_read_only(tmp_path: Path) -> None:
    # Characters that mean something in a URI must still name the file.
    path = build_export(tmp_path / "run #1 ?50%.sqlite")
    conn = open_export(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
        assert len(kernels(conn)) == len(KERNELS)
    finally:
        conn.close()


# --- rows no profiler writes ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("table", "changes", "fragment"), [
    ("kernel_rows", {2: (1200, 1100, 7, 3, TRAIN_PID, GEMM)},
     "CUPTI_ACTIVITY_KIND_KERNEL rowid 3: end 1100 is before start 1200"),
    ("kernel_rows", {2: (1200, 1100, 7, 3, TRAIN_PID, GEMM), 5: (1600, 1500, 7, 6, TRAIN_PID, GEMM)},
     "CUPTI_ACTIVITY_KIND_KERNEL rowid 3: end 1100 is before start 1200 (1 more such row)"),
    ("memcpys", {1: (1020, 800, 20, 500)}, "CUPTI_ACTIVITY_KIND_MEMCPY rowid 2: end 800 is before start 1020"),
    ("memsets", {0: (1340, 1300, 7, 256)}, "CUPTI_ACTIVITY_KIND_MEMSET rowid 1: end 1300 is before start 1340"),
    ("nvtx", {1: (1400, 1000, 59, "step:0", None)}, "NVTX_EVENTS rowid 2: end 1000 is before start 1400"),
])
def test_an_interval_that_ends_before_it_starts_is_refused_naming_the_row(
        tmp_path: Path, table: str, changes: dict[int, tuple], fragment: str) -> None:
    rows = list({"kernel_rows": KERNELS, "memcpys": MEMCPYS, "memsets": MEMSETS, "nvtx": NVTX}[table])
    for index, row in changes.items():
        rows[index] = row
    path = build_export(tmp_path / "edited.sqlite", **{table: rows})
    with pytest.raises(UsageError) as caught:
        summarize(path)
    assert str(caught.value).startswith(f"{path}: {fragment}")
    assert "damaged or was edited" in str(caught.value)


def test_an_open_range_and_a_mark_are_not_impossible(export: Path) -> None:
    # NVTX's step:3 has no end (left open) and step:9 is a mark: neither is a fault, as before.
    assert summarize(export)["steps"] == 3


# --- windows that miss the GPU's work -----------------------------------------------------------------------

@pytest.mark.parametrize(("bounds", "fragments"), [
    ((0, 50), ["--window 0:50 lies outside the capture (before the first recorded event",
               "its events span [100, 2100) ns"]),
    ((5000, 9000), ["--window 5000:9000 lies outside the capture (after the last recorded event"]),
    ((250, 450), ["--window 250:450 holds no kernel, memcpy or memset time",
                  "the capture's GPU activity spans [100, 2100) ns"]),
])
def test_a_window_without_gpu_activity_is_refused(export: Path, bounds: tuple[int, int],
                                                  fragments: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        summarize(export, window=WindowChoice(bounds=bounds))
    assert str(caught.value).startswith(f"{export}: ")
    assert all(fragment in str(caught.value) for fragment in fragments), str(caught.value)


def test_an_nvtx_window_without_gpu_activity_is_refused(tmp_path: Path) -> None:
    nvtx = [*NVTX, (300, 450, 59, "data loading", None)]  # a CPU-only range between the first copy and K0
    path = build_export(tmp_path / "loader.sqlite", nvtx=nvtx)
    with pytest.raises(UsageError, match=r"--window nvtx:data loading \[300, 450\) ns holds no kernel"):
        summarize(path, window=WindowChoice(nvtx_name="data loading"))


def test_a_window_reaching_past_the_capture_is_cut_to_it(export: Path) -> None:
    summary = summarize(export, window=WindowChoice(bounds=(0, 10**15)))
    # The busy time is over what was recorded, [100, 2100), not over a petasecond nobody watched.
    assert summary["window"] == {"start_ns": 100, "end_ns": 2100, "from": "given", "requested_ns": [0, 10**15]}
    assert summary["window_ns"] == 2000
    whole = summarize(export, window=WindowChoice(bounds=(100, 2100)))
    assert "requested_ns" not in whole["window"]
    assert summary["gpu_busy_fraction"] == whole["gpu_busy_fraction"] > 0


def test_a_window_bound_past_int64_is_refused() -> None:
    with pytest.raises(UsageError, match="END must be below 2"):
        parse_window(f"0:{2**63}")
    assert parse_window(f"0:{2**63 - 1}").bounds == (0, 2**63 - 1)
