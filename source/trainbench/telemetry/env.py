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


def _cpuinfo_fields(cpuinfo: str | None) -> dict[str, str]:
    """The first CPU's fields of /proc/cpuinfo (or of the text given); empty where it cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(cpuinfo: str | None = None) -> str:
    return _cpuinfo_fields(cpuinfo).get("model name") or platform.processor() or platform.machine()


def cpu_class(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family, model and widest vector extension (from /proc/cpuinfo unless given):
    two 'AMD EPYC' machines of other generations differ in speed and in floating-point order (AVX-512 or not),
    which a test's or a run's reader needs to tell apart."""
    fields = _cpuinfo_fields(cpuinfo)
    flags = set(fields.get("flags", "").split())
    vector = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")) if flag in flags),
                  "no AVX")
    generation = f"family {fields['cpu family']} model {fields['model']}" if "cpu family" in fields else ""
    name = fields.get("model name") or platform.processor() or platform.machine()
    return ", ".join(part for part in (name, generation, vector if flags else "") if part)


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
        "cpu_class": cpu_class(),  # the model name alone is one for CPUs of other generations and vector widths
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu": gpu_report(),
    }
