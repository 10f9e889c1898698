"""One batch size measured by several processes (ranks): their results combined into the batch size's result.

Every rank times the same windows (they start and end on a barrier, see the torch engine's ``sync``), so the
world's images/s is world size x one rank's images / the slowest rank's window: images_per_sec counts every
image of every rank, never one rank's rate times N unless that is what the slowest rank did. A rank that failed
fails the batch size, with its message. Per-rank figures stay in ``ranks`` (summary.json); a node sees only its
own ranks' files, so on several nodes each node's result names its own ranks (the world size is the whole job's).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from trainbench.results.records import BatchResult
from trainbench.telemetry.schema import GPU_TELEMETRY, TELEMETRY_VALUES

# Per-rank values summed over the node's ranks, and those where the worst rank speaks for all.
_SUMMED = ("energy_j", "mean_power_w", "sampled_power_w", "telemetry_samples")
_WORST = ("temperature_max_c", "throttle_power_fraction", "throttle_thermal_fraction")


def merge_ranks(ranked: Sequence[tuple[int, BatchResult]], world_size: int) -> BatchResult:
    """The batch size's result from its ranks' ((rank, result) in rank order, at least one: this node's)."""
    failed = [(rank, result) for rank, result in ranked if not result.ok]
    if failed:
        rank, first = failed[0]
        return BatchResult.failed(first.batch_size, first.status, f"rank {rank}: {first.error}")
    results = [result for _, result in ranked]
    lead = results[0]
    if "window_images_per_sec" not in lead.values:  # a profiled window: the lowest rank's profile, the world noted
        return lead.replace(world_size=world_size, ranks=[{"rank": rank} for rank, _ in ranked])
    per_rank_images = lead.batch_size * lead.values["timed_steps"]
    slowest = max(result.values["window_s"] for result in results)
    rates = [world_size * min(window) for window in zip(*(r.values["window_images_per_sec"] for r in results),
                                                          strict=True)]
    values: dict[str, Any] = {
        **lead.values,  # step times: rank 0's (its steps.csv)
        "images_per_sec": world_size * per_rank_images / slowest,
        "window_s": slowest,
        "window_images_per_sec": rates,
        "images_per_sec_median": statistics.median(rates),
        "images_per_sec_min": min(rates),
        "images_per_sec_max": max(rates),
        "world_size": world_size,
        "ranks": [_rank_row(rank, result) for rank, result in ranked],
        **_telemetry(results, len(results) * per_rank_images),  # this node's GPUs' energy over their images
    }
    return BatchResult(lead.batch_size, lead.status, lead.error, values)


def _rank_row(rank: int, result: BatchResult) -> dict[str, Any]:
    values = result.values
    return {"rank": rank, "images_per_sec": values["images_per_sec"], "window_s": values["window_s"],
            "step_time_median_s": values["step_time_median_s"], "energy_j": values.get("energy_j")}


def _telemetry(results: Sequence[BatchResult], images: int) -> dict[str, Any]:
    """The node's GPUs together: energy and power summed over its ranks, the worst temperature and throttling."""
    merged: dict[str, Any] = {}
    for name in _SUMMED:
        values = [result.values.get(name) for result in results]
        merged[name] = None if any(value is None for value in values) else sum(values)
    for name in _WORST:
        known = [v for result in results if (v := result.values.get(name)) is not None]
        merged[name] = max(known) if known else None
    clocks = sorted(v for result in results if (v := result.values.get("sm_clock_median_mhz")) is not None)
    merged["sm_clock_median_mhz"] = statistics.median(clocks) if clocks else None  # the median rank's median
    energy = merged["energy_j"]
    merged["joules_per_image"] = energy / images if energy is not None and images else None
    merged["images_per_joule"] = images / energy if energy else None
    notes = sorted({note for result in results if (note := result.values.get("telemetry_note"))})
    merged["telemetry_note"] = "; ".join(notes) or None
    merged[GPU_TELEMETRY] = [gpu for result in results for gpu in result.values.get(GPU_TELEMETRY) or []]
    assert set(TELEMETRY_VALUES) <= set(merged), "every telemetry field is combined"
    return merged
