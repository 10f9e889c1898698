"""Statistics of the timed window, checked against values computed by hand."""

from __future__ import annotations

import pytest

from trainbench.bench.stats import samples_per_sec, summarize, summarize_windows
from trainbench.bench.timing import Window


def test_images_per_sec_is_images_over_window_time() -> None:
    assert samples_per_sec(32, 10, 2.0) == pytest.approx(160.0)


def test_throughput_is_not_the_mean_of_per_step_rates() -> None:
    # Steps of 0.1 s and 0.3 s at batch 10: 20 images in 0.4 s = 50 images/s; the mean of rates would say 66.7.
    window = Window(warmup_s=(5.0,), step_s=(0.1, 0.3), window_s=0.4)
    summary = summarize(10, window)
    assert summary["samples_per_sec"] == pytest.approx(50.0)
    assert summary["samples_per_sec"] != pytest.approx((10 / 0.1 + 10 / 0.3) / 2)


def test_summary_percentiles_and_mad_from_known_steps() -> None:
    steps = tuple(s / 1000 for s in range(1, 11))  # 1..10 ms
    summary = summarize(4, Window(warmup_s=(1.0, 1.0), step_s=steps, window_s=sum(steps)))
    # Linear interpolation between closest ranks: rank = q * (n - 1).
    assert summary["step_time_median_s"] == pytest.approx(0.0055)
    assert summary["step_time_p10_s"] == pytest.approx(0.001 + 0.9 * 0.001)
    assert summary["step_time_p90_s"] == pytest.approx(0.009 + 0.1 * 0.001)
    # |x - 5.5| for 1..10 is 4.5,3.5,...,0.5,0.5,...,4.5: median 2.5 ms.
    assert summary["step_time_mad_s"] == pytest.approx(0.0025)
    assert summary["samples_per_sec"] == pytest.approx(4 * 10 / 0.055)
    assert summary["timed_steps"] == 10
    assert summary["warmup_steps"] == 2


def test_mad_is_the_median_of_absolute_deviations_robust_to_one_slow_step() -> None:
    # Steps 1, 1, 1, 10 ms: median 1 ms, deviations 0, 0, 0, 9 ms: the median deviation is 0 (one stall does not
    # move it), where the mean absolute deviation would be 2.25 ms.
    steps = (0.001, 0.001, 0.001, 0.010)
    summary = summarize(1, Window(warmup_s=(), step_s=steps, window_s=sum(steps)))
    assert summary["step_time_median_s"] == pytest.approx(0.001)
    assert summary["step_time_mad_s"] == 0.0


def test_warmup_never_enters_the_statistics() -> None:
    timed = (0.01, 0.01, 0.01)
    slow_warmup = summarize(1, Window(warmup_s=(100.0,), step_s=timed, window_s=0.03))
    no_warmup = summarize(1, Window(warmup_s=(), step_s=timed, window_s=0.03))
    assert slow_warmup["samples_per_sec"] == no_warmup["samples_per_sec"]
    assert slow_warmup["step_time_p90_s"] == no_warmup["step_time_p90_s"]


def test_empty_window_is_refused() -> None:
    with pytest.raises(ValueError):
        samples_per_sec(1, 1, 0.0)


def test_several_windows_pool_their_images_and_report_their_spread() -> None:
    # Batch 8: window A 4 steps in 0.4 s (80 images/s), B 4 steps in 0.8 s (40), C 4 steps in 0.5 s (64).
    windows = [Window(warmup_s=(9.0,), step_s=(0.1,) * 4, window_s=0.4),
               Window(warmup_s=(), step_s=(0.2,) * 4, window_s=0.8),
               Window(warmup_s=(), step_s=(0.125,) * 4, window_s=0.5)]
    summary = summarize_windows(8, windows)
    assert summary["window_samples_per_sec"] == pytest.approx([80.0, 40.0, 64.0])
    assert (summary["samples_per_sec_median"], summary["samples_per_sec_min"], summary["samples_per_sec_max"]) == \
        pytest.approx((64.0, 40.0, 80.0))
    # All 96 timed images over all 1.7 s of timed wall time, not the mean of the three rates (61.3).
    assert summary["samples_per_sec"] == pytest.approx(96 / 1.7)
    assert (summary["windows"], summary["timed_steps"], summary["warmup_steps"]) == (3, 12, 1)
    assert summary["window_s"] == pytest.approx(1.7)
    assert summary["step_time_median_s"] == pytest.approx(0.125)
    # how much they disagree: (80 - 40) / 64 and the sample standard deviation (ddof 1) over the mean, in percent
    assert summary["window_spread_pct"] == pytest.approx(62.5)
    assert summary["window_cv_pct"] == pytest.approx(100 * 20.1329 / (184 / 3), rel=1e-5)


def test_one_window_has_no_spread_of_its_own() -> None:
    summary = summarize(2, Window(warmup_s=(), step_s=(0.1, 0.1), window_s=0.2))
    assert summary["windows"] == 1
    assert summary["samples_per_sec_min"] == summary["samples_per_sec_max"] == summary["samples_per_sec"]
    assert summary["window_cv_pct"] is None and summary["window_spread_pct"] is None
