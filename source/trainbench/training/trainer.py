"""What the training loop needs from a framework: defined here, beside the loop, and implemented by the engines
(``Engine.make_trainer``), so the loop never imports an engine."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Trainer(Protocol):
    """One framework's side of end-to-end training (each engine's ``make_trainer``); the loop that drives it is
    ``trainbench.training.loop``."""

    steps_per_epoch: int
    eval_steps: int
    global_batch: int  # images per training step, all replicas together
    is_primary: bool  # the one process (of several with torchrun) that writes metrics and logs

    def train_step(self, learning_rate: float) -> None:
        """One optimizer step on the next training batch at this learning rate (may run asynchronously)."""

    def mean_loss(self) -> float:
        """Mean training loss since the previous call (synchronises the device)."""

    def evaluate(self) -> dict[str, float]:
        """One pass over the evaluation batches: {"loss", "top1", "top5", "examples"} (accuracies in 0..1)."""

    def save(self, directory: Path, epoch: int) -> None:
        """Write a complete checkpoint after ``epoch`` epochs into ``directory``, atomically (temp name, rename)."""

    def restore(self, directory: Path) -> int:
        """Load the newest complete checkpoint in ``directory``; return its epoch count (0 when there is none)."""
