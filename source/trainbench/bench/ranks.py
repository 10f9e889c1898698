"""One batch size measured by several processes (ranks): their results combined into the batch size's result.

Every rank times the same windows (they start and end on a barrier, see the torch engine's ``sync``), so the
world's samples/s is world size x one rank's samples / the slowest rank's window: samples_per_sec counts every
sample of every rank, never one rank's rate times N unless that is what the slowest rank did. A rank that failed
fails the batch size, with its message. Per-rank figures stay in ``ranks`` (summary.json); a node sees only its
own ranks' files, so on several nodes each node's result names its own ranks (the world size is the whole job's).
Every other value is combined by its field's rule (``results.fields.Merge``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from trainbench.bench.work import world_values
from trainbench.results import fields
from trainbench.results.fields import Merge
from trainbench.results.records import BatchResult
from trainbench.results.trust import window_spread


def merge_ranks(ranked: Sequence[tuple[int, BatchResult]], world_size: int) -> BatchResult:
    """The batch size's result from its ranks' ((rank, result) in rank order, at least one: this node's): each value
    combined by its field's rule (``results.fields.Merge``), the world's rates from every rank's windows."""
    failed = [(rank, result) for rank, result in ranked if not result.ok]
    if failed:
        rank, first = failed[0]
        return BatchResult.failed(first.batch_size, first.status, f"rank {rank}: {first.error}")
    results = [result for _, result in ranked]
    lead = results[0]
    if fields.WINDOW_SAMPLES_PER_SEC not in lead.values:  # a profiled window: the lowest rank's profile, the world
        return lead.replace(world_size=world_size, ranks=[{"rank": rank} for rank, _ in ranked])
    names = list(dict.fromkeys(name for result in results for name in result.values))
    if unknown := fields.unknown(names):
        raise ValueError(f"batch {lead.batch_size}: {', '.join(unknown)} is no result field: no rule merges it")
    world = _world(ranked, world_size)
    values: dict[str, Any] = {}
    for name in names:
        rule = fields.BY_NAME[name].merge
        values[name] = world[name] if rule is Merge.WORLD else by_rule(rule, [r.values.get(name) for r in results])
    values.update(world)
    assert set(names) <= set(values), "every value of the ranks is merged"
    return BatchResult(lead.batch_size, lead.status, lead.error, values)


def by_rule(rule: Merge, values: Sequence[Any]) -> Any:
    """The ranks' values (in rank order, None where a rank has none) combined by ``rule``."""
    present = [value for value in values if value is not None]
    if rule is Merge.LEAD:
        return values[0]
    if rule is Merge.SUM:
        return None if len(present) < len(values) else sum(present)
    if rule is Merge.JOIN:
        return "; ".join(sorted({str(value) for value in present if value})) or None
    if rule is Merge.CONCAT:
        return [item for value in present for item in value]
    if not present:
        return None
    if rule is Merge.MAX:
        return max(present)
    if rule is Merge.MIN:
        return min(present)
    if rule is Merge.MEDIAN:
        return statistics.median(present)
    raise ValueError(f"{rule} is computed from the whole world, not value by value")


def _world(ranked: Sequence[tuple[int, BatchResult]], world_size: int) -> dict[str, Any]:
    """The values of rule WORLD: every rank times the same windows, so the world's samples/s is world size x one
    rank's samples / the slowest rank's window; energy per sample over this node's ranks' samples; tokens/s, FLOP/s
    and MFU from the world's samples/s (``bench.work.world_values``)."""
    results = [result for _, result in ranked]
    lead = results[0]
    per_rank_samples = lead.batch_size * lead.values["timed_steps"]
    slowest = max(result.values["window_s"] for result in results)
    rates = [world_size * min(window) for window in
             zip(*(r.values[fields.WINDOW_SAMPLES_PER_SEC] for r in results), strict=True)]
    energy = by_rule(Merge.SUM, [result.values.get("energy_j") for result in results])
    samples = len(results) * per_rank_samples  # this node's GPUs' energy over their samples
    samples_per_sec = world_size * per_rank_samples / slowest
    return {
        "samples_per_sec": samples_per_sec,
        **world_values(lead.values, samples_per_sec, world_size),
        "window_samples_per_sec": rates,
        "samples_per_sec_median": statistics.median(rates),
        "samples_per_sec_min": min(rates),
        "samples_per_sec_max": max(rates),
        **window_spread(rates),
        "world_size": world_size,
        "ranks": [_rank_row(rank, result) for rank, result in ranked],
        "joules_per_sample": energy / samples if energy is not None and samples else None,
        "samples_per_joule": samples / energy if energy else None,
    }


def _rank_row(rank: int, result: BatchResult) -> dict[str, Any]:
    values = result.values
    return {"rank": rank, "samples_per_sec": values["samples_per_sec"], "window_s": values["window_s"],
            "step_time_median_s": values["step_time_median_s"], "energy_j": values.get("energy_j"),
            "parameters_held": values.get("parameters_held"),
            "memory_parameters_bytes": values.get("memory_parameters_bytes"),
            "peak_memory_bytes": values.get("peak_memory_bytes")}
