"""The coefficient of variation, the one computation of it: a run's windows (``results.trust``), a campaign's
repetitions (``campaign.table``) and a variability study's GPUs and repetitions (``analysis.variability``) all
state their spread with it, so that the same numbers give the same CV wherever they are shown."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def cv_pct(values: Sequence[float]) -> float | None:
    """The sample standard deviation over the mean, x 100; None with fewer than 2 values or a mean of 0.

    ddof 1 (``statistics.stdev``): the values are a few samples of a rate (windows, repetitions, GPUs), not the
    whole population, and the population's deviation would understate their spread, the more so the fewer there
    are. The sums are exact (``statistics``), so the order of the values does not change the last digit."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return 100 * statistics.stdev(values) / mean if mean else None
