"""GPU facts from NVML (nvidia-ml-py): names, UUIDs, driver, memory, clocks, power, temperature.

Read-only: nothing here changes a GPU setting. Without NVML (no driver, no GPU) every call returns an empty answer
and the reason, so a CPU machine records "no GPU" rather than failing; a GPU that NVML cannot reach (lost, fallen
off the bus) is recorded with the reason and the others are still read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


def _nvml() -> Any:
    import pynvml  # from nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


@contextlib.contextmanager
def nvml_session() -> Iterator[Any]:
    """The pynvml module, initialised for the block and shut down after it. Raises whatever pynvml raises when NVML
    cannot start (no package, no driver): callers turn that into their "no GPU" answer."""
    nvml = _nvml()
    try:
        yield nvml
    finally:
        nvml.nvmlShutdown()


def read(call: Any, *args: Any) -> Any:
    """One NVML query; a query the GPU or driver does not support is recorded as None, not an error."""
    try:
        value = call(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        return None
    return value.decode() if isinstance(value, bytes) else value


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as error:  # noqa: BLE001 - a lost GPU: recorded, the others are still read
        return {"index": index, "unavailable": f"NVML: {error}"}
    clock = nvml.nvmlDeviceGetClockInfo
    max_clock = nvml.nvmlDeviceGetMaxClockInfo
    memory = read(nvml.nvmlDeviceGetMemoryInfo, handle)
    power_limit = read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    power = read(nvml.nvmlDeviceGetPowerUsage, handle)
    return {
        "index": index,
        "name": read(nvml.nvmlDeviceGetName, handle),
        "uuid": read(nvml.nvmlDeviceGetUUID, handle),
        "memory_total_mib": memory.total // 2**20 if memory else None,
        "sm_clock_mhz": read(clock, handle, nvml.NVML_CLOCK_SM),
        "memory_clock_mhz": read(clock, handle, nvml.NVML_CLOCK_MEM),
        "sm_clock_max_mhz": read(max_clock, handle, nvml.NVML_CLOCK_SM),
        "memory_clock_max_mhz": read(max_clock, handle, nvml.NVML_CLOCK_MEM),
        "sm_application_clock_mhz": read(nvml.nvmlDeviceGetApplicationsClock, handle, nvml.NVML_CLOCK_SM),
        "power_limit_w": power_limit / 1000 if power_limit is not None else None,
        "power_w": power / 1000 if power is not None else None,
        "temperature_c": read(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        "performance_state": read(nvml.nvmlDeviceGetPerformanceState, handle),
        "persistence_mode": read(nvml.nvmlDeviceGetPersistenceMode, handle),
        "compute_capability": ".".join(map(str, read(nvml.nvmlDeviceGetCudaComputeCapability, handle) or ())),
    }


def gpu_report() -> dict[str, Any]:
    """{"driver", "cuda_driver", "gpus": [...]} or {"gpus": [], "unavailable": reason}."""
    try:
        session = nvml_session()
        nvml = session.__enter__()
    except Exception as error:  # noqa: BLE001 - no library, no driver: a CPU machine
        return {"gpus": [], "unavailable": f"NVML: {error}"}
    try:
        cuda = read(nvml.nvmlSystemGetCudaDriverVersion)
        report: dict[str, Any] = {
            "driver": read(nvml.nvmlSystemGetDriverVersion),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        }
        try:
            count = nvml.nvmlDeviceGetCount()
        except Exception as error:  # noqa: BLE001 - the driver answers but cannot count its GPUs
            return {**report, "gpus": [], "unavailable": f"NVML: {error}"}
        return {**report, "gpus": [_gpu(nvml, index) for index in range(count)]}
    finally:
        session.__exit__(None, None, None)


STATE_KEYS = ("index", "sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c", "performance_state")


def gpu_state() -> list[dict[str, Any]]:
    """Clocks, power and temperature of every GPU now: read right after a timed window, they show the state the
    measurement ran in (throttling, boost), unlike the idle values read before a run."""
    return [{key: gpu.get(key) for key in STATE_KEYS} for gpu in gpu_report()["gpus"]]


def visible_entries(visible: str | None, count: int) -> list[str]:
    """CUDA_VISIBLE_DEVICES's entries a CUDA program would use, in its order (all ``count`` GPUs when unset). CUDA
    stops at the first invalid entry, "-1" included; empty entries are skipped."""
    if visible is None:
        return [str(index) for index in range(count)]
    entries = []
    for entry in (part.strip() for part in visible.split(",")):
        if not entry:
            continue
        if entry.startswith("-"):
            break
        entries.append(entry)
    return entries


MIG_PREFIX = "MIG-"  # a MIG instance's UUID in CUDA_VISIBLE_DEVICES (whole GPUs' start with "GPU-")


def visible_mig_instances(visible: str | None) -> list[str]:
    """The MIG instances CUDA_VISIBLE_DEVICES shows a CUDA program (``MIG-<uuid>``, as MIG-aware schedulers and
    Kubernetes set it): each is one CUDA device, a slice of a GPU that NVML lists whole."""
    return [entry for entry in visible_entries(visible, 0) if entry.startswith(MIG_PREFIX)]


def visible_gpu_indices(gpus: list[dict[str, Any]], visible: str | None) -> list[int]:
    """The NVML indices of the whole GPUs a CUDA program sees, in CUDA's order: ``gpus`` is gpu_report's list (NVML
    ignores CUDA_VISIBLE_DEVICES). An entry is an index or a UUID (or a unique start of one, as CUDA allows);
    numbers are taken in NVML's PCI order, which is CUDA's when CUDA_DEVICE_ORDER=PCI_BUS_ID (as the sweep sets for
    its workers) and on nodes of one GPU model. An unknown entry ends the list, as it ends CUDA's; a MIG instance
    is no whole GPU and is left out (``visible_mig_instances``)."""
    indices: list[int] = []
    for entry in visible_entries(visible, len(gpus)):
        if entry.startswith(MIG_PREFIX):
            continue
        if entry.isdigit():
            found = [int(entry)] if int(entry) < len(gpus) else []
        else:
            found = [gpu["index"] for gpu in gpus if str(gpu.get("uuid") or "").startswith(entry)]
        if len(found) != 1 or found[0] in indices:
            break
        indices.append(found[0])
    return indices


def visible_gpu_count() -> int:
    """GPUs a CUDA program here would see: NVML's count, narrowed by CUDA_VISIBLE_DEVICES when it is set; each MIG
    instance it names counts as one (CUDA runs on it as on a GPU)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return len(visible_gpu_indices(gpu_report()["gpus"], visible)) + len(visible_mig_instances(visible))
