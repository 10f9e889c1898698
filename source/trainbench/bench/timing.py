"""The timed window: warm-up excluded, the device synchronised at both edges.

Per-step times are host-side intervals between step returns. Frameworks queue work asynchronously, so a single
interval can be short or long, but the intervals add up exactly to the synchronised window, which is what the
throughput is computed from (images / wall time of the window, never a mean of per-step rates).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainbench.engines.base import StepRunner

StepHook = Callable[[int], None]  # called with the global iteration number (warm-up included)
EdgeHook = Callable[[], None]  # called at a synchronised edge of the timed window, outside the timed interval


@dataclass(frozen=True)
class Window:
    warmup_s: tuple[float, ...]  # each warm-up step, kept for inspection, never used in the statistics
    step_s: tuple[float, ...]  # each timed step; sums to window_s
    window_s: float  # wall time from the synchronised start to the synchronised end


def run_window(
    runner: StepRunner,
    warmup: int,
    steps: int,
    *,
    sync_every_step: bool = False,
    before_step: Sequence[StepHook] = (),
    after_step: Sequence[StepHook] = (),
    at_start: EdgeHook | None = None,
    at_end: EdgeHook | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Window:
    """Run ``warmup`` untimed then ``steps`` timed training steps of ``runner``.

    ``before_step`` and ``after_step`` hooks see every iteration (warm-up included) with its global number; the
    device is synchronised after the warm-up, before the first timed step's hooks run. ``at_start`` runs after that
    synchronisation and before the window's clock starts, ``at_end`` after the final synchronisation and the
    clock's last read: what they do (reading energy counters) is never timed.
    """
    iteration = 0

    def one_step() -> None:
        nonlocal iteration
        for hook in before_step:
            hook(iteration)
        runner.step()
        if sync_every_step:
            runner.sync()
        for hook in after_step:
            hook(iteration)
        iteration += 1

    warmup_s = []
    previous = clock()
    for _ in range(warmup):
        one_step()
        now = clock()
        warmup_s.append(now - previous)
        previous = now
    runner.sync()
    if at_start is not None:
        at_start()

    start = previous = clock()
    marks = []
    for _ in range(steps - 1):
        one_step()
        marks.append(clock())
    one_step()
    runner.sync()
    end = clock()
    if at_end is not None:
        at_end()
    marks.append(end)
    step_s = [mark - before for before, mark in zip([start, *marks[:-1]], marks, strict=True)]
    return Window(warmup_s=tuple(warmup_s), step_s=tuple(step_s), window_s=end - start)
