"""The interface every framework engine implements.

The benchmark harness (``trainbench.bench``) only sees ``Engine`` and ``StepRunner``; it never imports a framework.
"""

from __future__ import annotations

from typing import Any, Protocol

from trainbench.config import BenchConfig, TrainConfig
from trainbench.training.trainer import Trainer


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
