"""nvprof: the only profiler of the original suite's era that still exists, for GPUs before compute capability 8.0.

It cannot profile an A100 or anything newer; there, nsys gives the timeline and ncu the pipe utilizations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainbench.analysis.nvprof_trace import summarize_gpu_trace
from trainbench.errors import UsageError
from trainbench.profile.gpu_target import GpuTarget
from trainbench.profile.tools import counter_permission_failure, find_binary
from trainbench.results.layout import batch_file

LAST_SUPPORTED = (8, 0)  # first compute capability nvprof refuses


class Nvprof:
    name = "nvprof"
    summary_fields: tuple[str, ...] = ("kernels", "gpu_busy_fraction", "window_ms", "nvvp", "gpu_trace")
    plot_fields: tuple[tuple[str, str], ...] = (("GPU busy (kernels)", "gpu_busy_fraction"),)
    plot_ylabel = "fraction of the traced time"

    def __init__(self) -> None:
        self.binary = ""

    def prepare(self, gpu: GpuTarget | None, log_dir: Path) -> None:
        assert gpu is not None
        if gpu.compute_capability >= LAST_SUPPORTED:
            raise UsageError(f"nvprof cannot profile compute capability {gpu.cc} ({gpu.name}; it stops before 8.0): "
                             "use 'bash scripts/measure_compute_util.sh nsys' for the timeline, or ncu for the "
                             "pipe utilizations")
        self.binary = find_binary("nvprof", "CUDA 11 or older; CUDA 12 and later ship no nvprof")

    def command(self, run_dir: Path, batch_size: int) -> list[str]:
        stem = batch_file(run_dir, batch_size)
        return [self.binary, "--profile-from-start", "off", "--export-profile", f"{stem}.nvvp",
                "--print-gpu-trace", "--csv", "--log-file", f"{stem}.gputrace.csv"]

    def analyze(self, run_dir: Path, batch_size: int) -> dict[str, Any]:
        nvvp = batch_file(run_dir, batch_size, ".nvvp")
        trace = batch_file(run_dir, batch_size, ".gputrace.csv")
        if not nvvp.exists():
            raise UsageError(f"{nvvp}: nvprof wrote no profile (see the log)")
        summary = summarize_gpu_trace(trace)  # a UsageError naming the file when it holds no trace
        return {"kernels": summary["kernels"], "gpu_busy_fraction": summary["gpu_busy_fraction"],
                "window_ms": summary["window_ms"], "nvvp": nvvp.name, "gpu_trace": trace.name}

    def explain_failure(self, text: str) -> str | None:
        return counter_permission_failure(text)
