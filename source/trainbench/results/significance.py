"""Whether two measured rates differ, and by how much: the one verdict ``trainbench compare`` and the report give.

The samples are each side's timed windows' own samples/s (or a campaign configuration's repetitions). Welch's
t-test (unequal variances, as pyperf's ``compare_to``) asks whether the means differ; its interval of the difference
says by how much. A rank test (Mann-Whitney) cannot serve here: with 3 windows a side its smallest p is 0.1, so
windows that never overlap were called "not significant". Welch's test needs 2 samples a side; with 2 its interval
is wide (t with about 1 degree of freedom), so the text asks for 3 or more.

The change itself is always B's overall rate over A's (all samples / all timed wall time, as every rate the suite
prints); the interval is that change plus or minus t x the standard error of the difference of the sample means,
relative to A's mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainbench.results.fields import SAMPLES_PER_SEC, WINDOW_SAMPLES_PER_SEC

MIN_SAMPLES = 2  # a side, for a variance and so for Welch's test
USEFUL_SAMPLES = 3  # a side, for an interval narrower than t with 1 degree of freedom gives
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Verdict:
    """B against A: the change in %, its interval, Welch's p and the sentence that says it."""

    change_pct: float  # 100 x (rate_b / rate_a - 1)
    low_pct: float | None  # the CONFIDENCE interval of the change; None without a test
    high_pct: float | None
    p_value: float | None  # two-sided; None without a test
    samples_a: int
    samples_b: int
    significant: bool | None  # None: too few samples for any verdict
    text: str


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, sum((value - mean) ** 2 for value in values) / (len(values) - 1)


def _welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(p, standard error of mean_b - mean_a, t quantile for CONFIDENCE): Welch-Satterthwaite degrees of freedom."""
    # Student's t from scipy.special: the same functions scipy.stats.t calls, without its 1.5 s import; still only
    # when a test is made.
    from scipy.special import stdtr, stdtrit

    (mean_a, var_a), (mean_b, var_b) = _mean_var(a), _mean_var(b)
    part_a, part_b = var_a / len(a), var_b / len(b)
    error = math.sqrt(part_a + part_b)
    if error == 0.0:  # no variance on either side: the means differ or they do not, with certainty
        return (0.0 if mean_a != mean_b else 1.0), 0.0, 0.0
    freedom = (part_a + part_b) ** 2 / (part_a ** 2 / (len(a) - 1) + part_b ** 2 / (len(b) - 1))
    p_value = float(2.0 * stdtr(freedom, -abs(mean_b - mean_a) / error))
    return p_value, error, float(stdtrit(freedom, 0.5 + CONFIDENCE / 2.0))


def _pct(value: float) -> str:
    return f"{value:+.1f} %"


def compare_rates(a: Sequence[float], b: Sequence[float], rate_a: float, rate_b: float, *,
                  sample: str = "windows", advice: str = "--windows 3", alpha: float = 0.05) -> Verdict:
    """B against A from each side's samples (``sample`` names them: "windows", "repetitions") and overall rates;
    ``advice`` is how to get more samples, for the text that says there are too few."""
    change = 100.0 * (rate_b / rate_a - 1.0)
    if min(len(a), len(b)) < MIN_SAMPLES:
        text = (f"{_pct(change)}; no test: {len(a)} and {len(b)} {sample}, Welch's t-test needs at least "
                f"{MIN_SAMPLES} a side ({advice} or more gives a verdict)")
        return Verdict(change, None, None, None, len(a), len(b), None, text)
    p_value, error, quantile = _welch(a, b)
    half = 100.0 * quantile * error / _mean_var(a)[0]
    low, high = change - half, change + half
    significant = p_value < alpha
    interval = f"{CONFIDENCE * 100:g} % interval {_pct(low)} to {_pct(high)}, Welch p = {p_value:.2g}"
    if significant:
        text = f"B {'faster' if change > 0 else 'slower'} by {abs(change):.1f} % ({interval})"
    else:
        text = f"no clear difference: {_pct(change)} ({interval})"
    if min(len(a), len(b)) < USEFUL_SAMPLES:
        text += f"; only {min(len(a), len(b))} {sample} a side: {advice} or more narrows the interval"
    return Verdict(change, low, high, p_value, len(a), len(b), significant, text)


def compare_results(a: Mapping[str, Any], b: Mapping[str, Any], *, alpha: float = 0.05) -> Verdict:
    """Two results of one batch size (their values, as summary.json holds them): the windows' own samples/s are
    the samples, the overall samples/s the change. What ``trainbench compare`` and the report's pairs both call."""
    return compare_rates(window_rates(a), window_rates(b), float(a[SAMPLES_PER_SEC]), float(b[SAMPLES_PER_SEC]),
                         alpha=alpha)


def window_rates(values: Mapping[str, Any]) -> list[float]:
    """A result's samples: its windows' own samples/s; a file from before they were recorded (or holding one that is
    no number) has its overall rate as its one window."""
    windows = values.get(WINDOW_SAMPLES_PER_SEC)
    if isinstance(windows, list) and windows and all(
            isinstance(rate, int | float) and not isinstance(rate, bool) and math.isfinite(rate) for rate in windows):
        return [float(rate) for rate in windows]
    return [float(values[SAMPLES_PER_SEC])]
