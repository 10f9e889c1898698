"""The verdict compare and the report give: Welch's t-test on the windows, its interval, and too few windows."""

from __future__ import annotations

import pytest
from scipy.stats import ttest_ind

from trainbench.results.significance import compare_rates


def test_three_windows_a_side_that_never_overlap_are_significant() -> None:
    a, b = [100.0, 102.0, 98.0], [1560.0, 1555.0, 1565.0]  # +1,460 %: the case Mann-Whitney called "no"
    verdict = compare_rates(a, b, 100.0, 1560.0)
    assert verdict.significant is True and verdict.p_value is not None and verdict.p_value < 0.001
    assert verdict.change_pct == pytest.approx(1460.0)
    assert verdict.low_pct is not None and verdict.high_pct is not None
    assert verdict.low_pct < 1460.0 < verdict.high_pct and verdict.low_pct > 1400.0
    assert verdict.text.startswith("B faster by 1460.0 %") and "Welch p" in verdict.text


def test_p_value_is_welchs() -> None:
    a, b = [10.0, 11.0, 12.0, 10.5], [11.0, 12.5, 13.0, 12.0]
    verdict = compare_rates(a, b, 10.9, 12.1)
    assert verdict.p_value == pytest.approx(float(ttest_ind(a, b, equal_var=False).pvalue))


def test_overlapping_windows_are_no_clear_difference_with_their_interval() -> None:
    verdict = compare_rates([100.0, 110.0, 90.0], [101.0, 112.0, 92.0], 100.0, 101.7)
    assert verdict.significant is False
    assert verdict.low_pct is not None and verdict.high_pct is not None and verdict.low_pct < 0 < verdict.high_pct
    assert verdict.text.startswith("no clear difference: +1.7 %")


def test_slower_is_said() -> None:
    verdict = compare_rates([200.0, 201.0, 199.0], [100.0, 101.0, 99.0], 200.0, 100.0)
    assert verdict.significant and verdict.text.startswith("B slower by 50.0 %")


def test_one_window_gives_the_change_and_says_how_many_are_needed() -> None:
    verdict = compare_rates([100.0], [150.0, 151.0, 149.0], 100.0, 150.0)
    assert verdict.significant is None and verdict.p_value is None and verdict.low_pct is None
    assert verdict.change_pct == pytest.approx(50.0)
    assert "+50.0 %; no test: 1 and 3 windows" in verdict.text and "at least 2 a side" in verdict.text
    assert "--windows 3" in verdict.text


def test_two_windows_a_side_asks_for_more() -> None:
    verdict = compare_rates([100.0, 101.0], [100.5, 101.5], 100.5, 101.0, sample="repetitions", advice="--repeat 3")
    assert verdict.p_value is not None and "only 2 repetitions a side: --repeat 3 or more" in verdict.text


def test_no_variance_is_certain_either_way() -> None:
    assert compare_rates([5.0, 5.0], [5.0, 5.0], 5.0, 5.0).significant is False
    differ = compare_rates([5.0, 5.0, 5.0], [6.0, 6.0, 6.0], 5.0, 6.0)
    assert differ.significant and differ.p_value == 0.0 and differ.low_pct == differ.high_pct == pytest.approx(20.0)


def test_results_are_compared_on_their_windows_and_overall_rates() -> None:
    from trainbench.results.significance import compare_results

    a = {"samples_per_sec": 100.0, "window_samples_per_sec": [99.0, 100.0, 101.0]}
    b = {"samples_per_sec": 120.0, "window_samples_per_sec": [119.0, 120.0, 121.0]}
    assert compare_results(a, b).text.startswith("B faster by 20.0 %")
    old = {"samples_per_sec": 100.0}  # no windows recorded: one sample, no test
    assert compare_results(old, b).significant is None
