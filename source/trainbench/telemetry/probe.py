"""Reading the GPUs a worker uses, while it runs: counters at window edges, and samples for the timeline.

``GpuProbe.open`` answers a probe or the reason there is none ("no GPU telemetry: ..."), so a CPU run, a machine
without NVML and a driver too old for a query all go on without it. Each query the GPU or driver lacks reads None
(older drivers name the clock-event reasons "throttle reasons": both names are tried).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainbench.telemetry.counters import VIOLATION_POLICIES
from trainbench.telemetry.nvml import gpu_report, nvml_session, read, visible_gpu_indices, visible_mig_instances

NO_TELEMETRY = "no GPU telemetry"


@dataclass(frozen=True)
class GpuIdentity:
    index: int  # NVML's (PCI order; NVML ignores CUDA_VISIBLE_DEVICES)
    uuid: str | None
    name: str | None
    power_limit_w: float | None


@dataclass(frozen=True)
class Edge:
    """Every used GPU's cumulative counters at one synchronised window edge."""

    time_s: float  # the probe's clock: time.monotonic() unless a test gives the stand-in NVML's
    energy_mj: tuple[int | None, ...]  # per GPU
    violation_ns: tuple[dict[int, int | None], ...]  # per GPU: throttle policy -> cumulative violation time, ns


def worker_gpu_indices(device: str, gpus: list[dict[str, Any]], visible: str | None, *, every_gpu: bool = False,
                       local_rank: int = 0) -> list[int]:
    """The NVML indices of the GPUs a worker on ``device`` computes on: every GPU CUDA shows it when one process
    drives them all (TensorFlow's MirroredStrategy), else the one of its local rank (torchrun: ``cuda:LOCAL_RANK``;
    alone: ``cuda:0``); none on the CPU."""
    if device != "cuda":
        return []
    shown = visible_gpu_indices(gpus, visible)
    return shown if every_gpu else shown[local_rank:local_rank + 1]


class GpuProbe:
    """NVML opened for the worker's GPUs until ``close``; every read is one NVML query per GPU and value."""

    def __init__(self, nvml: Any, session: Any, gpus: list[GpuIdentity],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._nvml, self._session, self.gpus, self._clock = nvml, session, gpus, clock
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in gpus]

    @classmethod
    def open(cls, device: str, every_gpu: bool = False, local_rank: int = 0,
             clock: Callable[[], float] = time.monotonic) -> GpuProbe | str:
        """A probe of the GPUs a worker on ``device`` uses (``every_gpu``: all it sees; else the one of its
        ``local_rank``, which the launcher's environment gives the caller), or why there is none. ``clock`` stamps
        each edge (the throttled share's denominator): a test passes the one its stand-in NVML counts by."""
        if device != "cuda":
            return f"{NO_TELEMETRY}: the run is on the {device}"
        if visible_mig_instances(os.environ.get("CUDA_VISIBLE_DEVICES")):
            # NVML's energy, power, clocks and throttling are the whole GPU's: every instance's work, not this run's.
            return f"{NO_TELEMETRY}: no per-GPU energy under MIG (CUDA_VISIBLE_DEVICES names MIG instances)"
        report = gpu_report()
        indices = worker_gpu_indices(device, report["gpus"], os.environ.get("CUDA_VISIBLE_DEVICES"),
                                     every_gpu=every_gpu, local_rank=local_rank)
        if not indices:
            return f"{NO_TELEMETRY}: {report.get('unavailable') or 'NVML sees none of the GPUs CUDA shows'}"
        by_index = {gpu["index"]: gpu for gpu in report["gpus"]}
        gpus = [GpuIdentity(i, by_index[i].get("uuid"), by_index[i].get("name"), by_index[i].get("power_limit_w"))
                for i in indices]
        session = nvml_session()
        try:
            return cls(session.__enter__(), session, gpus, clock)
        except Exception as error:  # noqa: BLE001 - NVML went away between the report and now
            session.__exit__(None, None, None)
            return f"{NO_TELEMETRY}: NVML: {error}"

    def close(self) -> None:
        self._session.__exit__(None, None, None)

    def edge(self) -> Edge:
        """The counters now: energy and every throttle policy's violation time, per GPU."""
        nvml = self._nvml
        energy = tuple(read(nvml.nvmlDeviceGetTotalEnergyConsumption, handle) for handle in self._handles)
        violations = tuple({policy: _violation(nvml, handle, policy) for policy in VIOLATION_POLICIES}
                           for handle in self._handles)
        return Edge(self._clock(), energy, violations)

    def sample(self) -> list[dict[str, Any]]:
        """One row per GPU with the timeline's state fields (schema.SAMPLE_FIELDS), ``gpu`` its NVML index."""
        nvml = self._nvml
        rows = []
        for gpu, handle in zip(self.gpus, self._handles, strict=True):
            power = read(nvml.nvmlDeviceGetPowerUsage, handle)
            utilization = read(nvml.nvmlDeviceGetUtilizationRates, handle)
            rows.append({
                "gpu": gpu.index,
                "sm_clock_mhz": read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
                "memory_clock_mhz": read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
                "power_w": power / 1000 if power is not None else None,
                "temperature_c": read(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
                "gpu_util_pct": utilization.gpu if utilization is not None else None,
                "memory_util_pct": utilization.memory if utilization is not None else None,
                "clock_event_reasons": self._reasons(handle),
            })
        return rows

    def _reasons(self, handle: Any) -> int | None:
        """The clock-event reason mask; drivers before r535 have the function under its older name only."""
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            call = getattr(self._nvml, name, None)
            value = read(call, handle) if call is not None else None
            if value is not None:
                return value
        return None


def _violation(nvml: Any, handle: Any, policy: int) -> int | None:
    status = read(nvml.nvmlDeviceGetViolationStatus, handle, policy)
    return status.violationTime if status is not None else None
