"""GPU telemetry wired into a worker's timed windows: counters at both synchronised edges, the sampler between.

``WindowTelemetry.open`` never fails a measurement: without a GPU or NVML it records why and every hook does
nothing. The edges are read outside the timed interval (after the start's synchronisation and before its clock
read; after the end's clock read), so NVML's queries never count as training time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainbench.errors import os_reason
from trainbench.telemetry.probe import Edge, GpuProbe
from trainbench.telemetry.sampler import Sampler
from trainbench.telemetry.summary import no_telemetry, summarize


class WindowTelemetry:
    """One batch size's telemetry: ``window_start``/``window_end`` around every timed window, ``step_end`` after
    every step, ``values`` for its result, ``close`` at the end (also after a failure)."""

    def __init__(self, probe: GpuProbe | None, note: str | None, sampler: Sampler | None,
                 timeline_note: str | None = None) -> None:
        self.probe, self.note, self.sampler, self.timeline_note = probe, note, sampler, timeline_note
        self.gpus = list(probe.gpus) if probe is not None else []
        self.starts: list[Edge] = []
        self.ends: list[Edge] = []

    @classmethod
    def open(cls, device: str, timeline: Path | None, interval_s: float, every_gpu: bool = False,
             local_rank: int = 0, clock: Callable[[], float] = time.monotonic) -> WindowTelemetry:
        """Telemetry of the worker's GPUs (``every_gpu``: all it sees, for one process driving them all; else its
        ``local_rank``'s); the timeline CSV at ``timeline`` when ``interval_s`` > 0. ``clock`` stamps the edges and
        the timeline (CLOCK_MONOTONIC, see ``schema``; tests give a stand-in's)."""
        probe = GpuProbe.open(device, every_gpu, local_rank, clock)
        if isinstance(probe, str):
            return cls(None, probe, None)
        if timeline is None or interval_s <= 0:
            return cls(probe, None, None)
        sampler = Sampler(probe.sample, timeline, interval_s, clock)
        try:
            sampler.start()
        except OSError as error:  # the file cannot be made: energy and counters are still measured
            return cls(probe, None, None, f"no timeline: {timeline}: {os_reason(error)}")
        return cls(probe, None, sampler)

    @property
    def step_hooks(self) -> Sequence[Any]:
        return (self.sampler.step_end,) if self.sampler else ()

    def window_start(self, window: int) -> None:
        if self.probe is not None:
            self.starts.append(self.probe.edge())
        if self.sampler is not None:
            self.sampler.window_start(window)

    def window_end(self, window: int) -> None:
        if self.sampler is not None:
            self.sampler.window_end(window)
        if self.probe is not None:
            self.ends.append(self.probe.edge())

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self.probe is not None:
            self.probe.close()
            self.probe = None  # values() still works from what was read

    def values(self, windows_s: Sequence[float], images: int) -> dict[str, Any]:
        """The result's telemetry fields (call after ``close``: the sampler's last rows are in)."""
        if self.note is not None:
            return no_telemetry(self.note)
        samples = self.sampler.timed_samples if self.sampler else []
        values = summarize(self.gpus, self.starts, self.ends, windows_s, images, samples)
        failure = self.sampler.failure if self.sampler else self.timeline_note
        notes = [note for note in (values["telemetry_note"], failure) if note]
        return {**values, "telemetry_note": "; ".join(notes) or None}
