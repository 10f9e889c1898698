"""The interface every framework engine implements.

The benchmark harness (``trainbench.bench``) only sees ``Engine`` and ``StepRunner``; it never imports a framework.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from trainbench.config import BenchConfig, TrainConfig


class StepRunner(Protocol):
    """A compiled training step over a fixed input source, ready to be timed."""

    def step(self) -> None:
        """Run one training step: forward, loss, backward, optimizer update. May return before the device is done."""

    def sync(self) -> None:
        """Block until the device has finished all work queued so far."""


class Engine(Protocol):
    name: str

    def versions(self) -> dict[str, Any]:
        """Framework, CUDA and cuDNN versions and the devices the framework sees, for env.json."""

    def resolve_device(self, requested: str) -> str:
        """'auto' -> 'cuda' if a GPU is visible else 'cpu'; 'cuda' without a GPU raises UsageError."""

    def make_runner(self, config: BenchConfig) -> StepRunner:
        """Build model, optimizer and synthetic (or, later, real) input for one batch size."""

    def is_out_of_memory(self, error: BaseException) -> bool:
        """True when ``error`` is the framework's allocation failure (host or device)."""

    def make_trainer(self, config: TrainConfig) -> Trainer:
        """Build model, optimizer and the training and evaluation input for end-to-end training."""


class Trainer(Protocol):
    """One framework's side of end-to-end training; the loop itself is ``trainbench.training.loop``."""

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
