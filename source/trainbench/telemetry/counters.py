"""The arithmetic of NVML's cumulative counters read at the edges of timed windows: energy and throttle time.

Pure functions over numbers, so every rule (wrap, a counter that jumped, a window too short to measure) is tested
without a GPU. A value that cannot be trusted is None with the reason, never a wrong number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ENERGY_COUNTER_MODULUS = 2**64  # nvmlDeviceGetTotalEnergyConsumption: unsigned 64-bit millijoules
# NVML refreshes the energy counter about every 100 ms (measure on each new GPU generation): a window shorter than
# that could read the same value at both edges, or one update too many.
ENERGY_UPDATE_S = 0.1
# The shortest timed window whose energy is reported: one update period either way is then at most 10 % of it.
MIN_ENERGY_WINDOW_S = 10 * ENERGY_UPDATE_S
# A mean power above this many times the board's power limit (or the fallback below when it has none) is not a
# measurement but a counter reset between the edges (a driver reload, a GPU reset).
IMPLAUSIBLE_POWER_RATIO = 2.0
IMPLAUSIBLE_POWER_W = 5000.0

# nvmlDeviceGetViolationStatus's policies (NVML_PERF_POLICY_*) and the names the results give them.
VIOLATION_POLICIES: dict[int, str] = {
    0: "power",
    1: "thermal",
    2: "sync_boost",
    3: "board_limit",
    4: "low_utilization",
    5: "reliability",
}


@dataclass(frozen=True)
class Measured:
    """A value, or None and why."""

    value: float | None
    note: str | None = None


def counter_delta(start: int, end: int, modulus: int = ENERGY_COUNTER_MODULUS) -> int:
    """How far a cumulative counter moved from ``start`` to ``end``, across one wrap of ``modulus``."""
    return (end - start) % modulus


def window_energy_j(starts_mj: Sequence[int | None], ends_mj: Sequence[int | None], windows_s: Sequence[float],
                    power_limit_w: float | None) -> Measured:
    """Joules one GPU used over timed windows, from its energy counter (mJ) at each window's two edges."""
    if not windows_s:
        return Measured(None, "no timed window")
    if any(value is None for value in (*starts_mj, *ends_mj)):
        return Measured(None, "this GPU or driver has no energy counter (Volta or newer with a recent driver)")
    short = min(windows_s)
    if short < MIN_ENERGY_WINDOW_S:
        return Measured(None, f"a timed window of {short:.3f} s is shorter than the energy counter's update period "
                              f"x 10 (about {MIN_ENERGY_WINDOW_S:g} s), which keeps its error under 10 %: time more "
                              "steps")
    deltas_mj = [counter_delta(start, end) for start, end in zip(starts_mj, ends_mj, strict=True)
                 if start is not None and end is not None]  # all are (above); the test tells the type checker
    ceiling_w = power_limit_w * IMPLAUSIBLE_POWER_RATIO if power_limit_w else IMPLAUSIBLE_POWER_W
    for delta, seconds in zip(deltas_mj, windows_s, strict=True):
        if delta / 1000 / seconds > ceiling_w:
            return Measured(None, f"the energy counter jumped by {delta / 1000:.0f} J in {seconds:.2f} s "
                                  "(reset between the edges?)")
    return Measured(sum(deltas_mj) / 1000)


def violation_fraction(starts_ns: Sequence[int | None], ends_ns: Sequence[int | None],
                       elapsed_s: Sequence[float]) -> float | None:
    """The share of the windows' time one throttle policy held the clocks down, from NVML's cumulative violation
    time (ns) read at each window's edges, ``elapsed_s`` apart; None when the GPU has no such counter. (NVML's own
    ``referenceTime`` is left alone: its documented unit, microseconds, is not what every driver gives.)"""
    if not elapsed_s or any(value is None for value in (*starts_ns, *ends_ns)):
        return None
    violated = sum(max(0, end - start) for start, end in zip(starts_ns, ends_ns, strict=True)
                   if start is not None and end is not None)  # all are (above); the test tells the type checker
    elapsed = sum(elapsed_s) * 1e9
    return min(1.0, violated / elapsed) if elapsed > 0 else None


def share_with_bits(masks: Sequence[int | None], bits: int) -> float | None:
    """The share of samples whose clock-event reason mask has any of ``bits`` set (None without a readable mask)."""
    known = [mask for mask in masks if mask is not None]
    if not known:
        return None
    return sum(1 for mask in known if mask & bits) / len(known)


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values read (None and NaN are readings that failed), None when there is none."""
    known = [value for value in values if value is not None and not math.isnan(value)]
    return statistics.median(known) if known else None
