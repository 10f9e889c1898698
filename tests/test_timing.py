"""The timed window, driven by a runner on a simulated clock (the clock is the test input, not a stand-in), and the
worker's windows (``--repeats``) around it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.standins.engine import StandInRunner
from trainbench.bench.timing import run_window
from trainbench.bench.worker import measure
from trainbench.config import BenchConfig, ModelConfig
from trainbench.frameworks import TORCH


class QueueingRunner:
    """Behaves like an asynchronous device: step() only enqueues work; sync() waits for the queue to drain."""

    def __init__(self, step_cost: list[float], dispatch_cost: float = 0.001) -> None:
        self.now = 0.0
        self.device_free_at = 0.0
        self.step_cost = step_cost
        self.dispatch_cost = dispatch_cost
        self.steps = 0
        self.syncs = 0

    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += self.dispatch_cost
        cost = self.step_cost[self.steps]
        self.device_free_at = max(self.device_free_at, self.now) + cost
        self.steps += 1

    def sync(self) -> None:
        self.syncs += 1
        self.now = max(self.now, self.device_free_at)


def test_window_spans_synchronised_edges_and_excludes_warmup() -> None:
    runner = QueueingRunner([5.0, 5.0] + [0.1] * 10)  # two slow warm-up steps (compilation)
    window = run_window(runner, warmup=2, steps=10, clock=runner.clock)
    assert len(window.warmup_s) == 2 and len(window.step_s) == 10
    # The device works 10 x 0.1 s after the synchronised start; all of it is inside the window.
    assert window.window_s == pytest.approx(1.0 + 0.001)
    assert sum(window.step_s) == pytest.approx(window.window_s)
    assert runner.steps == 12


def test_asynchronous_work_is_counted_even_when_step_returns_early() -> None:
    runner = QueueingRunner([0.0] + [0.5] * 4, dispatch_cost=0.0)
    window = run_window(runner, warmup=1, steps=4, clock=runner.clock)
    # The host saw 0 s per step, but the final synchronisation waits for 2 s of queued device work.
    assert window.step_s[:3] == (0.0, 0.0, 0.0)
    assert window.window_s == pytest.approx(2.0)


def test_sync_every_step_gives_device_time_per_step() -> None:
    runner = QueueingRunner([0.0, 0.5, 0.2, 0.3], dispatch_cost=0.0)
    window = run_window(runner, warmup=1, steps=3, sync_every_step=True, clock=runner.clock)
    assert window.step_s == pytest.approx((0.5, 0.2, 0.3))


def test_hooks_see_every_iteration_number_in_order() -> None:
    runner = QueueingRunner([0.01] * 5)
    seen: list[int] = []
    run_window(runner, warmup=2, steps=3, before_step=[seen.append], clock=runner.clock)
    assert seen == [0, 1, 2, 3, 4]


class CountingRunner(StandInRunner):
    """A step that does nothing but count: what matters here is how many steps run, and where the syncs fall."""

    def __init__(self) -> None:
        self.events: list[str] = []
        super().__init__(lambda: self.events.append("step"), samples_per_step=4)

    def sync(self) -> None:
        self.events.append("sync")


class CountingEngine:
    name = "counting"
    capabilities = TORCH  # measured as a torch process is: its own GPU

    def __init__(self) -> None:
        self.runner = CountingRunner()

    def make_runner(self, config: BenchConfig) -> CountingRunner:
        return self.runner

    def versions(self) -> dict[str, Any]:
        return {}


def test_repeated_windows_share_one_warm_up() -> None:
    """--repeats 3 is one warm-up, then three windows back to back: the warm-up steps run once, before the first
    window's synchronised start, and each window has only its timed steps (through the worker's measurement)."""
    engine = CountingEngine()
    config = BenchConfig(model=ModelConfig(framework="torch", precision="fp32", device="cpu"), batch_size=4,
                         warmup_steps=3, steps=5, windows=3)
    done = measure(config, engine)  # type: ignore[arg-type]
    events = engine.runner.events
    assert events.count("step") == 3 + 3 * 5
    assert events.index("sync") == 3  # the warm-up, then the first window's start
    values = done.result.values
    assert values["windows"] == 3 and values["timed_steps"] == 15 and values["warmup_steps"] == 3
    assert len(done.warmup_s) == 3 and len(done.step_s) == 15


def test_a_window_without_warm_up_times_every_step_it_runs() -> None:
    """run_window with warmup=0 (the second and later windows) runs exactly its timed steps."""
    runner = QueueingRunner([0.1] * 4)
    window = run_window(runner, warmup=0, steps=4, clock=runner.clock)
    assert runner.steps == 4 and window.warmup_s == () and len(window.step_s) == 4
    assert window.window_s == pytest.approx(0.4 + 0.001)
