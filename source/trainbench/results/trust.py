"""How far one throughput result can be trusted: the stated limits, and the flags a result gets past them.

- ``MIN_WINDOW_S``: a timed window under 5 s is short next to what disturbs it (a clock that ramps or throttles over
  seconds, a garbage collection, a checkpoint of another job, the telemetry sampler's first readings), and its
  samples/s moves with them: time more steps.
- ``MAX_SPREAD_PCT``: windows of one batch size whose samples/s differ by more than 10 % of their median measured
  different conditions (or the machine changed under them), so their pooled rate is no single figure, and a change
  between two runs smaller than that cannot be told from noise: time more windows or repeat the run.
- ``BUSY_OTHER_CORES``: other processes keeping half a core busy on average during the windows take CPU time the
  input pipeline and the framework's host threads would have had (``bench.machine_load``; the run's own processes,
  its DataLoader workers and sibling ranks, are not counted).

A value a result lacks (a file written before it was measured, a machine without /proc/stat) gives no flag for that
check. Every module that flags a result should ask here, so that the console, the report and a comparison agree.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from trainbench.results.variation import cv_pct

MIN_WINDOW_S = 5.0  # seconds per timed window
MAX_SPREAD_PCT = 10.0  # (fastest - slowest window) / median, percent
BUSY_OTHER_CORES = 0.5  # mean cores other processes kept busy during the windows


def _number(values: Mapping[str, Any], name: str) -> float | None:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _shown(value: float, limit: float | None = None) -> str:
    """A figure as a flag prints it: three significant digits, more where those would show it at its ``limit``
    (4.999 s is "4.999 s, under the 5 s minimum", never "5 s")."""
    text = ""
    for significant in (3, 4, 5, 6):
        digits = max(0, significant - 1 - math.floor(math.log10(abs(value)))) if value else 0
        text = f"{value:.{digits}f}"
        if limit is None or float(text) != limit:
            break
    return text.rstrip("0").rstrip(".") if "." in text else text


def _short_windows(values: Mapping[str, Any]) -> str | None:
    total = _number(values, "window_s")
    windows = _number(values, "windows") or 1.0  # files without it timed one window
    if total is None or windows < 1:
        return None
    per_window = total / windows
    if per_window >= MIN_WINDOW_S:
        return None
    return (f"windows of {_shown(per_window, MIN_WINDOW_S)} s, under the {MIN_WINDOW_S:g} s minimum: "
            "time more steps (--steps)")


def window_spread(rates: Sequence[float]) -> dict[str, float | None]:
    """How much the windows' own samples/s disagree, in percent: the coefficient of variation (sample standard
    deviation, ddof 1, over the mean) and the spread ((max - min) / median); None with fewer than 2 windows (one
    window has no spread of its own) or a rate that is no finite number. The one computation of both."""
    numbers = [float(rate) for rate in rates if not isinstance(rate, bool) and isinstance(rate, int | float)]
    if len(rates) < 2 or len(numbers) != len(rates) or not all(math.isfinite(rate) for rate in numbers):
        return {"window_cv_pct": None, "window_spread_pct": None}
    median = statistics.median(numbers)
    return {"window_cv_pct": cv_pct(numbers),
            "window_spread_pct": 100 * (max(numbers) - min(numbers)) / median if median else None}


def _spread(values: Mapping[str, Any]) -> str | None:
    spread = _number(values, "window_spread_pct")
    windows = values.get("window_samples_per_sec")
    if spread is None and isinstance(windows, list | tuple):  # a file from before the spread was recorded
        spread = window_spread(windows)["window_spread_pct"]
    if spread is None or spread <= MAX_SPREAD_PCT:
        return None
    return (f"windows spread {_shown(spread, MAX_SPREAD_PCT)} % (over the {MAX_SPREAD_PCT:g} % limit): "
            "more windows (--windows) or repetitions")


def _busy(values: Mapping[str, Any]) -> str | None:
    cores = _number(values, "other_cpu_cores")
    if cores is None or cores <= BUSY_OTHER_CORES:
        return None
    load = _number(values, "load_average")
    load_text = f"; load average {_shown(load)}" if load is not None else ""
    shown = _shown(cores, BUSY_OTHER_CORES)
    return (f"machine busy: processes outside this run kept {shown} cores busy "
            f"during the windows (limit {BUSY_OTHER_CORES:g}){load_text}")


def trust_flags(values: Mapping[str, Any]) -> list[str]:
    """The flags of one result's values (a summary row): short windows, windows that disagree, a busy machine, in
    that order; [] when none applies."""
    return [flag for flag in (_short_windows(values), _spread(values), _busy(values)) if flag]


def worst_of(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several results of one setting (a campaign's repetitions) as one for ``trust_flags``: each check on its worst
    value, the shortest windows, the widest windows' spread, the busiest machine (one flag of each kind, not one per
    repetition)."""
    def highest(found: list[float | None]) -> float | None:
        present = [value for value in found if value is not None]
        return max(present) if present else None

    per_window = [total / (_number(each, "windows") or 1.0) for each in results
                  if (total := _number(each, "window_s")) is not None]
    spreads = [_number(each, "window_spread_pct") if each.get("window_spread_pct") is not None else
               window_spread(list(each.get("window_samples_per_sec") or []))["window_spread_pct"] for each in results]
    return {"window_s": min(per_window) if per_window else None, "windows": 1,
            "window_spread_pct": highest(spreads),
            "other_cpu_cores": highest([_number(each, "other_cpu_cores") for each in results]),
            "load_average": highest([_number(each, "load_average") for each in results])}


def trust_text(values: Mapping[str, Any]) -> str:
    """The flags joined with "; " (empty when there is none)."""
    return "; ".join(trust_flags(values))
