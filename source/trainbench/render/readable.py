"""How the report page names and shows a value: human headers, readable units, trust checks, model verdicts.

The page's tables show "median step (ms)" where summary.csv holds ``step_time_median_s`` (in seconds): the headers
and units are derived here, in one place, from the field registry (``results.fields``: each field's unit and the
console table's header). A size in bytes (unit "B") is shown in the binary unit it reads best in, each cell with its
own ("812.4 MiB", "1.534 GiB"): peak memories of one table span KiB to GiB. The files keep their raw names and
units; only the page converts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from trainbench.results import fields
from trainbench.results.trust import trust_text, window_spread

# Headers of the columns that are no result field (the page's own and the campaign summary's).
_OTHERS = {
    "batch_size": "batch size", "status": "status", "cv_pct": "CV (%)", "spread_pct": "spread (%)",
    "checks": "checks", "run_folder": "run folder", "scaling_efficiency": "scaling efficiency",
    "vs_median_pct": "vs median GPU (%)", "adjusted_r2": "adjusted R²", "smape": "SMAPE (%)", "rss": "RSS",
}
# Words for result fields whose console header is missing or too terse for a page.
_WORDS = {
    "step_time_median_s": "median step", "step_time_p10_s": "p10 step", "step_time_p90_s": "p90 step",
    "step_time_mad_s": "MAD of steps", "window_s": "window", "compile_s": "compile",
    "samples_per_sec_median": "median samples/s",  # of a run's windows; of a campaign's repetitions
    "input_samples_per_sec": "pipeline alone samples/s",
    "energy_j": "energy", "joules_per_sample": "energy per sample", "mean_power_w": "mean power",
    "sampled_power_w": "sampled power", "sm_clock_median_mhz": "median SM clock",
    "temperature_max_c": "max temperature",
    "train_flops_per_sample": "training FLOP per sample", "peak_flops": "peak",
    "matmul_precision": "matmul precision", "peak_memory_bytes": "peak memory",
    "peak_memory_kind": "peak memory measured by", "memory_parameters_bytes": "parameter memory",
    "memory_gradients_bytes": "gradient memory", "memory_optimizer_bytes": "optimizer memory",
    "memory_activations_bytes": "activation memory", "optimizer_state_bytes": "optimizer state memory",
    "activation_checkpointing": "activation checkpointing", "parameters_held": "parameters held",
    "hardware_flops_per_sample": "hardware FLOP per sample",
}
# The page's unit where it is not the file's: (unit shown, factor from the file's value).
_SHOWN_UNITS = {"step_time_median_s": ("ms", 1e3), "step_time_p10_s": ("ms", 1e3), "step_time_p90_s": ("ms", 1e3),
                "step_time_mad_s": ("ms", 1e3), "achieved_flops": ("TFLOP/s", 1e-12),
                "peak_flops": ("TFLOP/s", 1e-12), "mfu": ("%", 100.0), "hfu": ("%", 100.0)}
_CONSOLE_UNIT = re.compile(r"\s+(ms|%)$")  # "step median ms", "MFU %": the unit the console header ends in


def header(name: str) -> str:
    """The page's header of a column: the field's words with its unit in brackets ("median step (ms)",
    "window (s)", "MFU (%)"), a count or flag's plain words, a size's words alone (each cell says its unit); a name
    the registry lacks with spaces for underscores."""
    if name in _OTHERS:
        return _OTHERS[name]
    field = fields.BY_NAME.get(name)
    if field is None:
        return name.replace("_", " ")
    unit = _SHOWN_UNITS.get(name, (field.unit, 1.0))[0]
    words = _WORDS.get(name) or _CONSOLE_UNIT.sub("", field.console) or name.replace("_", " ")
    if not unit or unit in ("fraction", BYTES) or words.endswith(unit):  # "samples/s" holds its unit already
        return words
    return f"{words} ({unit})"


def shown(name: str, value: Any) -> Any:
    """A value in the page's unit for its column (seconds of a step as ms, a fraction of peak as %, a size as
    "1.534 GiB")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    field = fields.BY_NAME.get(name)
    if field is not None and field.unit == BYTES and math.isfinite(value) and value >= 0:
        return size_text(value)
    factor = _SHOWN_UNITS.get(name, ("", 1.0))[1]
    return value if factor == 1.0 else value * factor


# --- sizes in bytes ------------------------------------------------------------------------------------------

BYTES = "B"  # the registry's unit of a size
_BINARY = (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10))


def size_unit(largest: float) -> tuple[str, float]:
    """The binary unit a size of ``largest`` bytes reads best in, and its factor from bytes: the largest unit it
    holds one of (GiB from 1 GiB), bytes below 1 KiB."""
    return next(((unit, 1.0 / size) for unit, size in _BINARY if largest >= size), (BYTES, 1.0))


def size_text(value: float) -> str:
    """"812.4 MiB", "1.534 GiB", "96 B": 4 significant digits, as the page's other numbers."""
    unit, factor = size_unit(value)
    return f"{value * factor:.4g} {unit}"


# --- trust: how much the windows of one batch size agree -------------------------------------------------------

def with_trust(row: dict[str, Any]) -> dict[str, Any]:
    """An ok result with its windows' CV and spread (%: computed where its file predates them) and its trust flags
    (``results.trust``, as the console prints them); any other row as it is."""
    if row.get("status") != "ok":
        return row
    windows = row.get(fields.WINDOW_SAMPLES_PER_SEC)
    spread = window_spread(windows if isinstance(windows, list | tuple) else [])
    filled = {name: spread[name] for name in spread if row.get(name) is None}  # files from before they were recorded
    return {**row, **filled, "checks": trust_text(row) or "ok"}


# --- performance models --------------------------------------------------------------------------------------

# README gives no thresholds for a model's verdict; these are the page's (named on it).
GOOD_SMAPE, GOOD_ADJUSTED_R2, USABLE_SMAPE = 5.0, 0.9, 15.0
VERDICT_RULE = (f"good: SMAPE ≤ {GOOD_SMAPE:g} % and adjusted R² ≥ {GOOD_ADJUSTED_R2:g} (or undefined: a constant "
                f"model); usable: SMAPE ≤ {USABLE_SMAPE:g} %; else poor")
_NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?:[eE][-+]?\d+)?|(?<![\w.])\d+[eE][-+]?\d+")


def verdict(smape: Any, adjusted_r2: Any) -> str:
    """good / usable / poor by ``VERDICT_RULE``; "unknown" without a SMAPE."""
    if not isinstance(smape, int | float) or isinstance(smape, bool) or not math.isfinite(smape):
        return "unknown"
    fitting = adjusted_r2 is None or (isinstance(adjusted_r2, int | float) and adjusted_r2 >= GOOD_ADJUSTED_R2)
    if smape <= GOOD_SMAPE and fitting:
        return "good"
    return "usable" if smape <= USABLE_SMAPE else "poor"


def short_numbers(text: str) -> str:
    """A function's text with every decimal number at 4 significant digits (exponents and names untouched)."""
    return _NUMBER.sub(lambda number: f"{float(number[0]):.4g}", text)


def percent_error(relative: Any) -> str:
    """A left-out check's relative error as a signed percentage ("+2.1 %"), "" without one."""
    if not isinstance(relative, int | float) or isinstance(relative, bool) or not math.isfinite(relative):
        return ""
    return f"{relative * 100:+.3g} %"


def joined(items: Sequence[str]) -> str:
    return "; ".join(item for item in items if item)
