"""The environment record (env.json) written with every run."""

from __future__ import annotations

import datetime as dt
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trainbench
from trainbench.telemetry.nvml import gpu_report


def suite_commit() -> str | None:
    """The git commit of the suite's source, with '-dirty' when it has uncommitted changes."""
    here = Path(trainbench.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_env(argv: list[str], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything a reader needs to reproduce or judge a number; framework versions are added by the workers.
    ``environ``: the variables the measuring processes run with (this process's by default)."""
    environ = os.environ if environ is None else environ
    return {
        "trainbench_version": trainbench.__version__,
        "suite_commit": suite_commit(),
        "command": argv,
        "time_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu": gpu_report(),
    }
