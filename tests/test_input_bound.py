"""The input-bound flag: a result is input bound when the input pipeline alone delivers less than 1.1 x the
measured training rate (less than 10 % headroom), and not from 1.1 x on."""

from __future__ import annotations

import pytest

from trainbench.bench.input_bench import is_input_bound

# 100 and 50: rates whose product with 1.1 rounds above 110 % in floating point (100 x 1.1 = 110.00000000000001),
# which once made exactly 110 % "bound"; the others are exact.
TRAINING_RATES = [40.0, 50.0, 100.0, 250.0, 1000.0]


@pytest.mark.parametrize("training", TRAINING_RATES)
def test_109_percent_of_the_training_rate_is_input_bound(training: float) -> None:
    """9 % headroom is less than 10 %: the pipeline may be what the training waits for."""
    assert is_input_bound(training * 109 / 100, training)


@pytest.mark.parametrize("training", TRAINING_RATES)
def test_110_percent_of_the_training_rate_is_not_input_bound(training: float) -> None:
    """Exactly 10 % headroom is enough: the threshold is 'less than 1.1 x', not 'at most'."""
    assert not is_input_bound(training * 110 / 100, training)


@pytest.mark.parametrize("training", TRAINING_RATES)
def test_111_percent_of_the_training_rate_is_not_input_bound(training: float) -> None:
    assert not is_input_bound(training * 111 / 100, training)


def test_a_pipeline_slower_than_training_is_input_bound_and_a_much_faster_one_is_not() -> None:
    assert is_input_bound(50.0, 100.0) and is_input_bound(100.0, 100.0)
    assert not is_input_bound(1000.0, 100.0)
