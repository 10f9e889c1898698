"""The GPU a profiler will run on: its name and compute capability, from NVML, else from nvidia-smi.

NVML or nvidia-smi rather than a framework: both answer without loading CUDA in this process and take the index
(PCI order, as nvidia-smi's ``-i``) or UUID that CUDA_VISIBLE_DEVICES holds. NVML first: nvidia-smi's
``compute_cap`` field is missing from R470-era drivers, the ones on the pre-Ampere hosts nvprof is for, while
``nvmlDeviceGetCudaComputeCapability`` is older. nvidia-smi answers when NVML cannot (a UUID prefix, which CUDA
accepts and NVML does not).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from trainbench.errors import UsageError
from trainbench.telemetry.nvml import nvml_session, read


@dataclass(frozen=True)
class GpuTarget:
    name: str
    compute_capability: tuple[int, int]

    @property
    def cc(self) -> str:
        return ".".join(map(str, self.compute_capability))


def parse_compute_capability(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise UsageError(f"compute capability {text!r} is not of the form MAJOR.MINOR (e.g. 9.0)")
    return int(major), int(minor)


def first_visible_gpu() -> str:
    """The index or UUID of the GPU CUDA programs here use first; UsageError when CUDA_VISIBLE_DEVICES hides all."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return "0"
    first = visible.split(",")[0].strip()
    if not first or first.startswith("-"):
        raise UsageError(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU; profiling needs one "
                         "(e.g. CUDA_VISIBLE_DEVICES=0)")
    return first


def nvml_gpu(gpu: str) -> GpuTarget | None:
    """``gpu`` (an index or a whole UUID) as NVML describes it; None when NVML cannot say (no library or driver,
    an unknown GPU, a query the driver lacks)."""
    try:
        with nvml_session() as nvml:
            handle = (nvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit()
                      else nvml.nvmlDeviceGetHandleByUUID(gpu))
            name = read(nvml.nvmlDeviceGetName, handle)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    except Exception:  # noqa: BLE001 - NVMLError_* and a missing package alike: nvidia-smi is asked instead
        return None
    return GpuTarget(str(name), (int(major), int(minor)))


def query_gpu(tool: str) -> GpuTarget:
    """The first visible GPU, or a UsageError saying why ``tool`` cannot profile here."""
    gpu = first_visible_gpu()
    if (found := nvml_gpu(gpu)) is not None:
        return found
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise UsageError(f"{tool} profiles NVIDIA GPUs, and there is no nvidia-smi here (no NVIDIA driver); "
                         "on the CPU use the torch or tf profiler")
    command = [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader", "-i", gpu]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    line = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
    if result.returncode != 0 or "," not in line:
        problem = (result.stdout + result.stderr).strip().splitlines()
        raise UsageError(f"{tool}: nvidia-smi found no GPU {gpu} ({problem[0] if problem else 'no answer'})")
    name, _, cc = line.rpartition(",")
    return GpuTarget(name.strip(), parse_compute_capability(cc))
