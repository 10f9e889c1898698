"""A throughput run's files: summary.json/.csv (see ``trainbench.results.store``), steps.csv, env.json, logs/.

The per-step rows are appended and flushed as each batch size completes, so a killed run keeps them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainbench.results.files import append_csv
from trainbench.results.layout import STEPS
from trainbench.results.records import BatchResult
from trainbench.results.store import RunStore
from trainbench.telemetry.schema import GPU_TELEMETRY, TELEMETRY_VALUES

MEASURED_FIELDS: tuple[str, ...] = (
    "images_per_sec",
    "windows",  # timed windows (--repeats); the three below are the spread of their own images/s
    "images_per_sec_median",
    "images_per_sec_min",
    "images_per_sec_max",
    "input_images_per_sec",  # --data runs only: the input pipeline alone (see trainbench.bench.input_bench)
    "input_bound",  # --data runs only: input_images_per_sec < 1.1 x images_per_sec
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "step_time_mad_s",
    "window_s",
    "timed_steps",
    "warmup_steps",
    "world_size",  # processes that measured together (--gpus x --nodes); None: one
    "compile_s",  # torch --compile / --cuda-graph: compiling or capturing the step, before and outside every window
    *TELEMETRY_VALUES,  # GPU energy, power, clocks, throttling over the timed windows (see trainbench.telemetry)
)
RESULT_FIELDS: tuple[str, ...] = ("batch_size", "status", *MEASURED_FIELDS, "error")  # summary.csv's columns
# nested: summary.json only
JSON_ONLY_FIELDS: tuple[str, ...] = ("gpus_at_window_end", "window_images_per_sec", GPU_TELEMETRY, "ranks")
STEP_FIELDS: tuple[str, ...] = ("batch_size", "phase", "step", "seconds")


class ThroughputRun(RunStore):
    """The files of one throughput sweep: summary.json/.csv, steps.csv, env.json, logs/."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        super().__init__(path, header, RESULT_FIELDS)

    def add(self, result: BatchResult, warmup_s: Sequence[float] = (), step_s: Sequence[float] = ()) -> None:
        """Record one batch size's result (any status; every field present, None where not measured) and its
        per-step times."""
        values = {name: result.values.get(name) for name in MEASURED_FIELDS + JSON_ONLY_FIELDS}
        rows = [
            {"batch_size": result.batch_size, "phase": phase, "step": i, "seconds": seconds}
            for phase, times in (("warmup", warmup_s), ("timed", step_s))
            for i, seconds in enumerate(times)
        ]
        if rows:
            append_csv(self.path / STEPS, STEP_FIELDS, rows)
        super().add(BatchResult(result.batch_size, result.status, result.error, values))

