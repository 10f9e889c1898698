"""Figures derived from others, checked where a run is read: a file whose MFU, achieved FLOP/s or tokens/s does not
follow from its own rate is no measurement of them; one whose sample unit is not its workload's (a BERT run whose
rates are said to count images) has rates of no known unit.

The worker computes them (``bench.work``): tokens/s = samples/s x the workload's tokens per sample (its sequence
length x its token streams), achieved FLOP/s = samples/s x train FLOPs per sample, MFU = achieved / peak and only
against a GPU's peak. A hand-edited or corrupted file (an MFU of 3.5 on a CPU run, tokens/s 31 times what the rate
and length give) would otherwise be ranked and compared as measured. Like NaN in a rate, such a result is read as
invalid, named, and left out of every figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainbench import workloads
from trainbench.errors import UsageError

RELATIVE = 1e-3  # products recomputed from JSON's 17 digits agree far closer; this leaves room for any rounding


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _close(found: float, expected: float) -> bool:
    return math.isclose(found, expected, rel_tol=RELATIVE, abs_tol=1e-12)


def _tokens_per_sample(header: Mapping[str, Any]) -> tuple[bool, float | None]:
    """(whether the workload is known, its tokens per sample: None without tokens or without the length run)."""
    name = header.get("workload", workloads.DEFAULT)
    try:
        workload = workloads.get(str(name))
    except UsageError:
        return False, None
    if workload.tokens_param is None:
        return True, None
    params = header.get("params")
    length = _number(params.get(workload.tokens_param)) if isinstance(params, dict) else None
    if length is None:
        return False, None  # the length it ran at is not recorded: nothing to check against
    return True, float(workload.tokens_per_sample({workload.tokens_param: int(length)}) or 0)


def _unit_problem(header: Mapping[str, Any]) -> str | None:
    """Why the header's sample unit is not its workload's (a BERT run's rates said to count images), or None."""
    unit = header.get("sample_unit")
    try:
        workload = workloads.get(str(header.get("workload", workloads.DEFAULT)))
    except UsageError:
        return None
    if unit is None or unit == workload.sample_unit:
        return None
    return (f"the file's sample_unit is {unit!r}, but {workload.name} counts {workload.sample_unit}s: what its "
            "samples/s count is unknown")


def derived_problem(header: Mapping[str, Any], values: Mapping[str, Any], where: str) -> str | None:
    """Why an ok result's derived figures do not follow from its rate (``where`` names it), or None; or why its rate
    has no known unit."""
    if problem := _unit_problem(header):
        return f"{where}: {problem}"
    rate = _number(values.get("samples_per_sec"))
    mfu, peak, achieved = (_number(values.get(name)) for name in ("mfu", "peak_flops", "achieved_flops"))
    if values.get("mfu") is not None:
        if mfu is not None and mfu > 1.0:
            return f"{where}.mfu is {values['mfu']!r}: above 1, more than the peak it is measured against"
        if peak is None or not peak > 0:
            return f"{where}.mfu is {values['mfu']!r} with no peak_flops to measure it against"
        if achieved is not None and mfu is not None and not _close(mfu, achieved / peak):
            return f"{where}.mfu is {values['mfu']!r}, not achieved_flops / peak_flops ({achieved / peak:.6g})"
    hfu, hardware = _number(values.get("hfu")), _number(values.get("hardware_flops_per_sample"))
    if values.get("hfu") is not None:
        if hfu is not None and hfu > 1.0:
            return f"{where}.hfu is {values['hfu']!r}: above 1, more than the peak it is measured against"
        if peak is None or not peak > 0:
            return f"{where}.hfu is {values['hfu']!r} with no peak_flops to measure it against"
        if hfu is not None and rate is not None and hardware is not None and \
                not _close(hfu, rate * hardware / peak):
            return (f"{where}.hfu is {values['hfu']!r}, not samples_per_sec x hardware_flops_per_sample / peak_flops "
                    f"({rate * hardware / peak:.6g})")
    per_sample = _number(values.get("train_flops_per_sample"))
    if achieved is not None and rate is not None and per_sample is not None and \
            not _close(achieved, rate * per_sample):
        return (f"{where}.achieved_flops is {values['achieved_flops']!r}, not samples_per_sec x train_flops_per_sample "
                f"({rate * per_sample:.6g})")
    tokens = _number(values.get("tokens_per_sec"))
    if tokens is not None and rate is not None:
        known, per_sample_tokens = _tokens_per_sample(header)
        if known and per_sample_tokens is None:
            return (f"{where}.tokens_per_sec is {values['tokens_per_sec']!r} on a workload without tokens "
                    f"({header.get('workload', workloads.DEFAULT)})")
        if per_sample_tokens is not None and not _close(tokens, rate * per_sample_tokens):
            return (f"{where}.tokens_per_sec is {values['tokens_per_sec']!r}, not samples_per_sec x "
                    f"{per_sample_tokens:g} tokens per sample ({rate * per_sample_tokens:.6g})")
    return None
