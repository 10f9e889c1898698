"""Other work on the machine during the timed windows: how many cores other processes kept busy, and the load
average.

A throughput measured while something else used the CPUs (another benchmark, a build, a backup) may be slow for a
reason that is not the configuration's. Linux counts every core's busy time since boot in /proc/stat's first line;
read at both edges of a window, less the CPU time this process spent meanwhile (all its threads), it leaves what
other processes used: ``other_cpu_cores`` is that over the window's wall time, the mean number of cores they kept
busy. The 1-minute load average at the window's end is kept beside it (it smooths over a minute, so it also tells
of work just before the window).

"Other" is every process outside this run: the sweep starts each worker (or torchrun) in a session of its own, so
the run's own CPU is that of every process in this process's session (its DataLoader workers, the other ranks of a
multi-process run on this node), read from /proc/<pid>/stat; where that cannot be read, this process's alone (then
input workers and sibling ranks count as other, as the flag's text warns). /proc/stat counts in clock ticks
(usually 10 ms per core), so a window of a fraction of a second reads coarsely.

The readers are arguments (the /proc/stat text, the clock, this process's CPU time, the load average) so that tests
run on simulated numbers. Where /proc/stat cannot be read (not Linux, a sandbox), the values are None and ``note``
says why. ``benchmarks/convert_speed.py`` uses ``busy_cpu_s`` for the same figure around its subprocesses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")


def read_proc_stat() -> str:
    return PROC_STAT.read_text()


def busy_cpu_s(read_stat: Callable[[], str] = read_proc_stat) -> float:
    """CPU seconds the whole machine has spent busy since boot (user, nice, system, irq, softirq, steal; all cores):
    /proc/stat's first line less idle and iowait, over the clock ticks per second. OSError or ValueError when it
    cannot be read."""
    first = read_stat().split("\n", 1)[0].split()
    if not first or first[0] != "cpu" or len(first) < 6:
        raise ValueError(f"/proc/stat's first line is {' '.join(first)!r}, not the cpu totals")
    ticks = [int(value) for value in first[1:9]]  # user nice system idle iowait irq softirq steal (guest: in user)
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def session_cpu_s(proc: Path = Path("/proc")) -> float:
    """CPU seconds (user + system) of every live process in this process's session: this run's own work. Falls back
    to this process's own CPU time where /proc cannot be listed."""
    session = os.getsid(0)
    try:
        pids = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return time.process_time()
    ticks = 0
    for pid in pids:
        try:
            fields = (proc / pid / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone since the listing, or not readable
            continue
        if int(fields[3]) == session:  # after the name: state ppid pgrp session ... utime(12) stime(13)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def load_average_1min() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no getloadavg on this platform, or it failed
        return None


@dataclass(frozen=True)
class Edge:
    """What is read at one edge of a window."""

    wall_s: float
    busy_s: float | None  # None: /proc/stat unreadable
    own_s: float


@dataclass(frozen=True)
class WindowLoad:
    """Other work during one window."""

    other_cpu_cores: float | None
    load_average: float | None


@dataclass
class MachineLoad:
    """Reads the machine's load at each window's edges (``window_start``, ``window_end``: outside the timed
    interval, as ``run_window``'s at_start and at_end hooks) and keeps each window's ``WindowLoad``."""

    read_stat: Callable[[], str] = read_proc_stat
    clock: Callable[[], float] = time.perf_counter
    own_cpu: Callable[[], float] = session_cpu_s  # user + system of every process of this run (its session)
    load_average: Callable[[], float | None] = load_average_1min
    windows: list[WindowLoad] = field(default_factory=list, init=False)
    note: str | None = field(default=None, init=False)  # why the values are None
    _start: Edge | None = field(default=None, init=False, repr=False)

    def _edge(self) -> Edge:
        try:
            busy: float | None = busy_cpu_s(self.read_stat)
        except (OSError, ValueError) as error:
            busy = None
            self.note = f"machine load not measured: /proc/stat unreadable ({error})"
        return Edge(self.clock(), busy, self.own_cpu())

    def window_start(self) -> None:
        self._start = self._edge()

    def window_end(self) -> None:
        start, end = self._start, self._edge()
        if start is None:
            raise RuntimeError("window_end without window_start")
        self._start = None
        self.windows.append(WindowLoad(other_cores(start, end), self.load_average()))

    def values(self) -> dict[str, Any]:
        """The result's fields over all windows: the busiest window's other cores, the highest load average."""
        return {"other_cpu_cores": _highest(w.other_cpu_cores for w in self.windows),
                "load_average": _highest(w.load_average for w in self.windows)}


def other_cores(start: Edge, end: Edge) -> float | None:
    """The mean number of cores that processes outside this run kept busy between two edges."""
    wall = end.wall_s - start.wall_s
    if start.busy_s is None or end.busy_s is None or wall <= 0:
        return None
    others = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return max(0.0, others) / wall  # ticks are coarser than this process's own clock: never below none


def _highest(values: Any) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None
