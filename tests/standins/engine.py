"""A stand-in engine for the worker's measurement: its step runs a given function (nothing, or a sleep), so the
harness around it (timing windows, telemetry, result fields) runs for real without a framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainbench.config import BenchConfig
from trainbench.engines.base import MemoryBreakdown
from trainbench.frameworks import TORCH


class StandInRunner:
    compile_s = None  # nothing prepared ahead of the windows

    def __init__(self, step: Callable[[], object], samples_per_step: int) -> None:
        self._step = step
        self.samples_per_step = samples_per_step
        self.tokens_per_step: int | None = None
        self.parameters = 0
        self.parameters_held = 0
        self.train_flops_per_sample: float | None = None
        self.hardware_flops_per_sample: float | None = None
        self.flops_note = "a stand-in counts nothing"
        self.step_record: dict[str, str | int | None] = {"optimizer": "a stand-in's"}
        self._losses: list[float] = []

    def step(self) -> None:
        """The step function's return value is its loss when it is a number (a test's NaN), else 1."""
        loss = self._step()
        self._losses.append(float(loss) if isinstance(loss, int | float) else 1.0)

    def sync(self) -> None:
        pass

    def take_losses(self) -> list[float]:
        losses, self._losses = self._losses, []
        return losses

    def loss_scale(self) -> float | None:
        return None

    def reset_peak_memory(self) -> None:
        pass

    def peak_memory(self) -> tuple[int | None, str]:
        return None, ""  # as on the CPU: the harness reads the process's resident peak

    def memory(self) -> MemoryBreakdown:
        return MemoryBreakdown(4 * self.parameters, 4 * self.parameters, None, None, None, "a stand-in holds nothing")


class StandInEngine:
    capabilities = TORCH  # measured as a torch process is: its own GPU

    def __init__(self, name: str, step: Callable[[], object] = lambda: None, samples_per_step: int = 2,
                 **runner: Any) -> None:
        self.name = name
        self._step = step
        self._samples_per_step = samples_per_step
        self._runner = runner  # the runner's attributes to set: tokens_per_step, parameters, train_flops_per_sample

    def make_runner(self, config: BenchConfig) -> StandInRunner:
        runner = StandInRunner(self._step, self._samples_per_step)
        for name, value in self._runner.items():
            setattr(runner, name, value)
        return runner

    def versions(self) -> dict[str, Any]:
        return {}
