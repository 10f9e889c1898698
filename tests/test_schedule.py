"""The learning-rate schedule: linear warm-up to the linearly scaled peak, then step decay at the decay epochs."""

from __future__ import annotations

from itertools import pairwise

import pytest

from trainbench.config import ModelConfig, OptimizerConfig, TrainConfig
from trainbench.training.schedule import learning_rate


def config(**overrides: object) -> TrainConfig:
    return TrainConfig(model=ModelConfig(), **overrides)  # type: ignore[arg-type]


def peak_of(train: TrainConfig) -> float:
    """The linear scaling rule: the base rate is per 256 images of global batch."""
    return train.optimizer.base_learning_rate * train.batch_size / 256


def test_peak_scales_linearly_with_the_global_batch() -> None:
    for batch in (256, 384, 1024, 1):
        train = config(batch_size=batch, warmup_epochs=0.0)
        assert learning_rate(train, 0.0) == pytest.approx(0.1 * batch / 256)
    doubled = config(batch_size=384, warmup_epochs=0.0, optimizer=OptimizerConfig(base_learning_rate=0.2))
    assert learning_rate(doubled, 0.0) == pytest.approx(0.2 * 384 / 256)


@pytest.mark.parametrize("epoch", [0.0, 0.25, 1.0, 2.5, 4.0, 4.999])
def test_warmup_rises_linearly_from_zero_to_the_peak(epoch: float) -> None:
    train = config(batch_size=512, warmup_epochs=5.0)
    assert learning_rate(train, epoch) == pytest.approx(peak_of(train) * epoch / 5.0)


def test_warmup_starts_at_zero_and_reaches_the_peak_continuously() -> None:
    train = config(warmup_epochs=5.0)
    peak = peak_of(train)
    assert learning_rate(train, 0.0) == 0.0
    assert learning_rate(train, 5.0) == pytest.approx(peak)
    assert learning_rate(train, 5.0 - 1e-9) == pytest.approx(peak, rel=1e-6)
    rates = [learning_rate(train, step / 100) for step in range(501)]  # 100 steps per epoch over the warm-up
    assert all(a < b for a, b in pairwise(rates))


def test_fractional_epochs_follow_the_steps_of_an_epoch() -> None:
    # The loop asks for epoch + step / steps_per_epoch: step 3 of 8 in epoch 1 of a 2-epoch warm-up is 11/16 of it.
    train = config(batch_size=256, warmup_epochs=2.0)
    assert learning_rate(train, 1 + 3 / 8) == pytest.approx(0.1 * (1 + 3 / 8) / 2)


def test_default_schedule_decays_tenfold_at_30_60_and_80() -> None:
    train = config()  # 90 epochs, warm-up 5, x0.1 at 30, 60, 80
    peak = peak_of(train)
    expected = {5.0: peak, 29.99: peak, 30.0: peak * 0.1, 45.0: peak * 0.1, 59.5: peak * 0.1, 60.0: peak * 0.01,
                79.0: peak * 0.01, 80.0: peak * 0.001, 89.99: peak * 0.001}
    for epoch, rate in expected.items():
        assert learning_rate(train, epoch) == pytest.approx(rate), epoch


def test_decay_applies_from_the_decay_epoch_itself() -> None:
    train = config(warmup_epochs=0.0, decay_epochs=(3,), decay_factor=0.5, epochs=6)
    peak = peak_of(train)
    assert learning_rate(train, 2.999) == pytest.approx(peak)
    assert learning_rate(train, 3.0) == pytest.approx(peak * 0.5)


@pytest.mark.parametrize(("decay_epochs", "factor"), [((2, 4, 7), 0.5), ((1,), 0.3), ((10, 20), 0.25)])
def test_custom_decay_multiplies_once_per_decay_epoch_passed(decay_epochs: tuple[int, ...], factor: float) -> None:
    train = config(warmup_epochs=1.0, decay_epochs=decay_epochs, decay_factor=factor, epochs=30)
    peak = peak_of(train)
    for epoch in (1.0, 1.5, 2.0, 3.0, 4.5, 6.9, 7.0, 9.0, 10.0, 15.0, 20.0, 29.0):
        passed = sum(1 for decay in decay_epochs if epoch >= decay)
        assert learning_rate(train, epoch) == pytest.approx(peak * factor**passed), epoch


def test_no_decay_epochs_keeps_the_peak() -> None:
    train = config(decay_epochs=(), warmup_epochs=2.0)
    assert [learning_rate(train, e) for e in (2.0, 50.0, 89.0)] == pytest.approx([peak_of(train)] * 3)


def test_no_warmup_starts_at_the_peak() -> None:
    train = config(warmup_epochs=0.0)
    assert learning_rate(train, 0.0) == pytest.approx(peak_of(train))


def test_schedule_never_increases_after_the_warmup() -> None:
    train = config()
    rates = [learning_rate(train, step / 10) for step in range(50, 900)]
    assert all(b <= a for a, b in pairwise(rates))
    assert min(rates) > 0
