"""What every profiler offers the profiling run: checks, the command wrapped around a worker, post-processing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol

from trainbench.errors import UsageError
from trainbench.profile.gpu_target import GpuTarget


class Profiler(Protocol):
    name: str
    summary_fields: tuple[str, ...]  # columns of summary.csv after batch_size and status
    plot_fields: tuple[tuple[str, str], ...]  # (figure line label, summary field) against batch size; () no figure
    plot_ylabel: str

    def prepare(self, gpu: GpuTarget | None, log_dir: Path) -> None:
        """Check that this profiler can run here (binary, GPU generation) and choose its settings; UsageError if not."""

    def command(self, run_dir: Path, batch_size: int) -> list[str]:
        """The profiler's command line, to which the worker's own command is appended ([] for in-process ones)."""

    def analyze(self, run_dir: Path, batch_size: int) -> dict[str, Any]:
        """Post-process one batch size's output into its summary row; UsageError naming the file if unreadable."""

    def explain_failure(self, text: str) -> str | None:
        """A whole-run failure recognised in the profiler's output (e.g. no counter permission), else None."""


def find_binary(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"{name}: not found on PATH ({hint})")
    return path


PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
PERMISSION_HELP = (
    "the profiler may not read the GPU performance counters (ERR_NVGPUCTRPERM). Either run the container with "
    "--cap-add SYS_ADMIN (bash start_container.sh --profile DIR does), or let every user read them on the host: "
    "put 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/nvidia-profiling.conf and reload "
    "the driver (see https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


def counter_permission_failure(text: str) -> str | None:
    """ncu and nvprof both report a refused counter access as ERR_NVGPUCTRPERM."""
    return PERMISSION_HELP if PERMISSION_ERROR in text else None
