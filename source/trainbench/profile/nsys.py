"""Nsight Systems: a timeline of the window only, exported to SQLite and reduced to the GPU's busy fraction.

The older suite read nvvp timelines by hand to get a compute utilization; here ``analysis.timeline`` computes it
from the export (kernel intervals clipped to the window and merged across streams).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from trainbench.errors import UsageError, os_reason
from trainbench.profile.gpu_target import GpuTarget
from trainbench.profile.tools import find_binary
from trainbench.results.files import write_json_atomic
from trainbench.results.layout import NSYS_TIMELINE, batch_file
from trainbench.results.records import unstamped

TRACES = "cuda,nvtx,cudnn,cublas"
# Every kernel of a CUDA graph's replay as a kernel of its own: nsys's default ("graph") records a replay as one
# graph activity and no kernel, and analysis.timeline reads kernels only. Always, not only for --cuda-graph and
# --compile reduce-overhead|max-autotune: XLA (TensorFlow's --xla) and libraries may replay graphs of their own,
# and a run without graphs traces the same either way.
CUDA_GRAPH_TRACE = "--cuda-graph-trace=node"
EXPORT_TIMEOUT_S = 1800  # a report of a whole training run can take minutes to export
TIMELINE_SUFFIX = NSYS_TIMELINE  # batch_<X>.timeline.json: analysis.timeline.summarize of that batch size


def missing_report(report: Path) -> str:
    raw = report.with_suffix(".qdstrm")
    if raw.exists():
        # Seen on an H100 with the nsys that ships inside Nsight Compute's folder: it captures but cannot import.
        return (f"{raw}: nsys captured the window but could not turn it into a report (its QdstrmImporter is "
                "missing or failed: use a full Nsight Systems install, e.g. the trainbench image's nsys)")
    return f"{report}: nsys wrote no report (did the worker reach cudaProfilerStart? see the log)"


def export_sqlite(binary: str, report: Path, database: Path) -> Path:
    """``nsys export --type sqlite`` of ``report`` into ``database`` with the nsys at ``binary``; UsageError naming
    the report with nsys' last line when it fails."""
    command = [binary, "export", "--type", "sqlite", "--output", str(database), str(report)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{report}: nsys export took more than {EXPORT_TIMEOUT_S} s; stopped") from None
    except OSError as error:  # the binary went away or cannot run
        raise UsageError(f"{report}: cannot run {binary}: {os_reason(error)}") from None
    if result.returncode != 0 or not database.exists():
        lines = (result.stdout + result.stderr).strip().splitlines()
        raise UsageError(f"{report}: nsys export failed ({lines[-1] if lines else f'exit {result.returncode}'})")
    return database


def read_timeline_summary(run_dir: Path, batch_size: int) -> dict[str, Any] | None:
    """A batch size's timeline summary as ``Nsys.analyze`` wrote it (top kernels, per-step GPU time...); None when
    absent or unreadable."""
    try:
        summary = json.loads(batch_file(run_dir, batch_size, TIMELINE_SUFFIX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return unstamped(summary) if isinstance(summary, dict) else None


class Nsys:
    name = "nsys"
    summary_fields: tuple[str, ...] = ("gpu_busy_fraction", "window_ms", "steps", "step_gpu_ms_median", "memcpy_ms",
                                       "kernels", "top_kernel")
    plot_fields: tuple[tuple[str, str], ...] = (("GPU busy (kernels merged across streams)", "gpu_busy_fraction"),)
    plot_ylabel = "fraction of the profiled window"

    def __init__(self) -> None:
        self.binary = ""

    def prepare(self, gpu: GpuTarget | None, log_dir: Path) -> None:
        self.binary = find_binary("nsys", "Nsight Systems: in the trainbench image at /usr/local/cuda/bin/nsys")

    def command(self, run_dir: Path, batch_size: int) -> list[str]:
        return [self.binary, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                f"--trace={TRACES}", CUDA_GRAPH_TRACE, "--sample=none", "--cpuctxsw=none", "--force-overwrite=false",
                "--output", str(batch_file(run_dir, batch_size))]

    def export(self, report: Path) -> Path:
        return export_sqlite(self.binary, report, report.with_suffix(".sqlite"))

    def analyze(self, run_dir: Path, batch_size: int) -> dict[str, Any]:
        from trainbench.analysis.timeline import summarize

        report = batch_file(run_dir, batch_size, ".nsys-rep")
        if not report.exists():
            raise UsageError(missing_report(report))
        summary = summarize(self.export(report))
        write_json_atomic(batch_file(run_dir, batch_size, TIMELINE_SUFFIX), summary)
        top = summary["top_kernels"]
        return {
            "gpu_busy_fraction": summary["gpu_busy_fraction"],
            "window_ms": summary["window_ns"] / 1e6,
            "steps": summary["steps"],
            "step_gpu_ms_median": summary["step_gpu_ms_median"],
            "memcpy_ms": summary["memcpy_ns"] / 1e6,
            "kernels": summary["kernels"],
            "top_kernel": top[0]["name"][:120] if top else None,
        }

    def explain_failure(self, text: str) -> str | None:
        return None
