"""The learning-rate schedule both engines follow, computed in one place.

Linear warm-up from 0 to the peak over ``warmup_epochs``, then the peak multiplied by ``decay_factor`` at each
epoch in ``decay_epochs`` (the piecewise schedule of the original suite's ResNet-50: x0.1 at 30, 60 and 80).
"""

from __future__ import annotations

from bisect import bisect_right

from trainbench.config import TrainConfig


def learning_rate(config: TrainConfig, epoch: float) -> float:
    """Learning rate at a fractional epoch (``step / steps_per_epoch``)."""
    peak = config.optimizer.learning_rate(config.batch_size)
    if epoch < config.warmup_epochs:
        return peak * epoch / config.warmup_epochs
    return peak * config.decay_factor ** bisect_right(config.decay_epochs, epoch)
