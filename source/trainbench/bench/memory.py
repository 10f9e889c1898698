"""The peak memory of the timed windows, on every device: the framework allocator's on a GPU (the runner's
``peak_memory``), the worker process's resident set on the CPU, where no allocator keeps a peak.

On Linux the resident peak (``VmHWM`` in /proc/self/status) can be started afresh by writing 5 to
/proc/self/clear_refs, so the CPU's figure covers the windows, not the imports and the model's construction before
them; where that write is refused the peak since the worker started is reported, and ``peak_memory_kind`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainbench.engines.base import StepRunner

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")
RESIDENT_PEAK = "the worker's peak resident set (VmHWM) over the timed windows"
RESIDENT_PEAK_SINCE_START = "the worker's peak resident set (VmHWM) since it started: /proc/self/clear_refs refused"


def reset_resident_peak() -> bool:
    """Start the process's resident peak afresh; False where the kernel refuses (or has no /proc)."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def resident_peak_bytes() -> int | None:
    """The process's resident peak (VmHWM), in bytes; None where /proc/self/status has none."""
    try:
        lines = STATUS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            number, unit = line.split()[1:3]
            return int(number) * 1024 if unit == "kB" else None
    return None


class PeakMemory:
    """The peak over the timed windows: ``start`` at the first window's start edge, ``values`` after the last."""

    def __init__(self, runner: StepRunner) -> None:
        self._runner = runner
        self._resident_reset = False

    def start(self) -> None:
        self._runner.reset_peak_memory()
        self._resident_reset = reset_resident_peak()

    def values(self) -> dict[str, Any]:
        """peak_memory_bytes and peak_memory_kind, and the breakdown (``StepRunner.memory``)."""
        peak, kind = self._runner.peak_memory()
        if peak is None:
            peak = resident_peak_bytes()
            kind = RESIDENT_PEAK if self._resident_reset else RESIDENT_PEAK_SINCE_START
        if peak is None:
            kind = "no peak: neither a GPU allocator nor /proc/self/status"
        return {"peak_memory_bytes": peak, "peak_memory_kind": kind, **self._runner.memory().values()}
