"""What a batch size's samples cost and how much of the GPUs' peak that is: tokens/s, achieved FLOP/s, MFU.

The engine counts, once per batch size and outside every window, the network's parameters and the training FLOPs
of one sample (``StepRunner.parameters``, ``train_flops_per_sample``, ``flops_note``) and the tokens one step
holds; the worker hands them on as result fields (``results.fields``, group WORK) so that the sweep's header and
summary take them from the result like every other value, and the ranks of a multi-process run are combined by
``bench.ranks`` with the world's samples/s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainbench.results.peaks import Peak, peak_flops

if TYPE_CHECKING:
    from trainbench.engines.base import StepRunner


def tokens_per_sample(runner: StepRunner) -> float | None:
    """Tokens in one sample as the runner counts them (both per its own samples: per process for torch, every
    replica for TensorFlow), or None for a workload without tokens."""
    if runner.tokens_per_step is None or not runner.samples_per_step:
        return None
    return runner.tokens_per_step / runner.samples_per_step


def peak_of(device: str, gpu_names: Sequence[str | None], arithmetic: str) -> Peak:
    """The peak the measurement is judged against: the GPUs it drove (their NVML names), or why there is none."""
    if device == "cpu":
        return Peak(None, "the CPU: MFU is measured against a GPU's dense peak")
    if not gpu_names:
        return Peak(None, "the GPUs' names are unknown (no NVML telemetry): no peak to measure MFU against")
    return peak_flops(gpu_names, arithmetic)


def work_values(samples_per_sec: float, per_sample_tokens: float | None, flops_per_sample: float | None,
                peak: Peak, hardware_flops_per_sample: float | None = None) -> dict[str, Any]:
    """tokens_per_sec, achieved_flops, peak_flops, mfu, mfu_note and hfu for a rate of ``samples_per_sec``: MFU
    counts the model's FLOPs, HFU what the hardware ran (``hardware_flops_per_sample``: the recomputed forward
    too; None: the model's)."""
    achieved = samples_per_sec * flops_per_sample if flops_per_sample else None
    if achieved is None:
        mfu, note = None, "no FLOPs per sample counted (see flops_note)"
    elif peak.flops is None:
        mfu, note = None, peak.note
    else:
        mfu, note = achieved / peak.flops, f"against {peak.note}"
    hardware = hardware_flops_per_sample or flops_per_sample
    hfu = samples_per_sec * hardware / peak.flops if mfu is not None and hardware and peak.flops else None
    return {"tokens_per_sec": samples_per_sec * per_sample_tokens if per_sample_tokens is not None else None,
            "achieved_flops": achieved, "peak_flops": peak.flops, "mfu": mfu, "mfu_note": note, "hfu": hfu}


def runner_values(runner: StepRunner, samples_per_sec: float, peak: Peak) -> dict[str, Any]:
    """The WORK fields of one process's measurement."""
    flops, hardware = runner.train_flops_per_sample, runner.hardware_flops_per_sample
    return {"parameters": runner.parameters, "parameters_held": runner.parameters_held,
            "train_flops_per_sample": flops, "hardware_flops_per_sample": hardware, "flops_note": runner.flops_note,
            **work_values(samples_per_sec, tokens_per_sample(runner), flops, peak, hardware)}


def world_values(lead: Mapping[str, Any], samples_per_sec: float, world_size: int) -> dict[str, Any]:
    """The WORK fields of a multi-process batch size, from its lowest rank's and the world's samples/s: every rank
    drives one GPU of the same model, so the world's peak is world size x the lowest rank's."""
    lead_rate = lead.get("samples_per_sec")
    tokens = lead.get("tokens_per_sec")
    per_sample_tokens = tokens / lead_rate if tokens is not None and lead_rate else None
    rank_peak = lead.get("peak_flops")
    note = str(lead.get("mfu_note") or "no peak")
    peak = Peak(rank_peak * world_size if rank_peak is not None else None,
                f"{world_size} ranks, each {note.removeprefix('against ')}")
    if rank_peak is None:
        peak = Peak(None, note)
    return work_values(samples_per_sec, per_sample_tokens, lead.get("train_flops_per_sample"), peak,
                       lead.get("hardware_flops_per_sample"))
