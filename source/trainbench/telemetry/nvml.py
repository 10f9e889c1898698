"""GPU facts from NVML (nvidia-ml-py): names, UUIDs, driver, memory, clocks, power, temperature.

Read-only: nothing here changes a GPU setting. Without NVML (no driver, no GPU) every call returns an empty answer
and the reason, so a CPU machine records "no GPU" rather than failing.
"""

from __future__ import annotations

import os
from typing import Any


def _nvml() -> Any:
    import pynvml  # from nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def _read(call: Any, *args: Any) -> Any:
    """One NVML query; a query the GPU or driver does not support is recorded as None, not an error."""
    try:
        value = call(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        return None
    return value.decode() if isinstance(value, bytes) else value


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    clock = nvml.nvmlDeviceGetClockInfo
    max_clock = nvml.nvmlDeviceGetMaxClockInfo
    memory = _read(nvml.nvmlDeviceGetMemoryInfo, handle)
    power_limit = _read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    power = _read(nvml.nvmlDeviceGetPowerUsage, handle)
    return {
        "index": index,
        "name": _read(nvml.nvmlDeviceGetName, handle),
        "uuid": _read(nvml.nvmlDeviceGetUUID, handle),
        "memory_total_mib": memory.total // 2**20 if memory else None,
        "sm_clock_mhz": _read(clock, handle, nvml.NVML_CLOCK_SM),
        "memory_clock_mhz": _read(clock, handle, nvml.NVML_CLOCK_MEM),
        "sm_clock_max_mhz": _read(max_clock, handle, nvml.NVML_CLOCK_SM),
        "memory_clock_max_mhz": _read(max_clock, handle, nvml.NVML_CLOCK_MEM),
        "sm_application_clock_mhz": _read(nvml.nvmlDeviceGetApplicationsClock, handle, nvml.NVML_CLOCK_SM),
        "power_limit_w": power_limit / 1000 if power_limit else None,
        "power_w": power / 1000 if power is not None else None,
        "temperature_c": _read(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        "performance_state": _read(nvml.nvmlDeviceGetPerformanceState, handle),
        "persistence_mode": _read(nvml.nvmlDeviceGetPersistenceMode, handle),
        "compute_capability": ".".join(map(str, _read(nvml.nvmlDeviceGetCudaComputeCapability, handle) or ())),
    }


def gpu_report() -> dict[str, Any]:
    """{"driver", "cuda_driver", "gpus": [...]} or {"gpus": [], "unavailable": reason}."""
    try:
        nvml = _nvml()
    except Exception as error:  # noqa: BLE001 - no library, no driver: a CPU machine
        return {"gpus": [], "unavailable": f"NVML: {error}"}
    try:
        cuda = _read(nvml.nvmlSystemGetCudaDriverVersion)
        return {
            "driver": _read(nvml.nvmlSystemGetDriverVersion),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "gpus": [_gpu(nvml, index) for index in range(nvml.nvmlDeviceGetCount())],
        }
    finally:
        nvml.nvmlShutdown()


def gpu_state() -> list[dict[str, Any]]:
    """Clocks, power and temperature of every GPU now: read right after a timed window, they show the state the
    measurement ran in (throttling, boost), unlike the idle values read before a run."""
    keys = ("index", "sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c", "performance_state")
    return [{key: gpu[key] for key in keys} for gpu in gpu_report()["gpus"]]


def visible_gpu_count() -> int:
    """GPUs a CUDA program here would see: NVML's count, narrowed by CUDA_VISIBLE_DEVICES when it is set."""
    count = len(gpu_report()["gpus"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return count
    entries = [entry for entry in visible.split(",") if entry.strip()]
    # CUDA stops at the first invalid entry, "-1" included.
    valid = 0
    for entry in entries:
        if entry.strip().startswith("-"):
            break
        valid += 1
    return min(count, valid)
