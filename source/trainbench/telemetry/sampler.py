"""The timeline: a thread that samples the worker's GPUs every ``interval_s`` and writes ``telemetry/batch_<X>.csv``.

The training loop only appends (time, event) pairs to a list (a clock read and an append per step: no NVML call,
no I/O on its thread); the sampler thread writes them with its samples, in time order, and flushes every period,
so a worker that crashes keeps its timeline up to the last period. Column meanings: see ``telemetry.schema``.
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainbench.results.csv_cells import neutral_rows
from trainbench.telemetry.schema import (
    EVENT_SAMPLE,
    EVENT_STEP_END,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    PHASE_DONE,
    PHASE_SETUP,
    PHASE_TIMED,
    PHASE_WARMUP,
    TELEMETRY_FIELDS,
)

DEFAULT_INTERVAL_S = 0.1

Sample = Callable[[], list[dict[str, Any]]]


class Sampler:
    """Samples ``sample()`` (one row per GPU) every ``interval_s`` from ``start`` to ``stop``, with the worker's
    phase, window and step marked on every row; keeps the timed samples for the batch size's summary."""

    def __init__(self, sample: Sample, path: Path, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sample, self.path, self.interval_s, self._clock = sample, path, interval_s, clock
        self.phase = PHASE_SETUP  # phase, window and step: read by the thread, set by the loop
        self.window: int | None = None
        self.step: int | None = None
        self._steps = 0  # steps so far, warm-up and every window: run_window numbers each window's from 0
        self.timed_samples: list[dict[str, Any]] = []
        self._events: deque[dict[str, Any]] = deque()  # append and popleft are atomic: no lock in the loop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-telemetry", daemon=True)
        self._file: Any = None
        self._writer: Any = None
        self.failure: str | None = None  # why the timeline stopped early (a full disk, NVML gone): the run goes on

    # --- called from the training loop: cheap, no I/O

    def step_end(self, iteration: int) -> None:
        """A step returned (``iteration``: run_window's number; the timeline numbers steps over all windows)."""
        if self.phase == PHASE_SETUP:
            self.phase = PHASE_WARMUP
        self.step = self._steps
        self._steps += 1
        self._events.append(self._event(EVENT_STEP_END))

    def window_start(self, window: int) -> None:
        self.phase, self.window = PHASE_TIMED, window
        self._events.append(self._event(EVENT_WINDOW_START))

    def window_end(self, window: int) -> None:
        self._events.append(self._event(EVENT_WINDOW_END))
        self.phase = PHASE_DONE

    def _event(self, event: str) -> dict[str, Any]:
        return {"time_s": self._clock(), "event": event, "phase": self.phase, "window": self.window,
                "step": self.step}

    # --- the thread

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "x", newline="", encoding="utf-8")  # noqa: SIM115 - closed by stop()
        self._writer = csv.DictWriter(self._file, fieldnames=list(TELEMETRY_FIELDS), lineterminator="\n")
        self._writer.writeheader()
        self._write_samples()
        self._thread.start()

    def stop(self) -> None:
        """The last sample and every pending event written, the file closed; never raises (see ``failure``)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._file is not None and not self._file.closed:
            if self.failure is None:
                self._guarded_write()
            with contextlib.suppress(OSError):
                self._file.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and self._guarded_write():
            pass

    def _guarded_write(self) -> bool:
        """One period's rows; on an error the timeline ends with the reason, the measurement does not."""
        try:
            self._write_samples()
        except Exception as error:  # noqa: BLE001 - OSError (disk full), NVML errors: recorded in the result
            self.failure = f"the timeline stopped early: {error}"
            return False
        return True

    def _write_samples(self) -> None:
        marks = {"time_s": self._clock(), "event": EVENT_SAMPLE, "phase": self.phase, "window": self.window,
                 "step": self.step}
        rows = [{**marks, **row} for row in self._sample()]
        if marks["phase"] == PHASE_TIMED:
            self.timed_samples.extend(rows)
        events = [self._events.popleft() for _ in range(len(self._events))]
        # In time order within a flush; an event timed just before a flush may come in the next one: sort by time_s.
        self._writer.writerows(neutral_rows(sorted([*events, *rows], key=lambda row: row["time_s"])))
        self._file.flush()
