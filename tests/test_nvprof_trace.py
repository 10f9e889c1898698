"""nvprof's CSV GPU trace read into a timeline: real output from a GTX 1080 Ti, and hand-made overlapping rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainbench.analysis.nvprof_trace import read_gpu_trace, summarize_gpu_trace
from trainbench.errors import UsageError

HEADER = '"Start","Duration","Grid X","Device","Context","Stream","Name"'


def test_real_trace_has_its_kernels_and_copies(shared_fixtures: Path) -> None:
    path = shared_fixtures / "ncu" / "nvprof_gputrace_gtx1080ti_magus_matrixMul_ms.csv"
    trace = read_gpu_trace(path)
    assert (trace["kind"] == "kernel").sum() == 301 and (trace["kind"] == "memory").sum() == 3
    first = trace.iloc[0]  # 584.620743 ms, 1.028854 ms: "[CUDA memcpy HtoD]"
    assert (first["start"], first["duration_ns"], first["name"]) == (584620743, 1028854, "[CUDA memcpy HtoD]")
    summary = summarize_gpu_trace(path)
    assert summary["kernels"] == 301 and summary["memory_ops"] == 3
    assert 0 < summary["gpu_busy_fraction"] < 1


def test_overlapping_kernels_are_merged_not_summed(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("==1== Profiling result:\n" + HEADER + "\n" + "us,us,,,,,\n"
                    '0.0,100.0,1,"H (0)","1","7","kernA"\n'
                    '50.0,100.0,1,"H (0)","1","13","kernB"\n'
                    '300.0,100.0,,"H (0)","1","7","[CUDA memcpy DtoH]"\n')
    summary = summarize_gpu_trace(path)
    # Kernels busy [0, 150) us of a trace spanning [0, 400) us; the copy is not compute.
    assert summary["kernels"] == 2 and summary["window_ms"] == pytest.approx(0.4)
    assert summary["gpu_busy_fraction"] == pytest.approx(150 / 400)


@pytest.mark.parametrize(("text", "problem"), [
    ("==1== Warning: no kernels were profiled\n", "no nvprof GPU trace"),
    (HEADER + "\nus,us,,,,,\n", "no rows"),
    (HEADER + "\nfurlong,us,,,,,\n" + '1,1,1,"H","1","7","k"\n', "units row"),
])
def test_unusable_trace_is_one_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=problem) as caught:
        read_gpu_trace(path)
    assert str(caught.value).startswith(str(path))
