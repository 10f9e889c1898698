"""The timed window's edges are synchronised with the device: on a GPU, every queued step has finished before the
window's clock starts and before it stops. The CPU, where every test runs, needs no synchronisation, so here the
engines' GPU path is forced on and the framework's synchronisation call is replaced by a recorder: the order of
steps, synchronisations and clock reads is what is checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torchvision
from torch import nn

from trainbench.bench.timing import run_window
from trainbench.config import BenchConfig, ModelConfig
from trainbench.engines.torch.engine import ENGINE as TORCH_ENGINE

# TensorFlow after torch (imported above and by conftest), never the other way: see NOTES.md. Imported here, as
# the other TensorFlow test modules do, so that no test pays for the import.
try:
    import tensorflow as tf

    from trainbench.engines.tf import engine as tf_engine
except ImportError:  # the TensorFlow extra is not installed: its test is skipped
    tf_engine = tf = None  # type: ignore[assignment]

WARMUP, STEPS = 2, 3


class Events:
    """One list of what happened, in order: 'step', 'sync' and 'clock' (each read of the window's clock)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._now = 0.0

    def clock(self) -> float:
        self.seen.append("clock")
        self._now += 1.0
        return self._now

    def recorder(self, name: str) -> Callable[..., None]:
        def record(*args: Any, **kwargs: Any) -> None:
            self.seen.append(name)
        return record


def assert_synchronised_edges(seen: list[str]) -> None:
    """A sync between the last warm-up step and the clock read that starts the window, and between the last timed
    step and the clock read that ends it."""
    steps = [i for i, event in enumerate(seen) if event == "step"]
    assert len(steps) == WARMUP + STEPS, seen
    last_warmup, first_timed, last_timed = steps[WARMUP - 1], steps[WARMUP], steps[-1]
    start_read = max(i for i in range(first_timed) if seen[i] == "clock")
    end_read = max(i for i, event in enumerate(seen) if event == "clock")
    assert "sync" in seen[last_warmup + 1:start_read], f"no sync before the window's start: {seen}"
    assert end_read > last_timed and "sync" in seen[last_timed + 1:end_read], f"no sync before its end: {seen}"


def tiny_resnet50(weights: None = None, num_classes: int = 1000) -> nn.Module:
    """A stand-in for the network only (the engine's step, optimizer and sync are its own): cheap on the CPU."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes))


def test_torch_synchronises_the_gpu_at_both_edges_of_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchvision.models, "resnet50", tiny_resnet50)
    config = BenchConfig(model=ModelConfig(framework="torch", precision="fp32", device="cpu", image_size=32),
                         batch_size=2, warmup_steps=WARMUP, steps=STEPS)
    runner = TORCH_ENGINE.make_runner(config)
    events = Events()
    monkeypatch.setattr(runner, "_cuda", True)  # what the runner decided from its device: the GPU path on
    monkeypatch.setattr(torch.cuda, "synchronize", events.recorder("sync"))
    train_step = runner._train_step

    def recorded_step(*batch: torch.Tensor) -> torch.Tensor:
        events.seen.append("step")
        return train_step(*batch)

    monkeypatch.setattr(runner, "_train_step", recorded_step)
    window = run_window(runner, WARMUP, STEPS, clock=events.clock)
    assert len(window.step_s) == STEPS
    assert_synchronised_edges(events.seen)


@pytest.mark.skipif(tf_engine is None, reason="the TensorFlow extra is not installed")
def test_tensorflow_synchronises_its_devices_at_both_edges_of_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    events = Events()
    monkeypatch.setattr(tf.test.experimental, "sync_devices", events.recorder("sync"))
    runner = object.__new__(tf_engine._Runner)  # its step replaced below; sync() is the engine's own
    runner._strategy = tf.distribute.get_strategy()
    runner._step = lambda: events.seen.append("step")
    runner._losses = []
    window = run_window(runner, WARMUP, STEPS, clock=events.clock)
    assert len(window.step_s) == STEPS
    assert_synchronised_edges(events.seen)
