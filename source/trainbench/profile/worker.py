"""The worker of a profiled sweep: the throughput worker's process (``trainbench.bench.worker``), measuring the
profiler's window instead of timed windows. Its own entry point, so the harness below never imports the profilers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainbench.bench.worker import Measurement, main
from trainbench.config import BenchConfig
from trainbench.engines.base import Engine
from trainbench.profile.session import profile_run


def measure_window(config: BenchConfig, engine: Engine, timeline: Path | None = None) -> Measurement:
    """The profiler's window. No GPU timeline: the sweep gives a profiled worker no path for one (the profiler's
    replay and clock control would make its clocks and power say nothing about training)."""
    return Measurement(profile_run(config, engine.make_runner(config)))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], measure_window))
