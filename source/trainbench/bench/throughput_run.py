"""A throughput run's files: summary.json/.csv (see ``trainbench.results.store``), steps.csv, env.json, logs/.

The per-step rows are appended and flushed as each batch size completes, so a killed run keeps them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainbench.results import fields
from trainbench.results.files import append_csv
from trainbench.results.header import with_work
from trainbench.results.layout import STEPS
from trainbench.results.records import BatchResult
from trainbench.results.store import RunStore

STEP_FIELDS: tuple[str, ...] = ("batch_size", "phase", "step", "seconds")


def measured_fields() -> tuple[str, ...]:
    """summary.csv's value columns, in order: every field the registry writes there (``results.fields``)."""
    return fields.written_to(fields.Where.SUMMARY_CSV)


def result_fields() -> tuple[str, ...]:
    """summary.csv's columns."""
    return ("batch_size", "status", *measured_fields(), "error")


def json_only_fields() -> tuple[str, ...]:
    """Lists and objects: summary.json only."""
    return tuple(name for name in fields.written_to(fields.Where.SUMMARY_JSON) if name not in measured_fields())


# As the registry declares them when this module is imported (a registry extended later: the functions above).
MEASURED_FIELDS: tuple[str, ...] = measured_fields()
RESULT_FIELDS: tuple[str, ...] = result_fields()
JSON_ONLY_FIELDS: tuple[str, ...] = json_only_fields()


class ThroughputRun(RunStore):
    """The files of one throughput sweep: summary.json/.csv, steps.csv, env.json, logs/."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        super().__init__(path, header, result_fields())

    def add(self, result: BatchResult, warmup_s: Sequence[float] = (), step_s: Sequence[float] = ()) -> None:
        """Record one batch size's result (any status; every field present, None where not measured) and its
        per-step times. A value that no field of the registry declares is a ValueError naming it: it would
        otherwise be lost without a word."""
        if unknown := fields.unknown(result.values):
            raise ValueError(f"batch {result.batch_size}: {', '.join(unknown)} is no result field (declare it in "
                             "trainbench.results.fields)")
        values = {name: result.values.get(name) for name in fields.written_to(fields.Where.SUMMARY_JSON)}
        rows = [
            {"batch_size": result.batch_size, "phase": phase, "step": i, "seconds": seconds}
            for phase, times in (("warmup", warmup_s), ("timed", step_s))
            for i, seconds in enumerate(times)
        ]
        if rows:
            append_csv(self.path / STEPS, STEP_FIELDS, rows)
        if result.ok:  # the header's parameters and FLOPs per sample: the first batch size that counted them
            self.header = with_work(self.header, values)
        super().add(BatchResult(result.batch_size, result.status, result.error, values))

