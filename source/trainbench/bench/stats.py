"""Statistics of a timed window, reported with every result."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainbench.bench.timing import Window


def images_per_sec(batch_size: int, steps: int, window_s: float) -> float:
    """Throughput of a window: all images processed over its wall time."""
    if window_s <= 0:
        raise ValueError(f"window must last a positive time, got {window_s}")
    return batch_size * steps / window_s


def median_abs_deviation(values: np.ndarray) -> float:
    return float(np.median(np.abs(values - np.median(values))))


def summarize(batch_size: int, window: Window) -> dict[str, Any]:
    """The result fields of one batch size (see README, "Results")."""
    steps = np.asarray(window.step_s, dtype=np.float64)
    p10, median, p90 = np.percentile(steps, [10, 50, 90])
    return {
        "images_per_sec": images_per_sec(batch_size, len(steps), window.window_s),
        "step_time_median_s": float(median),
        "step_time_p10_s": float(p10),
        "step_time_p90_s": float(p90),
        "step_time_mad_s": median_abs_deviation(steps),
        "window_s": window.window_s,
        "timed_steps": len(steps),
        "warmup_steps": len(window.warmup_s),
    }
