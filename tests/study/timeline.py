"""``trainbench timeline`` under bad, odd and hostile input: windows outside a capture, in its gaps or past its end,
rows no profiler writes, and the options a careful new user or a hostile tester would try.

The exports are copies of the real public captures in tests/fixtures/nsys with one value edited, and exports built
with the real table layout by tests/test_nsys_timeline.py's builder (GPU activity [100, 2100) ns).
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.conftest import REPO
from tests.study import StudyCase
from tests.test_nsys_timeline import NVTX, TRAIN_PID, build_export

FIXTURES = REPO / "tests" / "fixtures" / "nsys"
FARAZ = "nsys_2025.3_gtx1650_faraz_matmul_nvtx.sqlite"  # 1 kernel, 3 copies, NVTX ranges; nsys 2025.3
MEMSETS = "nsys_2021_rtx6000_bwyogatama_memsets.sqlite"  # 12 kernels, 48 copies, 12 memsets; 2021
MANY = "nsys_2021_v100_lockfuehrer_omp_2419kernels.sqlite"
GAP = "1490800000:1490900000"  # in FARAZ, between the first copy's end and the second's start: nothing on the GPU


def _edited(world: Path, source: str, name: str, *statements: str) -> None:
    """A copy of a real export with the given SQL run on it (one value edited, as a damaged or hostile file)."""
    target = world / name
    shutil.copyfile(FIXTURES / source, target)
    with closing(sqlite3.connect(target)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()


def _untyped(path: Path, kernels: list[tuple]) -> None:
    """An export whose kernel columns have no type: SQLite keeps whatever a file holds (NULL, text, a fraction)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO StringIds VALUES (1, 'void gemm_kernel<float>(Params)')")
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, demangledName)")
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?)", kernels)
        conn.commit()


def build(world: Path) -> None:
    shutil.copyfile(FIXTURES / FARAZ, world / "faraz.sqlite")
    build_export(world / "train.sqlite")
    build_export(world / "loader.sqlite", nvtx=[*NVTX, (300, 450, 59, "data loading", None)])
    build_export(world / "late.sqlite", kernel_rows=[(5100, 5300, 7, 1, TRAIN_PID, (1, 2))], launches=None,
                 nvtx=[(0, 1000, 59, "step:0", None), (1000, 2000, 59, "step:1", None)], memcpys=None, memsets=None)
    build_export(world / "instant.sqlite", kernel_rows=[(100, 100, 7, 1, TRAIN_PID, (1, 2)),
                                                        (200, 200, 7, 2, TRAIN_PID, (1, 2))],
                 launches=None, nvtx=None, memcpys=None, memsets=None)
    _edited(world, FARAZ, "kernel_backwards.sqlite", 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1')
    _edited(world, MEMSETS, "memcpy_backwards.sqlite",
            'UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET "end" = start - 500 WHERE rowid = 7')
    _edited(world, MEMSETS, "memset_backwards.sqlite",
            'UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET "end" = start - 1 WHERE rowid IN (3, 4, 5)')
    _edited(world, FARAZ, "nvtx_backwards.sqlite",
            "UPDATE NVTX_EVENTS SET \"end\" = start - 10 WHERE rowid = (SELECT MIN(rowid) FROM NVTX_EVENTS "
            "WHERE eventType IN (59, 60))")
    _edited(world, MANY, "one_in_thousands.sqlite",
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1 WHERE rowid = 2000')
    _edited(world, MEMSETS, "kernel_null_end.sqlite",
            "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",  # untyped copy: NULL allowed
            "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL",
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = NULL WHERE rowid = 4')
    _untyped(world / "text_start.sqlite", [(100, 300, 1), ("12:00:01", 1500, 1)])
    _untyped(world / "fraction_end.sqlite", [(100, 300.5, 1)])
    (world / "cut.sqlite").write_bytes((FIXTURES / FARAZ).read_bytes()[:4096])


def _timeline(*args: str) -> tuple[str, ...]:
    return ("timeline", *args)


FAR = "9000000000000000000:9000000000000000001"

CASES: list[StudyCase] = [
    # windows that hold no GPU work: refused, never "GPU busy 0.00 %"
    StudyCase("a window before a real capture", _timeline("{w}/faraz.sqlite", "--window", "0:1000"),
              ("{w}/faraz.sqlite", "--window 0:1000 lies outside the capture", "before the first recorded event",
               "its events span ["), kind="silent-wrong"),
    StudyCase("a window absurdly far after a real capture", _timeline("{w}/faraz.sqlite", "--window", FAR),
              ("{w}/faraz.sqlite", f"--window {FAR} lies outside the capture", "after the last recorded event"),
              kind="silent-wrong"),
    StudyCase("a window far after, as JSON", _timeline("{w}/faraz.sqlite", "--json", "--window", FAR),
              ("lies outside the capture",), kind="silent-wrong"),
    StudyCase("a window in a gap of a real capture", _timeline("{w}/faraz.sqlite", "--window", GAP),
              (f"--window {GAP} holds no kernel, memcpy or memset time",
               "the capture's GPU activity spans [1489664547, 1503604097) ns"), kind="silent-wrong"),
    StudyCase("an nvtx window over CPU-only work", _timeline("{w}/loader.sqlite", "--window", "nvtx:data loading"),
              ("{w}/loader.sqlite", "--window nvtx:data loading [300, 450) ns holds no kernel, memcpy or memset"),
              kind="silent-wrong"),
    StudyCase("steps whose GPU work ran elsewhere", _timeline("{w}/late.sqlite", "--window", "0:2000"),
              ("{w}/late.sqlite", "--window 0:2000 holds no kernel", "spans [5100, 5300) ns"), kind="silent-wrong"),
    StudyCase("kernels of no duration: no window to measure", _timeline("{w}/instant.sqlite"),
              ("{w}/instant.sqlite", "the window from GPU activity [100, 200) ns holds no kernel, memcpy or memset "
               "time"), kind="silent-wrong"),
    StudyCase("of two ranks, the one the window misses costs its line", _timeline(
        "{w}/train.sqlite", "{w}/late.sqlite", "--window", "1000:2000"),
              ("{w}/late.sqlite: --window 1000:2000 holds no kernel",), kind="silent-wrong"),
    StudyCase("a window past the capture's end is cut to it and says so",
              _timeline("{w}/faraz.sqlite", "--window", "1492000000:1000000000000000000"),
              ("cut from the requested [1492000000, 1000000000000000000) ns to the capture's recorded events",
               "1 kernel"), exit=0, kind="silent-wrong"),
    StudyCase("a window from 0 over the whole capture is cut, not diluted",
              _timeline("{w}/train.sqlite", "--window", "0:100000000000"),
              ("window:      2.000 us, [100, 2100) ns, from given, cut from the requested",),
              absent=("0.00%",), exit=0, kind="silent-wrong"),
    StudyCase("a window exactly on the capture is not cut", _timeline("{w}/train.sqlite", "--window", "100:2100"),
              ("[100, 2100) ns, from given\n",), absent=("cut from",), exit=0, kind="silent-wrong"),
    StudyCase("a window with copies and no kernel: a real 0 % busy, copies counted",
              _timeline("{w}/faraz.sqlite", "--window", "1489664547:1490000000"),
              ("GPU busy:    0.00%", "0 kernels", "in 1 copy"), exit=0, kind="silent-wrong"),
    StudyCase("a window bound past int64", _timeline("{w}/faraz.sqlite", "--window", f"0:{2**63}"),
              ("--window", "END must be below 2^63 ns"), kind="traceback"),
    StudyCase("a window of 20-digit numbers", _timeline("{w}/faraz.sqlite", "--window",
                                                        "99999999999999999999:999999999999999999999"),
              ("--window", "END must be below 2^63 ns"), kind="traceback"),
    # rows no profiler writes: one line naming the file, the table and the row
    StudyCase("a real kernel that ends before it starts", _timeline("{w}/kernel_backwards.sqlite"),
              ("{w}/kernel_backwards.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL rowid 1",
               "end 1492732413 is before start 1492732414", "damaged or was edited"), absent=("0 kernels",),
              kind="silent-wrong"),
    StudyCase("a real copy that ends before it starts", _timeline("{w}/memcpy_backwards.sqlite"),
              ("{w}/memcpy_backwards.sqlite", "CUPTI_ACTIVITY_KIND_MEMCPY rowid 7", "is before start"),
              kind="silent-wrong"),
    StudyCase("three real memsets that end before they start", _timeline("{w}/memset_backwards.sqlite"),
              ("CUPTI_ACTIVITY_KIND_MEMSET rowid 3", "(2 more such rows)"), kind="silent-wrong"),
    StudyCase("a real NVTX range that ends before it starts", _timeline("{w}/nvtx_backwards.sqlite"),
              ("{w}/nvtx_backwards.sqlite", "NVTX_EVENTS rowid", "is before start"), kind="silent-wrong"),
    StudyCase("the same, asked through the range", _timeline("{w}/nvtx_backwards.sqlite", "--window",
                                                             "nvtx:Kernel Execution"),
              ("NVTX_EVENTS rowid",), kind="silent-wrong"),
    StudyCase("one backwards kernel among 2,419", _timeline("{w}/one_in_thousands.sqlite"),
              ("CUPTI_ACTIVITY_KIND_KERNEL rowid 2000", "is before start"), absent=("more such",),
              kind="silent-wrong"),
    StudyCase("a kernel with no end", _timeline("{w}/kernel_null_end.sqlite"),
              ("CUPTI_ACTIVITY_KIND_KERNEL rowid 4: end is missing (NULL)",), kind="traceback"),
    StudyCase("a kernel starting at a clock time", _timeline("{w}/text_start.sqlite"),
              ("CUPTI_ACTIVITY_KIND_KERNEL rowid 2: start is '12:00:01', not a whole number of ns",),
              kind="traceback"),
    StudyCase("a kernel ending at a fraction of a ns", _timeline("{w}/fraction_end.sqlite"),
              ("CUPTI_ACTIVITY_KIND_KERNEL rowid 1: end is 300.5, not a whole number of ns",), kind="traceback"),
    StudyCase("a bad export beside a good one: the good one is still reported",
              _timeline("{w}/faraz.sqlite", "{w}/kernel_backwards.sqlite"),
              ("{w}/kernel_backwards.sqlite: CUPTI_ACTIVITY_KIND_KERNEL rowid 1",), kind="silent-wrong"),
    # a careful new user, a hostile tester
    StudyCase("a window given in seconds", _timeline("{w}/faraz.sqlite", "--window", "1.4:1.5"),
              ("--window", "expected nvtx:NAME or START:END in ns", "'1.4:1.5'"), kind="bad-option"),
    StudyCase("a window in scientific notation", _timeline("{w}/faraz.sqlite", "--window", "1e9:2e9"),
              ("--window", "expected nvtx:NAME or START:END in ns"), kind="bad-option"),
    StudyCase("a window backwards", _timeline("{w}/faraz.sqlite", "--window", "2000:1000"),
              ("--window", "START must be below END"), kind="bad-option"),
    StudyCase("a window of no length", _timeline("{w}/faraz.sqlite", "--window", "1492732414:1492732414"),
              ("--window", "START must be below END"), kind="bad-option"),
    StudyCase("a negative window start", _timeline("{w}/faraz.sqlite", "--window=-5:10"),
              ("--window", "'-5:10'"), kind="bad-option"),
    StudyCase("an nvtx window that names no range", _timeline("{w}/faraz.sqlite", "--window", "nvtx:step:0"),
              ("{w}/faraz.sqlite", "no closed NVTX range named 'step:0'", "'Kernel Execution'"), kind="bad-option"),
    StudyCase("a range pattern that is no regex", _timeline("{w}/faraz.sqlite", "--range", "step:(\\d+"),
              ("--range", "not a regular expression"), kind="bad-option"),
    StudyCase("the same file twice", _timeline("{w}/faraz.sqlite", "{w}/faraz.sqlite"),
              ("given more than once", "{w}/faraz.sqlite"), kind="bad-option"),
    StudyCase("a truncated real export", _timeline("{w}/cut.sqlite"), ("{w}/cut.sqlite", "truncated"),
              kind="traceback"),
    StudyCase("a folder instead of an export", _timeline("{w}"), ("{w}", "not a file"), kind="bad-option"),
    StudyCase("a huge --top lists what there is", _timeline("{w}/train.sqlite", "--top", "1000000000"),
              ("top kernels:", "nccl_short"), exit=0, kind="resources"),
]
