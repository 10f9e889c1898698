"""Other work on the machine across a timed window (``bench.machine_load``), on simulated /proc/stat readings and
clocks, and once for real on this machine."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from trainbench.bench.machine_load import MachineLoad, busy_cpu_s

TICK = os.sysconf("SC_CLK_TCK")


class Machine:
    """A simulated machine: its /proc/stat, a wall clock, this process's CPU time and the load average, moved on
    by ``run`` as if processes had kept cores busy for some wall seconds."""

    def __init__(self) -> None:
        self.ticks = {"user": 5_000, "nice": 10, "system": 2_000, "idle": 90_000, "iowait": 300, "irq": 5,
                      "softirq": 40, "steal": 0}
        self.wall = 100.0
        self.own = 3.0
        self.load = 0.2

    def stat(self) -> str:
        totals = " ".join(str(value) for value in self.ticks.values())
        return f"cpu  {totals} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n"

    def run(self, seconds: float, own_cores: float, other_cores: float, cores: int = 8, iowait_cores: float = 0.0,
            load: float | None = None) -> None:
        busy = (own_cores + other_cores) * seconds * TICK
        self.ticks["user"] += round(0.7 * busy)
        self.ticks["system"] += round(0.3 * busy)
        self.ticks["iowait"] += round(iowait_cores * seconds * TICK)  # waiting on a disk: not busy
        self.ticks["idle"] += round((cores - own_cores - other_cores - iowait_cores) * seconds * TICK)
        self.own += own_cores * seconds
        self.wall += seconds
        if load is not None:
            self.load = load

    def load_of(self, read_stat: Callable[[], str] | None = None) -> MachineLoad:
        return MachineLoad(read_stat=read_stat or self.stat, clock=lambda: self.wall, own_cpu=lambda: self.own,
                           load_average=lambda: self.load)


def test_a_busy_other_process_is_counted_and_our_own_cpu_is_not() -> None:
    machine = Machine()
    load = machine.load_of()
    load.window_start()
    machine.run(10.0, own_cores=2.0, other_cores=1.5, iowait_cores=1.0, load=3.4)  # we use 2 cores, others 1.5
    load.window_end()
    assert load.windows[0].other_cpu_cores == pytest.approx(1.5, abs=0.01)
    assert load.values() == {"other_cpu_cores": pytest.approx(1.5, abs=0.01), "load_average": 3.4}
    assert load.note is None


def test_a_quiet_machine_reads_no_other_cores_and_never_below_none() -> None:
    machine = Machine()
    load = machine.load_of()
    load.window_start()
    machine.run(5.0, own_cores=4.0, other_cores=0.0)
    machine.own += 0.05  # this process's clock is finer than /proc/stat's ticks: its CPU can read above the machine's
    load.window_end()
    assert load.values()["other_cpu_cores"] == 0.0


def test_the_busiest_window_and_the_highest_load_average_stand_for_the_batch_size() -> None:
    machine = Machine()
    load = machine.load_of()
    for other, average in ((0.1, 1.0), (2.0, 2.5), (0.4, 1.5)):
        load.window_start()
        machine.run(2.0, own_cores=1.0, other_cores=other, load=average)
        load.window_end()
        machine.run(1.0, own_cores=0.0, other_cores=6.0)  # between windows: counts for none of them
    assert [w.other_cpu_cores for w in load.windows] == pytest.approx([0.1, 2.0, 0.4], abs=0.01)
    assert load.values() == {"other_cpu_cores": pytest.approx(2.0, abs=0.01), "load_average": 2.5}


@pytest.mark.parametrize("read_stat", ["missing", "garbled"])
def test_an_unreadable_proc_stat_gives_none_and_a_note(read_stat: str) -> None:
    def unreadable() -> str:
        if read_stat == "missing":
            raise FileNotFoundError(2, "No such file or directory", "/proc/stat")
        return "intr 1 2 3\n"

    machine = Machine()
    load = machine.load_of(unreadable)
    load.window_start()
    machine.run(1.0, own_cores=1.0, other_cores=1.0)
    load.window_end()
    assert load.values() == {"other_cpu_cores": None, "load_average": 0.2}  # the load average still read
    assert load.note is not None and load.note.startswith("machine load not measured: /proc/stat unreadable")
    with pytest.raises(ValueError, match="first line"):
        busy_cpu_s(lambda: "intr 1 2 3\n")


def test_no_window_no_values() -> None:
    assert Machine().load_of().values() == {"other_cpu_cores": None, "load_average": None}


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux only")
def test_a_real_short_window_on_this_machine_reads_numbers() -> None:
    load = MachineLoad()
    load.window_start()
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # our own busy loop: subtracted
        pass
    load.window_end()
    values = load.values()
    assert load.note is None
    assert values["other_cpu_cores"] is not None and 0.0 <= values["other_cpu_cores"] <= (os.cpu_count() or 1) * 2
    assert values["load_average"] is not None and values["load_average"] >= 0.0


def test_the_run_s_own_children_are_its_own_not_other_work() -> None:
    """A child in this session that burns CPU is counted as this run's (session_cpu_s), not as other load."""
    import subprocess
    import sys

    from trainbench.bench.machine_load import session_cpu_s

    before = session_cpu_s()
    # The child burns 0.5 s of CPU (not of wall time: a loaded machine gives it less CPU per second), says so, and
    # lives on until its stdin closes: read while it lives, its CPU is in /proc/<pid>/stat.
    burn = "import sys, time\nwhile time.process_time() < 0.5: pass\nprint('burnt', flush=True)\nsys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline() == "burnt\n"
    during = session_cpu_s()
    child.stdin.close()
    child.wait(timeout=60)
    assert during - before >= 0.3  # the child's busy loop, not only this process's own CPU
