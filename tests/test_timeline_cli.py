"""``trainbench timeline``: exports built with the real table layout (tests/test_nsys_timeline.py's builders), the
layouts of older and newer Nsight Systems releases, and real public exports from tests/fixtures/nsys (sources
in its SOURCES.md: Faraz-Nasir/CUDA---Recap, lockfuehrer/beast_ressoruces, lsaeteurn/vectoraddition,
bwyogatama/Mordred-Deprecated, martisu1631998/kmeans-parallel)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli, run_main
from tests.test_nsys_timeline import GEMM, NCCL, STRINGS, TRAIN_PID, build_export
from tests.test_profile_standins import calls, standin_env
from trainbench.analysis.timeline import _literal_prefix

FARAZ = "nsys_2025.3_gtx1650_faraz_matmul_nvtx"
LOCKFUEHRER_22 = "nsys_2021_v100_lockfuehrer_omp_22kernels.sqlite"
LOCKFUEHRER_2419 = "nsys_2021_v100_lockfuehrer_omp_2419kernels.sqlite"
LSAETEURN = "nsys_2022.2_a100_lsaeteurn_vectoradd_unified.sqlite"
BWYOGATAMA = "nsys_2021_rtx6000_bwyogatama_memsets.sqlite"
NO_KERNELS = "nsys_nokernels_martisu_kmeans.sqlite"


def timeline_json(*args: str | Path, env: dict[str, str] | None = None) -> dict:
    result = run_main("timeline", "--json", *map(str, args), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


@pytest.fixture
def nsys_fixtures() -> Path:
    """Real public exports kept in the project (their sources in SOURCES.md beside them)."""
    return REPO / "tests" / "fixtures" / "nsys"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return build_export(tmp_path / "train.sqlite")


# --- on the builders' exports -------------------------------------------------------------------------------

def test_text_report_of_a_training_window(export: Path) -> None:
    result = run_main("timeline", str(export))
    assert result.returncode == 0, result.stderr
    # The numbers of test_nsys_timeline.test_summary_of_a_training_window, as the user reads them.
    assert result.stdout.splitlines() == [
        "export:      Nsight Systems release not recorded",
        "window:      1.100 us, [1000, 2100) ns, from steps",
        "GPU busy:    61.82% (680 ns with kernels merged across streams; 900 ns summed), 8 kernels",
        "             500 ns of it outside NCCL kernels",
        "memcpy:      170 ns, 5.60 kB in 3 copies",
        "memset:      90 ns, 384 B in 2 memsets",
        "steps:       3, GPU time per step: median 280 ns (min 0 ns, max 370 ns)",
        "  step  GPU time  kernels  name",
        "  0     370 ns    3        step:0",
        "  1     280 ns    3        step:1",
        "  2     0 ns      0        step:2",
        "top kernels: share  total   launches  mean    name",
        f"             41.1%  370 ns  3         123 ns  {STRINGS[3]}",
        f"             38.9%  350 ns  3         117 ns  {STRINGS[1]}",
        f"             14.4%  130 ns  1         130 ns  {STRINGS[5]}",
        "             5.6%   50 ns   1         50 ns   nccl_short",
    ]


def test_json_summary_is_the_librarys(export: Path) -> None:
    summary = timeline_json(export, "--top", "2")
    assert summary["file"] == str(export)
    assert (summary["window_ns"], summary["gpu_busy_ns"], summary["kernels"]) == (1100, 680, 8)
    assert summary["window"] == {"start_ns": 1000, "end_ns": 2100, "from": "steps"}
    assert (summary["memcpy_bytes"], summary["memcpys"], summary["memset_bytes"], summary["memsets"]) == (
        5596, 3, 384, 2)
    assert [(step["step"], step["gpu_busy_ns"], step["kernels"]) for step in summary["per_step"]] == [
        (0, 370, 3), (1, 280, 3), (2, 0, 0)]
    # Step 1's NCCL kernel [1900, 2030) is not compute: 280 - 130.
    assert [step["compute_busy_ns"] for step in summary["per_step"]] == [370, 150, 0]
    assert summary["compute_busy_ns"] == 680 - 130 - 50  # both NCCL kernels left out
    assert len(summary["top_kernels"]) == 2


def test_window_of_a_named_nvtx_range(export: Path) -> None:
    summary = timeline_json(export, "--window", "nvtx:epoch:0")
    assert summary["window"] == {"start_ns": 900, "end_ns": 2100, "from": "nvtx:epoch:0"}
    # [950,1300) 350 + [1450,1650) 200 + [1700,1750) 50 + [1900,2030) 130; the warm-up kernel K0 ends at 700.
    assert summary["gpu_busy_ns"] == 730
    assert summary["kernels"] == 8
    assert summary["steps"] == 3


def test_window_in_nanoseconds(export: Path) -> None:
    summary = timeline_json(export, "--window", "1000:1500")
    assert summary["window"] == {"start_ns": 1000, "end_ns": 1500, "from": "given"}
    # [1000,1300) 300 + K4 [1450,1500) 50; K5 starts at 1500, outside.
    assert (summary["window_ns"], summary["gpu_busy_ns"], summary["kernels"]) == (500, 350, 4)
    assert [step["step"] for step in summary["per_step"]] == [0, 1]  # step 2 starts at 1800
    # memcpy [1050,1150) and [1120,1200) merge to 150; [800,1020) adds its last 20; the memset [1300,1340) 40.
    assert (summary["memcpy_ns"], summary["memset_ns"]) == (170, 40)


def test_a_range_pattern_of_the_users_own(tmp_path: Path) -> None:
    nvtx = [(1000, 1400, 59, "train_step 7", None), (1400, 1800, 59, "train_step 8", None),
            (1020, 1100, 59, "Train_step 9", None),  # another case: not a step, though LIKE would let it through
            (1800, 1900, 59, "eval_step 1", None)]
    path = build_export(tmp_path / "timm.sqlite", nvtx=nvtx)
    summary = timeline_json(path, "--range", r"train_step (\d+)")
    assert [(step["step"], step["name"], step["gpu_busy_ns"]) for step in summary["per_step"]] == [
        (7, "train_step 7", 370), (8, "train_step 8", 280)]
    without_group = timeline_json(path, "--range", r".*_step \d")
    assert [(step["step"], step["name"]) for step in without_group["per_step"]] == [
        (0, "train_step 7"), (1, "Train_step 9"), (2, "train_step 8"), (3, "eval_step 1")]


@pytest.mark.parametrize(("pattern", "prefix"), [
    (r"step:(\d+)", "step:"), ("train_step", "train_step"), ("steps?:", "step"), ("ab{2}", "a"),
    ("fwd|bwd", ""), ("(?i)step", ""), (r"step\d", "step"), (".*", ""), ("epoch:0", "epoch:0"),
])
def test_literal_prefix_narrows_without_losing_a_match(pattern: str, prefix: str) -> None:
    assert _literal_prefix(pattern) == prefix


# --- several files: one per rank ----------------------------------------------------------------------------

def _rank(path: Path, compute: list[tuple[int, int]], collective: list[tuple[int, int]]) -> Path:
    kernels = [(start, end, 7, i, TRAIN_PID, GEMM) for i, (start, end) in enumerate(compute)]
    kernels += [(start, end, 9, 100 + i, TRAIN_PID, NCCL) for i, (start, end) in enumerate(collective)]
    nvtx = [(0, 1000, 59, "step:0", None), (1000, 2000, 59, "step:1", None)]
    return build_export(path, kernel_rows=kernels, launches=None, nvtx=nvtx, memcpys=None, memsets=None)


@pytest.fixture
def ranks(tmp_path: Path) -> tuple[Path, Path]:
    # Rank 1 computes 700 ns a step, rank 0 200 ns and then waits in the all-reduce: both are busy 800 ns a step.
    fast = _rank(tmp_path / "rank0.sqlite", [(100, 300), (1100, 1300)], [(300, 900), (1300, 1900)])
    slow = _rank(tmp_path / "rank1.sqlite", [(100, 800), (1100, 1800)], [(800, 900), (1800, 1900)])
    return fast, slow


def test_the_straggler_is_the_rank_that_computes_longest(ranks: tuple[Path, Path]) -> None:
    fast, slow = ranks
    document = timeline_json(fast, slow)
    assert [summary["file"] for summary in document["files"]] == [str(fast), str(slow)]
    rows = document["side_by_side"]
    assert [row["step_gpu_ms_median"] for row in rows] == pytest.approx([800e-6, 800e-6])
    assert [row["step_compute_ms_median"] for row in rows] == pytest.approx([200e-6, 700e-6])
    assert [row["straggler"] for row in rows] == [False, True]
    straggler = document["straggler"]
    assert straggler["file"] == str(slow) and straggler["fastest_file"] == str(fast)
    assert straggler["basis"].startswith("median GPU time per step")
    assert straggler["over_fastest"] == pytest.approx(2.5)


def test_side_by_side_text_names_the_straggler(ranks: tuple[Path, Path]) -> None:
    fast, slow = ranks
    result = run_main("timeline", str(fast), str(slow))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index(f"==> {fast} <==") < out.index(f"==> {slow} <==") < out.index("==> side by side <==")
    table = out.split("==> side by side <==\n")[1].splitlines()
    assert table[0].split()[:4] == ["file", "GPU", "busy", "busy"]
    assert table[1].split() == [str(fast), "80.00%", "1.600", "us", "400", "ns", "2", "800", "ns", "200", "ns", "4",
                                "0", "ns"]
    assert table[2].split()[:8] == [str(slow), "80.00%", "1.600", "us", "1.400", "us", "2", "800"]
    assert table[3] == (f"straggler: {slow} (median GPU time per step, NCCL kernels left out: 700 ns, 250.0% above "
                        f"the fastest, {fast} at 200 ns)")


def test_a_bad_file_among_several_costs_its_line_and_exit_2(ranks: tuple[Path, Path], tmp_path: Path) -> None:
    fast, _ = ranks
    notes = tmp_path / "notes.sqlite"
    notes.write_text("not a database\n")
    result = run_main("timeline", str(fast), str(notes))
    assert_one_line_error(result, f"timeline: {notes}: not an SQLite database")
    assert f"==> {fast} <==" in result.stdout
    assert "side by side" not in result.stdout  # one rank left: nothing to compare


# --- releases: what changed in the layout -------------------------------------------------------------------

def _layout(path: Path, tables: dict[str, tuple[str, list[tuple]]]) -> Path:
    """An export with exactly these tables: name -> (column definitions, rows)."""
    with sqlite3.connect(path) as conn:
        for name, (definition, rows) in tables.items():
            conn.execute(f"CREATE TABLE {name} ({definition})")
            if rows:
                conn.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    conn.close()
    return path


STRING_ROWS = [(1, "void gemm_kernel<float>(Params)"), (2, "step:0"), (3, "step:1")]
STRINGS_TABLE = ("id INTEGER PRIMARY KEY, value TEXT NOT NULL", STRING_ROWS)
# The fewest kernel columns: no globalPid, correlationId, deviceId, streamId, shortName or mangledName.
BARE_KERNELS = ("start INTEGER NOT NULL, end INTEGER NOT NULL, demangledName INTEGER NOT NULL",
                [(100, 300, 1), (1200, 1500, 1)])


def test_oldest_layout_with_nvtx_text_only(tmp_path: Path) -> None:
    path = _layout(tmp_path / "old.sqlite", {
        "StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": BARE_KERNELS,
        "NVTX_EVENTS": ("start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT",
                        [(0, 1000, 59, "step:0"), (1000, 2000, 59, "step:1")]),
        "TARGET_INFO_CUDA_GPU": ("name TEXT NOT NULL, deviceId INTEGER NOT NULL", [("Tesla V100-PCIE-32GB", 0)]),
    })
    summary = timeline_json(path)
    assert [(step["step"], step["gpu_busy_ns"]) for step in summary["per_step"]] == [(0, 200), (1, 300)]
    assert (summary["nsys_version"], summary["gpus"]) == (None, ["Tesla V100-PCIE-32GB"])
    assert summary["top_kernels"][0]["name"] == "void gemm_kernel<float>(Params)"


def test_newer_layout_with_nvtx_names_as_string_ids(tmp_path: Path) -> None:
    path = _layout(tmp_path / "new.sqlite", {
        "StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": BARE_KERNELS,
        "NVTX_EVENTS": ("start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, textId INTEGER",
                        [(0, 1000, 59, 2), (1000, 2000, 60, 3)]),
        "META_DATA_EXPORT": ("name TEXT, value TEXT", [("EXPORT_PRODUCT_VERSION", "2025.5.1.121")]),
        "TARGET_INFO_GPU": ("id INTEGER, name TEXT", [(0, "NVIDIA H100 80GB HBM3"), (1, "Microsoft Basic Render")]),
    })
    summary = timeline_json(path)
    assert [(step["step"], step["gpu_busy_ns"]) for step in summary["per_step"]] == [(0, 200), (1, 300)]
    assert (summary["nsys_version"], summary["gpus"]) == ("2025.5.1.121", ["NVIDIA H100 80GB HBM3"])


@pytest.mark.parametrize(("tables", "fragments"), [
    ({"StringIds": STRINGS_TABLE,
      "CUPTI_ACTIVITY_KIND_KERNEL": ("start INTEGER, duration INTEGER, demangledName INTEGER", [(1, 2, 1)])},
     ["CUPTI_ACTIVITY_KIND_KERNEL has no end column"]),
    ({"StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": ("start INTEGER, end INTEGER", [(1, 2)])},
     ["CUPTI_ACTIVITY_KIND_KERNEL has none of the name columns demangledName, shortName, mangledName"]),
    ({"StringTable": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": BARE_KERNELS},
     ["no StringIds table", "CUPTI_ACTIVITY_KIND_KERNEL.demangledName"]),
    ({"StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": BARE_KERNELS,
      "NVTX_EVENTS": ("start INTEGER, end INTEGER, eventType INTEGER, message TEXT", [(0, 9, 59, "step:0")])},
     ["NVTX_EVENTS has neither a text nor a textId column"]),
    ({"StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": BARE_KERNELS,
      "CUPTI_ACTIVITY_KIND_MEMCPY": ("start INTEGER, end INTEGER, deviceId INTEGER", [(0, 9, 0)])},
     ["CUPTI_ACTIVITY_KIND_MEMCPY has no bytes column"]),
    ({"StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": (BARE_KERNELS[0], [])},
     ["CUPTI_ACTIVITY_KIND_KERNEL is empty"]),
    ({"runs": ("id INTEGER, samples_per_sec REAL", [(1, 812.5)])}, ["not an Nsight Systems export"]),
])
def test_a_layout_without_what_is_needed_is_refused_naming_it(tmp_path: Path, tables: dict,
                                                              fragments: list[str]) -> None:
    path = _layout(tmp_path / "odd.sqlite", tables)
    result = run_main("timeline", str(path))
    assert_one_line_error(result, f"trainbench: timeline: {path}: ", *fragments)
    assert result.stdout == ""


# --- real public exports ------------------------------------------------------------------------------------

def test_real_2025_export_with_nvtx_ranges(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / f"{FARAZ}.sqlite"
    summary = timeline_json(path)
    assert (summary["nsys_version"], summary["gpus"]) == ("2025.3.2.474", ["NVIDIA GeForce GTX 1650"])
    # One kernel [1492732414, 1502664953); the window runs from the first copy's start to the last copy's end.
    assert summary["window"] == {"start_ns": 1489664547, "end_ns": 1503604097, "from": "GPU activity"}
    assert (summary["gpu_busy_ns"], summary["kernels"]) == (9_932_539, 1)
    assert summary["gpu_busy_fraction"] == pytest.approx(9_932_539 / 13_939_550)
    assert (summary["memcpys"], summary["memcpy_bytes"], summary["memsets"]) == (3, 3 * 4_194_304, 0)
    assert summary["steps"] == 0  # its ranges are named otherwise
    assert summary["top_kernels"] == [{"name": "matrixMulKernel(float *, float *, float *, int)",
                                       "total_ns": 9_932_539, "instances": 1, "mean_ns": 9_932_539.0, "share": 1.0}]


def test_real_export_window_of_its_kernel_range(nsys_fixtures: Path) -> None:
    summary = timeline_json(nsys_fixtures / f"{FARAZ}.sqlite", "--window", "nvtx:Kernel Execution")
    assert summary["window"] == {"start_ns": 1491436581, "end_ns": 1502686112, "from": "nvtx:Kernel Execution"}
    assert summary["gpu_busy_ns"] == 9_932_539
    # The second host-to-device copy, issued in "Memory Copy H2D", is still running when the range opens.
    assert (summary["memcpys"], summary["memcpy_ns"]) == (1, 1_492_288_730 - 1_491_436_581)


def test_real_export_ranges_as_steps(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / f"{FARAZ}.sqlite"
    result = run_main("timeline", str(path), "--range", r"Memory Copy (?:H2D|D2H)|Kernel Execution")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "window:      15.067 ms, [1488814325, 1503881554) ns, from steps"
    # The kernel belongs to the range its launch call (cudaLaunchKernel, joined on correlationId) ran in.
    assert lines[lines.index("  step  GPU time  kernels  name") + 1:][:3] == [
        "  0     0 ns      0        Memory Copy H2D",
        "  1     9.933 ms  1        Kernel Execution",
        "  2     0 ns      0        Memory Copy D2H"]
    missing = run_main("timeline", str(path), "--window", "nvtx:step:0")
    assert_one_line_error(missing, "no closed NVTX range named 'step:0'", "'Kernel Execution'", "and 1 more")


def _union_by_hand(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        intervals = sorted(conn.execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL'))
    conn.close()
    total, current_start, current_end = 0, *intervals[0]
    for start, end in intervals[1:]:
        if start > current_end:
            total, current_start, current_end = total + current_end - current_start, start, end
        else:
            current_end = max(current_end, end)
    return total + current_end - current_start


def test_real_2021_export_of_thousands_of_kernels(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / LOCKFUEHRER_2419
    summary = timeline_json(path)
    assert (summary["nsys_version"], summary["gpus"]) == (None, ["Tesla V100-PCIE-32GB"])
    assert summary["kernels"] == 2419
    assert summary["gpu_busy_ns"] == _union_by_hand(path)
    assert [(kernel["instances"], kernel["name"]) for kernel in summary["top_kernels"]] == [
        (2404, "__omp_offloading_31_18a80bc__Z_2..."), (15, "__omp_offloading_31_18a80bc__Z_1...")]


def test_real_exports_side_by_side(nsys_fixtures: Path) -> None:
    short, long = nsys_fixtures / LOCKFUEHRER_22, nsys_fixtures / LOCKFUEHRER_2419
    document = timeline_json(short, long)
    straggler = document["straggler"]
    assert straggler["basis"].startswith("GPU busy time")  # no steps in these captures
    assert (straggler["file"], straggler["fastest_file"]) == (str(short), str(long))
    assert straggler["ms"] == pytest.approx(_union_by_hand(short) / 1e6)


def test_real_2022_export_of_unified_memory(nsys_fixtures: Path) -> None:
    summary = timeline_json(nsys_fixtures / LSAETEURN)
    assert (summary["nsys_version"], summary["gpus"]) == ("2022.2.1.31", ["NVIDIA A100-SXM4-40GB"])
    assert (summary["kernels"], summary["memcpys"], summary["memcpy_bytes"]) == (1, 1792, 805_306_368)


def test_real_export_with_memsets(nsys_fixtures: Path) -> None:
    summary = timeline_json(nsys_fixtures / BWYOGATAMA)
    assert (summary["kernels"], summary["memsets"], summary["memset_bytes"]) == (12, 12, 21_651_120)
    assert (summary["memcpys"], summary["memcpy_bytes"]) == (48, 630_162)


# --- refusals: one line, exit 2 -----------------------------------------------------------------------------

def test_real_export_without_kernels(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / NO_KERNELS
    assert_one_line_error(run_main("timeline", str(path)), f"{path}: no CUPTI_ACTIVITY_KIND_KERNEL table",
                          "nsys -t cuda")


@pytest.mark.parametrize("size", [50, 4096, 100_000, 274_431])
def test_truncated_real_export(nsys_fixtures: Path, tmp_path: Path, size: int) -> None:
    truncated = tmp_path / "cut.sqlite"
    truncated.write_bytes((nsys_fixtures / f"{FARAZ}.sqlite").read_bytes()[:size])
    assert_one_line_error(run_main("timeline", str(truncated)), f"{truncated}: truncated: ")


def test_a_profiler_csv_is_not_an_export(shared_fixtures: Path) -> None:
    path = shared_fixtures / "ncu" / "ncu_details_a100_gardenia_gemm.csv"
    assert_one_line_error(run_main("timeline", str(path)), f"{path}: not an SQLite database",
                          "nsys export --type sqlite")


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert_one_line_error(run_main("timeline", str(empty)), f"{empty}: empty file")
    assert_one_line_error(run_main("timeline", str(tmp_path / "absent.sqlite")), "absent.sqlite: no such file")


def test_report_without_nsys_on_path(nsys_fixtures: Path, tmp_path: Path) -> None:
    report = nsys_fixtures / f"{FARAZ}.nsys-rep"
    result = run_main("timeline", str(report), env={"PATH": str(tmp_path)})
    assert_one_line_error(result, f"{report}: an Nsight Systems report", "needs nsys on PATH")
    # Known by its first bytes under any name.
    renamed = tmp_path / "capture.bin"
    renamed.write_bytes(report.read_bytes())
    assert_one_line_error(run_main("timeline", str(renamed), env={"PATH": str(tmp_path)}), "needs nsys on PATH")


def test_report_is_exported_by_the_nsys_on_path(tmp_path: Path) -> None:
    # The stand-in nsys exports its own reports (JSON naming the steps) to the layout of tests/standins/nsys.
    report = tmp_path / "capture.nsys-rep"
    report.write_text(json.dumps({"standin": "nsys", "steps": [4, 5, 6]}))
    summary = timeline_json(report, env=standin_env(tmp_path, ("nsys",)))
    (export,) = calls(tmp_path, "nsys")
    assert export[:4] == ["export", "--type", "sqlite", "--output"] and export[5] == str(report)
    assert not Path(export[4]).exists()  # exported into a temporary folder, not beside the user's report
    assert [step["step"] for step in summary["per_step"]] == [4, 5, 6]
    assert (summary["gpu_busy_ns"], summary["window_ns"]) == (1950, 3000)


def test_a_failed_export_is_one_line(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    nsys = tools / "nsys"
    nsys.write_text("#!/bin/sh\necho 'Importing [====     ]' ; echo 'ERROR: the report is damaged' >&2; exit 1\n")
    nsys.chmod(0o755)
    report = tmp_path / "capture.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report 2025@3@2@474" + bytes(64))
    result = run_main("timeline", str(report), env={"PATH": str(tools)})
    assert_one_line_error(result, f"{report}: nsys export failed (ERROR: the report is damaged)")


@pytest.mark.parametrize(("args", "fragments"), [
    (["--window", "soon"], ["timeline: argument --window:", "expected nvtx:NAME or START:END in ns", "'soon'"]),
    (["--window", "500:500"], ["--window", "START must be below END"]),
    (["--window=-5:10"], ["--window", "expected nvtx:NAME or START:END", "'-5:10'"]),
    (["--window", "nvtx:"], ["--window", "needs the name of a range"]),
    (["--range", "step:(\\d+"], ["timeline: argument --range:", "not a regular expression"]),
    (["--top", "-1"], ["--top"]),
])
def test_bad_options_are_one_line(export: Path, args: list[str], fragments: list[str]) -> None:
    assert_one_line_error(run_main("timeline", str(export), *args), *fragments)


def test_a_file_given_twice_is_refused(export: Path) -> None:
    assert_one_line_error(run_main("timeline", str(export), str(export)), "given more than once", str(export))


def test_help_lists_the_command() -> None:
    result = run_cli("--help")  # one case in a real process
    assert result.returncode == 0
    assert "timeline" in result.stdout


# --- numbers that would look like measurements and are not: refused -----------------------------------------

@pytest.mark.parametrize(("rows", "fragment"), [
    ([(100, 300, 1), (1500, 1200, 1)], "CUPTI_ACTIVITY_KIND_KERNEL rowid 2: end 1200 is before start 1500"),
    ([(100, 300, 1), ("12:00", 1500, 1)], "CUPTI_ACTIVITY_KIND_KERNEL rowid 2: start is '12:00', not a whole number"),
    ([(100, None, 1), (1200, 1500, 1)], "CUPTI_ACTIVITY_KIND_KERNEL rowid 1: end is missing (NULL)"),
    ([(100, 300.5, 1)], "CUPTI_ACTIVITY_KIND_KERNEL rowid 1: end is 300.5, not a whole number"),
])
def test_an_impossible_kernel_row_is_one_line_naming_file_table_and_row(tmp_path: Path, rows: list[tuple],
                                                                         fragment: str) -> None:
    # Untyped columns keep what was written, as a hand-edited or damaged file may.
    path = _layout(tmp_path / "edited.sqlite", {
        "StringIds": STRINGS_TABLE, "CUPTI_ACTIVITY_KIND_KERNEL": ("start, end, demangledName", rows)})
    result = run_main("timeline", str(path))
    assert_one_line_error(result, f"trainbench: timeline: {path}: {fragment}")
    assert result.stdout == ""


def test_a_window_outside_a_real_capture_is_one_line(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / f"{FARAZ}.sqlite"
    before = run_main("timeline", str(path), "--window", "0:1000")
    assert_one_line_error(before, f"{path}: --window 0:1000 lies outside the capture (before the first recorded "
                          "event; its events span [")
    assert before.stdout == ""
    after = run_main("timeline", str(path), "--json", "--window", "9000000000000000000:9000000000000000001")
    assert_one_line_error(after, "lies outside the capture (after the last recorded event")
    # Between the first host-to-device copy's end and the second's start nothing ran on the GPU.
    gap = run_main("timeline", str(path), "--window", "1490800000:1490900000")
    assert_one_line_error(gap, "--window 1490800000:1490900000 holds no kernel, memcpy or memset time",
                          "the capture's GPU activity spans [1489664547, 1503604097) ns")


def test_a_window_past_the_capture_is_cut_and_says_so(nsys_fixtures: Path) -> None:
    path = nsys_fixtures / f"{FARAZ}.sqlite"
    result = run_main("timeline", str(path), "--window", f"1492000000:{10**18}")
    assert result.returncode == 0, result.stderr
    window = result.stdout.splitlines()[1]
    assert window.startswith("window:      ") and window.endswith(
        f"from given, cut from the requested [1492000000, {10**18}) ns to the capture's recorded events")
    summary = timeline_json(path, "--window", f"1492000000:{10**18}")
    assert summary["window"]["requested_ns"] == [1492000000, 10**18]
    assert summary["gpu_busy_ns"] == 9_932_539 and summary["gpu_busy_fraction"] > 0.1


def test_one_file_whose_window_misses_is_left_out_of_the_comparison(ranks: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    fast, _ = ranks
    late = _rank(tmp_path / "late.sqlite", [(5100, 5300)], [])  # its kernel runs long after both steps
    result = run_main("timeline", str(fast), str(late), "--window", "0:2000")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"trainbench: timeline: {late}: --window 0:2000 holds no kernel, memcpy or memset time (the capture's GPU "
        "activity spans [5100, 5300) ns); choose a window that overlaps it"]
    assert f"==> {fast} <==" in result.stdout and "side by side" not in result.stdout
