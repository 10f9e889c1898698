"""A batch size's telemetry in numbers: energy per sample, power, clocks and throttling over its timed windows.

Pure: counters read at the window edges and the sampler's timed rows in, the result fields (``schema``, from
``results.fields``) out.
Flat fields sum energy and power over the GPUs the worker used and take the worst GPU's throttled share; the
per-GPU detail goes to ``gpu_telemetry``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainbench.telemetry.counters import (
    VIOLATION_POLICIES,
    median,
    share_with_bits,
    violation_fraction,
    window_energy_j,
)
from trainbench.telemetry.probe import Edge, GpuIdentity
from trainbench.telemetry.schema import (
    GPU_TELEMETRY,
    POWER_REASONS,
    REASON_BITS,
    THERMAL_REASONS,
    telemetry_values,
)

# A throttle counter policy and the reason bits that say the same from the samples.
_GROUPS = {"power": POWER_REASONS, "thermal": THERMAL_REASONS}


def no_telemetry(note: str) -> dict[str, Any]:
    """Every telemetry field None, and why."""
    return {**dict.fromkeys(telemetry_values()), "telemetry_note": note, GPU_TELEMETRY: []}


def _bits(names: Sequence[str]) -> int:
    mask = 0
    for name in names:
        mask |= REASON_BITS[name]
    return mask


def _throttle(position: int, starts: Sequence[Edge], ends: Sequence[Edge],
              masks: Sequence[int | None]) -> tuple[dict[str, float | None], str | None]:
    """One GPU's throttled shares by reason: NVML's violation counters where it has one for the reason (time
    actually throttled), else the share of samples with the reason's bits set; and which of the two was used."""
    elapsed = [end.time_s - start.time_s for start, end in zip(starts, ends, strict=True)]
    counted = {name: violation_fraction([e.violation_ns[position].get(policy) for e in starts],
                                        [e.violation_ns[position].get(policy) for e in ends], elapsed)
               for policy, name in VIOLATION_POLICIES.items()}
    sampled = {name: share_with_bits(masks, REASON_BITS[name]) for name in REASON_BITS}
    sampled.update({group: share_with_bits(masks, _bits(names)) for group, names in _GROUPS.items()})
    merged = {name: counted.get(name) if counted.get(name) is not None else sampled.get(name)
              for name in {**sampled, **counted}}
    sources = [source for source, shares in (("counters", counted), ("samples", sampled))
               if any(value is not None for value in shares.values())]
    return merged, "+".join(sources) or None


def _gpu_values(position: int, gpu: GpuIdentity, starts: Sequence[Edge], ends: Sequence[Edge],
                windows_s: Sequence[float], images: int, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    mine = [row for row in samples if row.get("gpu") == gpu.index]
    energy = window_energy_j([e.energy_mj[position] for e in starts], [e.energy_mj[position] for e in ends],
                             windows_s, gpu.power_limit_w)
    seconds = sum(windows_s)
    throttle, source = _throttle(position, starts, ends, [row.get("clock_event_reasons") for row in mine])
    powers = [row["power_w"] for row in mine if row.get("power_w") is not None]
    temperatures = [row["temperature_c"] for row in mine if row.get("temperature_c") is not None]
    return {
        "index": gpu.index, "uuid": gpu.uuid, "name": gpu.name,
        "energy_j": energy.value,
        "joules_per_sample": energy.value / images if energy.value is not None and images else None,
        "mean_power_w": energy.value / seconds if energy.value is not None and seconds else None,
        "energy_note": energy.note,
        "sampled_power_w": sum(powers) / len(powers) if powers else None,
        "sm_clock_median_mhz": median([row.get("sm_clock_mhz") for row in mine]),
        "memory_clock_median_mhz": median([row.get("memory_clock_mhz") for row in mine]),
        "temperature_median_c": median(temperatures),
        "temperature_max_c": max(temperatures) if temperatures else None,
        "gpu_util_median_pct": median([row.get("gpu_util_pct") for row in mine]),
        "samples": len(mine),
        "throttle": throttle,
        "throttle_source": source,
    }


def _total(per_gpu: Sequence[dict[str, Any]], name: str) -> float | None:
    values = [gpu[name] for gpu in per_gpu]
    return None if any(value is None for value in values) else sum(values)


def _worst(per_gpu: Sequence[dict[str, Any]], group: str) -> float | None:
    values = [gpu["throttle"].get(group) for gpu in per_gpu if gpu["throttle"].get(group) is not None]
    return max(values) if values else None


def summarize(gpus: Sequence[GpuIdentity], starts: Sequence[Edge], ends: Sequence[Edge],
              windows_s: Sequence[float], images: int, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The result fields of one batch size: ``starts``/``ends`` are the counters at each timed window's edges,
    ``windows_s`` each window's wall time, ``images`` the images of all windows, ``samples`` the timed rows."""
    per_gpu = [_gpu_values(i, gpu, starts, ends, windows_s, images, samples) for i, gpu in enumerate(gpus)]
    energy = _total(per_gpu, "energy_j")
    notes = sorted({gpu["energy_note"] for gpu in per_gpu if gpu["energy_note"]})
    if not samples:
        notes.append("no timeline samples in the timed windows (sampler off, or windows shorter than its period)")
    return {
        "energy_j": energy,
        "joules_per_sample": energy / images if energy is not None and images else None,
        "samples_per_joule": images / energy if energy else None,
        "mean_power_w": _total(per_gpu, "mean_power_w"),
        "sampled_power_w": _total(per_gpu, "sampled_power_w"),
        "sm_clock_median_mhz": median([row.get("sm_clock_mhz") for row in samples]),
        "temperature_max_c": max((g["temperature_max_c"] for g in per_gpu if g["temperature_max_c"] is not None),
                                 default=None),
        "throttle_power_fraction": _worst(per_gpu, "power"),
        "throttle_thermal_fraction": _worst(per_gpu, "thermal"),
        "telemetry_samples": len(samples),
        "telemetry_note": "; ".join(notes) or None,
        GPU_TELEMETRY: per_gpu,
    }

