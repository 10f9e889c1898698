"""Statistics of a timed window, reported with every result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trainbench.bench.timing import Window
from trainbench.results.trust import window_spread


def samples_per_sec(batch_size: int, steps: int, window_s: float) -> float:
    """Throughput of a window: all images processed over its wall time."""
    if window_s <= 0:
        raise ValueError(f"window must last a positive time, got {window_s}")
    return batch_size * steps / window_s


def median_abs_deviation(values: np.ndarray) -> float:
    return float(np.median(np.abs(values - np.median(values))))


def summarize(batch_size: int, window: Window) -> dict[str, Any]:
    """The result fields of one batch size measured in one window (see README, "Results")."""
    return summarize_windows(batch_size, [window])


def summarize_windows(batch_size: int, windows: Sequence[Window]) -> dict[str, Any]:
    """The result fields of one batch size measured in one or more back-to-back windows: samples_per_sec over all of
    them together (all timed images / all timed wall time), the spread of the windows' own samples/s (their range,
    and in percent ``window_spread``), and the step-time statistics over every timed step."""
    steps = np.concatenate([np.asarray(w.step_s, dtype=np.float64) for w in windows])
    p10, median, p90 = np.percentile(steps, [10, 50, 90])
    window_s = float(sum(w.window_s for w in windows))
    rates = [samples_per_sec(batch_size, len(w.step_s), w.window_s) for w in windows]
    return {
        "samples_per_sec": samples_per_sec(batch_size, len(steps), window_s),
        "windows": len(windows),
        "samples_per_sec_median": float(np.median(rates)),
        "samples_per_sec_min": min(rates),
        "samples_per_sec_max": max(rates),
        "window_samples_per_sec": rates,
        **window_spread(rates),
        "step_time_median_s": float(median),
        "step_time_p10_s": float(p10),
        "step_time_p90_s": float(p90),
        "step_time_mad_s": median_abs_deviation(steps),
        "window_s": window_s,
        "timed_steps": len(steps),
        "warmup_steps": sum(len(w.warmup_s) for w in windows),
    }
