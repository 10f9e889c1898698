"""Run training iterations with a profiled window of exactly [start, start + count).

Hooks see every iteration. The window opens after the device has been synchronised following the unprofiled
iterations and closes after it has been synchronised following the last profiled one, so no work of an iteration
outside the window leaks into a capture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from trainbench.bench.timing import Window, run_window
from trainbench.config import ProfileConfig
from trainbench.engines.base import StepRunner
from trainbench.profile.markers import Markers

EPOCH_RANGE = "epoch:0"  # the benchmark's iterations all belong to one (synthetic) epoch


def step_range(iteration: int) -> str:
    return f"step:{iteration}"


class WindowHooks(Protocol):
    def begin_step(self, iteration: int) -> None: ...

    def end_step(self, iteration: int) -> None: ...

    def begin_window(self) -> None: ...

    def end_window(self) -> None: ...


class CaptureHooks:
    """CUDA profiler start/stop at the window's edges; an NVTX range around every step and around the epoch."""

    def __init__(self, markers: Markers) -> None:
        self.markers = markers

    def begin_step(self, iteration: int) -> None:
        if iteration == 0:
            self.markers.push_range(EPOCH_RANGE)
        self.markers.push_range(step_range(iteration))

    def end_step(self, iteration: int) -> None:
        self.markers.pop_range()

    def begin_window(self) -> None:
        self.markers.start_capture()

    def end_window(self) -> None:
        self.markers.stop_capture()
        self.markers.pop_range()  # the epoch: the window is the last thing the worker runs


class WindowRecorder:
    """Which iterations ran inside the window: the record a test or a reader checks the window against."""

    def __init__(self) -> None:
        self.inside = False
        self.iterations: list[int] = []

    def begin_step(self, iteration: int) -> None:
        if self.inside:
            self.iterations.append(iteration)

    def end_step(self, iteration: int) -> None:
        pass

    def begin_window(self) -> None:
        self.inside = True

    def end_window(self) -> None:
        self.inside = False


def profile_window(runner: StepRunner, window: ProfileConfig, hooks: Sequence[WindowHooks]) -> Window:
    """Iterations [0, start) unprofiled, then [start, stop) inside the window; the window's own timing is returned
    (a profiler attached, so it is not a throughput figure)."""

    def before(iteration: int) -> None:
        if iteration == window.start_iteration:
            print(f"profile: window opens before iteration {iteration}", flush=True)
            for hook in hooks:
                hook.begin_window()
        for hook in hooks:
            hook.begin_step(iteration)

    def after(iteration: int) -> None:
        for hook in reversed(hooks):
            hook.end_step(iteration)

    timing = run_window(runner, window.start_iteration, window.iterations, before_step=[before], after_step=[after])
    for hook in reversed(hooks):
        hook.end_window()
    print(f"profile: window closed after iteration {window.stop_iteration - 1}", flush=True)
    return timing
