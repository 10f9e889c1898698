"""A stand-in engine for the worker's measurement: its step runs a given function (nothing, or a sleep), so the
harness around it (timing windows, telemetry, result fields) runs for real without a framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainbench.config import BenchConfig
from trainbench.engines.capabilities import TORCH


class StandInRunner:
    compile_s = None  # nothing prepared ahead of the windows

    def __init__(self, step: Callable[[], object], images_per_step: int) -> None:
        self._step = step
        self.images_per_step = images_per_step

    def step(self) -> None:
        self._step()

    def sync(self) -> None:
        pass


class StandInEngine:
    capabilities = TORCH  # measured as a torch process is: its own GPU

    def __init__(self, name: str, step: Callable[[], object] = lambda: None, images_per_step: int = 2) -> None:
        self.name = name
        self._step = step
        self._images_per_step = images_per_step

    def make_runner(self, config: BenchConfig) -> StandInRunner:
        return StandInRunner(self._step, self._images_per_step)

    def versions(self) -> dict[str, Any]:
        return {}
