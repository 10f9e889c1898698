"""The device and precision rules both engines and the command line share: one rule whichever framework runs,
each engine passing in what its framework sees (its GPU count)."""

from __future__ import annotations

from trainbench.config import DEVICES, Device, ModelConfig, Precision, choice, problems, refuse
from trainbench.errors import UsageError
from trainbench.telemetry.nvml import visible_gpu_count


def resolve_device(requested: str, gpu_count: int, seen_by: str) -> Device:
    """'auto' -> 'cuda' when ``seen_by`` (a framework, the driver) sees a GPU, else 'cpu'; 'cuda' without a GPU and
    an unknown name are UsageErrors."""
    device = choice("device", requested, DEVICES)
    if device == "auto":
        return "cuda" if gpu_count > 0 else "cpu"
    if device == "cuda" and gpu_count <= 0:
        raise UsageError(f"--device cuda: {seen_by} sees no GPU; use --device cpu or auto")
    return device


def resolve_device_here(requested: str) -> Device:
    """The device as the driver offers it on this machine (NVML, after CUDA_VISIBLE_DEVICES), before any framework
    loads: for the command line and for each run of a campaign (on the node it runs on)."""
    gpus = visible_gpu_count() if requested in ("auto", "cuda") else 0  # NVML only where the answer needs it
    return resolve_device(requested, gpus, "the driver (NVML, after CUDA_VISIBLE_DEVICES)")


def check_precision(precision: Precision, device: str) -> None:
    """config.problems' precision rule (fp16 needs a GPU) on the device 'auto' resolved to: ModelConfig judged an
    explicit --device cpu when it was built."""
    refuse(problems(ModelConfig(precision=precision), device=device))
