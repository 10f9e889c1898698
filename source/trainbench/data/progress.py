"""A one-line progress bar on stderr: done/total, images/s and the time left, redrawn in place twice a second.

Drawn only on a terminal: in a log file the carriage returns would pile up into one very long line.
"""

from __future__ import annotations

import sys
import threading
import time
from multiprocessing.sharedctypes import Synchronized
from types import TracebackType
from typing import TextIO

_WIDTH = 30
_INTERVAL_S = 0.5


def format_progress(label: str, done: int, total: int | None, elapsed_s: float) -> str:
    """``label [#####.....] 120/1000 images  95.3 images/s  ETA 0:00:09``; without a total, count and rate only."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    speed = f"{rate:,.1f} images/s"
    if total is None:
        return f"{label} {done:,} images  {speed}"
    filled = int(min(done / total, 1.0) * _WIDTH) if total else _WIDTH
    eta = _clock(max(total - done, 0) / rate) if rate > 0 else "--:--:--"
    return f"{label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {done:,}/{total:,} images  {speed}  ETA {eta}"


def _clock(seconds: float) -> str:
    whole = int(seconds + 0.5)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class Progress:
    """Context manager drawing the bar from a shared counter while the work runs."""

    def __init__(self, label: str, total: int | None, count: Synchronized,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.count = label, total, count
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = time.perf_counter()

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(_INTERVAL_S):
            self._draw()

    def _draw(self) -> None:
        # Read without the counter's lock: a worker killed while holding it (SIGKILL) would block this thread,
        # and with it the command's exit, forever. A display can do with a value a moment old.
        done = self.count.get_obj().value
        line = format_progress(self.label, done, self.total, time.perf_counter() - self._start)
        self.stream.write(f"\r{line}")
        self.stream.flush()
