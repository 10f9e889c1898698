"""The results table printed after a sweep or a profile, and the PNG figure against batch size.

The ok rows are the statistics trainbench.bench.stats computes from timed steps, as a sweep's workers record them.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainbench.bench.stats import summarize, summarize_windows
from trainbench.bench.timing import Window
from trainbench.render.console import (
    COLUMNS,
    INPUT_COLUMNS,
    WINDOW_COLUMNS,
    aligned,
    format_fields,
    format_table,
    workload_title,
)
from trainbench.render.plot import batch_size_figure, plot_against_batch_size, plot_throughput

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
OOM_MESSAGE = "CUDA out of memory. Tried to allocate 1.53 GiB"


def ok(batch: int, step_s: tuple[float, ...] = (0.10, 0.12, 0.11, 0.13), windows: int = 1,
       **extra: Any) -> dict[str, Any]:
    window = Window(warmup_s=(1.0,), step_s=step_s, window_s=sum(step_s))
    summary = summarize(batch, window) if windows == 1 else summarize_windows(batch, [window] * windows)
    return {"batch_size": batch, "status": "ok", **summary, **extra, "error": None}


def failed(batch: int, status: str, error: str) -> dict[str, Any]:
    return {"batch_size": batch, "status": status, "error": error}


def cell_at(header: str, row: str, column: str, width: int) -> str:
    """The text of ``row`` under ``column``: columns are right-aligned, so a cell ends where its header ends."""
    end = header.index(column) + len(column)
    return row[end - width:end]


# --- format_table


def table_lines(results: list[dict[str, Any]]) -> list[str]:
    """The table's lines without the trust flags' (these results' windows are short: see the trust line's test)."""
    return [line for line in format_table(results).splitlines() if " trust: " not in line]


def test_table_of_ok_results_shows_their_statistics() -> None:
    results = [ok(4), ok(8, (0.2, 0.2, 0.3, 0.25, 0.25))]
    lines = table_lines(results)
    assert len(lines) == 1 + len(results)  # header and one line per batch size, no failures below
    header = lines[0]
    assert [c.strip() for c in header.split("  ") if c.strip()] == list(COLUMNS)
    for line, result in zip(lines[1:], results, strict=True):
        expected = {
            "batch": str(result["batch_size"]),
            "status": "ok",
            "samples/s": f"{result['samples_per_sec']:.2f}",
            "step median ms": f"{result['step_time_median_s'] * 1000:.2f}",
            "p10 ms": f"{result['step_time_p10_s'] * 1000:.2f}",
            "p90 ms": f"{result['step_time_p90_s'] * 1000:.2f}",
            "MAD ms": f"{result['step_time_mad_s'] * 1000:.2f}",
            "steps": str(result["timed_steps"]),
        }
        for column, text in expected.items():
            assert cell_at(header, line, column, len(text)) == text, column
    # 4 images per step, 4 steps in 0.46 s; 8 images per step, 5 steps in 1.2 s with a median step of 0.25 s
    assert cell_at(header, lines[1], "samples/s", 5) == "34.78"
    assert cell_at(header, lines[2], "samples/s", 5) == "33.33"
    assert cell_at(header, lines[2], "step median ms", 6) == "250.00"


def test_table_lists_failed_batch_sizes_with_their_status_and_error() -> None:
    results = [ok(1), ok(2), failed(4, "oom", OOM_MESSAGE), failed(8, "error", "worker killed by SIGSEGV"),
               failed(16, "interrupted", "interrupted by the user")]
    lines = table_lines(results)
    table, notes = lines[:6], lines[6:]
    assert notes == [f"batch 4 oom: {OOM_MESSAGE}", "batch 8 error: worker killed by SIGSEGV",
                     "batch 16 interrupted: interrupted by the user"]
    header = table[0]
    for line, result in zip(table[3:], results[2:], strict=True):
        cells = line.split()
        assert cells == [str(result["batch_size"]), result["status"]]  # no numbers for a failed batch size
        assert cell_at(header, line, "status", len(result["status"])) == result["status"]
    assert len({len(line) for line in table}) == 1  # every row padded to the full width


def test_table_of_only_failures_still_has_a_header_and_every_error() -> None:
    results = [failed(64, "oom", OOM_MESSAGE), failed(128, "oom", OOM_MESSAGE + " (again)")]
    lines = table_lines(results)
    assert [line.split() for line in lines[1:3]] == [["64", "oom"], ["128", "oom"]]
    assert lines[3:] == [f"batch 64 oom: {OOM_MESSAGE}", f"batch 128 oom: {OOM_MESSAGE} (again)"]


def test_table_columns_are_right_aligned_two_spaces_apart() -> None:
    lines = table_lines([ok(1), ok(1024, (1.5, 1.6, 1.7, 1.8))])
    assert len({len(line) for line in lines}) == 1
    assert lines[1].split()[0] == "1" and lines[2].split()[0] == "1024"
    assert lines[1].index("1") == lines[2].index("1024") + 3  # "1" right-aligned under "1024" and "batch"
    assert lines[0].startswith("batch  ")


def test_input_columns_appear_only_for_runs_on_real_data() -> None:
    synthetic = table_lines([ok(2), failed(4, "oom", OOM_MESSAGE)])
    assert not any(column in synthetic[0] for column in INPUT_COLUMNS)
    results = [ok(2, input_samples_per_sec=250.0, input_bound=False), ok(4, input_samples_per_sec=30.125,
                                                                          input_bound=True),
               ok(8, input_samples_per_sec=None, input_bound=None), failed(16, "oom", OOM_MESSAGE)]
    lines = table_lines(results)
    header = lines[0]
    assert header.endswith("input samples/s  input-bound")
    assert cell_at(header, lines[1], "input samples/s", 6) == "250.00"
    assert lines[1].endswith(" no")
    assert cell_at(header, lines[2], "input samples/s", 5) == "30.12"
    assert lines[2].endswith(" yes")
    assert cell_at(header, lines[3], "input samples/s", len("input samples/s")).strip() == ""
    assert lines[3].strip().endswith(str(results[2]["timed_steps"]))  # unknown input rate and bound: blank cells
    assert lines[4].split() == ["16", "oom"]


def test_window_columns_appear_only_with_repeats() -> None:
    single = table_lines([ok(2), ok(4)])[0]
    assert not any(column in single for column in WINDOW_COLUMNS)
    fast, slow = ok(2, (0.1, 0.1)), ok(2, (0.2, 0.2))
    repeated = ok(2, (0.1, 0.1), windows=3, samples_per_sec_min=slow["samples_per_sec"],
                  samples_per_sec_max=fast["samples_per_sec"])
    lines = table_lines([repeated, ok(4), failed(8, "oom", OOM_MESSAGE)])
    header = lines[0]
    assert header.endswith("windows  min samples/s  max samples/s  CV %  spread %")
    assert cell_at(header, lines[1], "spread %", 4) == "0.00"  # three equal windows
    assert cell_at(header, lines[1], "windows", 1) == "3"
    assert cell_at(header, lines[1], "min samples/s", 5) == f"{slow['samples_per_sec']:.2f}" == "10.00"
    assert cell_at(header, lines[1], "max samples/s", 5) == f"{fast['samples_per_sec']:.2f}" == "20.00"
    assert cell_at(header, lines[2], "windows", 1) == "1"  # a single window among repeated ones


def test_trust_flags_follow_the_table_and_the_failures() -> None:
    steady = ok(4, (2.5, 2.5, 2.5))  # one 7.5 s window on a quiet machine: nothing to say
    busy = ok(8, (2.5, 2.5, 2.5), other_cpu_cores=1.25, load_average=3.1)
    short = ok(16)  # 0.46 s
    lines = format_table([steady, busy, short, failed(32, "oom", OOM_MESSAGE)]).splitlines()
    assert lines[5:] == [
        f"batch 32 oom: {OOM_MESSAGE}",
        "batch 8 trust: machine busy: processes outside this run kept 1.25 cores busy "
        "during the windows (limit 0.5); load average 3.1",
        "batch 16 trust: windows of 0.46 s, under the 5 s minimum: time more steps (--steps)"]


# --- format_fields and aligned


def test_fields_table_formats_numbers_blanks_and_long_text() -> None:
    results = [
        {"batch_size": 2, "status": "ok", "gpu_busy_fraction": 0.91234, "kernels": 153, "top_kernel": "k" * 60,
         "error": None},
        {"batch_size": 4, "status": "ok", "gpu_busy_fraction": None, "kernels": 160, "top_kernel": "gemm",
         "error": None},
        failed(8, "error", "nsys exited with status 1"),
    ]
    fields = ["batch_size", "status", "gpu_busy_fraction", "kernels", "top_kernel"]
    lines = format_fields(results, fields, width=20).splitlines()
    header = lines[0]
    assert header.split() == fields
    assert lines[1].split() == ["2", "ok", "0.91", "153", "k" * 20]  # float to 2 decimals, text cut at the width
    assert cell_at(header, lines[2], "gpu_busy_fraction", len("gpu_busy_fraction")).strip() == ""  # None: blank
    assert lines[2].split() == ["4", "ok", "160", "gemm"]
    assert lines[3].split() == ["8", "error"]
    assert lines[4:] == ["batch 8 error: nsys exited with status 1"]
    assert len({len(line) for line in lines[:4]}) == 1


def test_fields_table_default_width_is_40() -> None:
    lines = format_fields([{"batch_size": 1, "status": "ok", "note": "n" * 100, "error": None}], ["note"])
    assert lines.splitlines()[1] == "n" * 40


def test_aligned_pads_each_column_to_its_widest_cell() -> None:
    assert aligned([("a", "bb", "c"), ("ddd", "e", "")]) == ["  a  bb  c", "ddd   e   "]


# --- the figure


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def red_pixels(path: Path) -> int:
    """Pixels of a red (matplotlib's "tab:red", #d62728, the colour of the failure marks, blended into the white by
    antialiasing): red well above green and blue, which stay equal, unlike the blue and orange of the first lines."""
    import matplotlib.image

    rgb = matplotlib.image.imread(path)[..., :3]
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return int(((red - np.maximum(green, blue) > 0.25) & (np.abs(green - blue) < 0.1)).sum())


def test_throughput_plot_is_a_png_of_the_figure_size(tmp_path: Path) -> None:
    path = tmp_path / "throughput.png"
    plot_throughput({"torch": [ok(1), ok(2), ok(4)], "tf": [ok(1), ok(2, (0.3, 0.3))]}, path, "ResNet-50")
    assert path.stat().st_size > 1000
    assert png_size(path) == (7 * 120, int(4.5 * 120))  # 7 x 4.5 inches at 120 dpi
    assert red_pixels(path) == 0  # nothing failed: no failure marks


def test_failed_batch_sizes_are_marked_on_the_plot(tmp_path: Path) -> None:
    clean, marked = tmp_path / "clean.png", tmp_path / "marked.png"
    plot_throughput({"torch": [ok(1), ok(2), ok(4)]}, clean, "no failures")
    plot_throughput({"torch": [ok(1), ok(2), ok(4), failed(8, "oom", OOM_MESSAGE)]}, marked, "batch 8 oom")
    assert red_pixels(clean) == 0
    assert red_pixels(marked) > 100  # a dotted line across the axes and its "oom" label


def test_a_sweep_where_every_batch_size_failed_still_plots(tmp_path: Path) -> None:
    path = tmp_path / "all_failed.png"
    plot_throughput({"tf": [failed(1, "error", "no GPU"), failed(2, "error", "no GPU")]}, path, "nothing ran")
    assert png_size(path) == (840, 540)
    assert red_pixels(path) > 100


@pytest.mark.parametrize("missing", [None, "absent"])
def test_a_value_the_profile_lacks_is_left_out(tmp_path: Path, missing: str | None) -> None:
    # A profile's summary field can be None (or absent) for a batch size whose trace had no kernels.
    rows = [{"batch_size": 1, "status": "ok", "gpu_busy_fraction": 0.5, "sm_fraction": 0.2, "error": None},
            {"batch_size": 2, "status": "ok", "gpu_busy_fraction": 0.7, "error": None},
            failed(4, "oom", OOM_MESSAGE)]
    if missing is None:
        rows[1]["sm_fraction"] = None
    path = tmp_path / "profile.png"
    lines = {"GPU busy": (rows, "gpu_busy_fraction"), "SM": (rows, "sm_fraction")}
    plot_against_batch_size(lines, path, "profile", "fraction")
    assert png_size(path) == (840, 540)
    assert red_pixels(path) > 100
    # the drawn lines themselves: the lacking value is no point at all (never a 0), the failure no point either
    drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
             for line in batch_size_figure(lines, "profile", "fraction").axes[0].get_lines()
             if not line.get_label().startswith("_")}
    assert drawn == {"GPU busy": ([1, 2], [0.5, 0.7]), "SM": ([1], [0.2])}
    assert batch_size_figure(lines, "p", "f").axes[0].get_xlabel() == "batch size (images per step)"
    assert batch_size_figure(lines, "p", "f", sample_unit="sequence").axes[0].get_xlabel() == \
        "batch size (sequences per step)"  # a sequence workload's batch holds sequences


def test_the_network_is_named_by_its_size() -> None:
    assert workload_title("bert") == workload_title("bert", "full") == "BERT-base"
    assert workload_title("bert", "tiny") == "tiny BERT-base" and workload_title(None) == "ResNet-50"
