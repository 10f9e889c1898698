"""A run's summary on disk, rewritten after every batch size: what throughput and profile sweeps share.

A run killed at any point leaves every finished batch size on disk: the summary JSON and CSV are replaced by
rename (never half-written) after each result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainbench.errors import UsageError
from trainbench.results.files import write_csv_atomic, write_json_atomic
from trainbench.results.header import RunHeader
from trainbench.results.layout import LOGS, SUMMARY, SUMMARY_CSV, WORKER_LOG, worker_file
from trainbench.results.records import BatchResult, RecordError, RunSummary


class RunStore:
    """``<summary_name>`` (settings and every batch size's result, versioned), summary.csv (one row per batch size,
    ``fields`` as columns) and logs/ in a run folder."""

    summary_name = SUMMARY

    def __init__(self, path: Path, header: dict[str, Any], fields: Sequence[str]) -> None:
        self.path = path
        self.header = header
        self.fields = tuple(fields)
        self.results: list[BatchResult] = []
        (path / LOGS).mkdir(exist_ok=True)
        self._write()

    def log_path(self, batch_size: int) -> Path:
        return worker_file(self.path, batch_size, WORKER_LOG)

    def add(self, result: BatchResult, warmup_s: Sequence[float] = (), step_s: Sequence[float] = ()) -> None:
        """Record one batch size's result, whatever its status (per-step times: see subclasses)."""
        self.results.append(result)
        self._write()

    def replace_last(self, result: BatchResult) -> None:
        """The last batch size's result, completed or corrected after its worker ended (a profiler's analysis)."""
        self.results[-1] = result
        self._write()

    @property
    def last(self) -> BatchResult:
        return self.results[-1]

    def rows(self) -> list[dict[str, Any]]:
        """The results as the flat rows the report and summary.csv show."""
        return [result.to_row() for result in self.results]

    def summary(self) -> RunSummary:
        return RunSummary(self.header, list(self.results))

    def _write(self) -> None:
        write_json_atomic(self.path / self.summary_name, self.summary().to_json())
        write_csv_atomic(self.path / SUMMARY_CSV, self.fields, self.rows())


def read_summary(path: Path, kind: str = "run") -> RunSummary:
    """A summary file of any format so far (``summary.json``, ``profile.json``); a one-line UsageError naming the
    file and the problem otherwise. ``kind`` names what the caller expected ("throughput run"). Its header comes
    back in today's shape (``RunHeader``: an older profile's framework, precision, image size and device at the top
    level too), so readers ask ``header["framework"]`` of any file. An ok result whose
    rate or time is no measurement (NaN, infinite, negative, a text) comes back ``invalid``, its error naming this
    file and the field: every reader shows it as such and leaves it out of its statistics."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UsageError(f"{path}: not a {kind}'s file ({type(error).__name__}: {error})") from None
    try:
        summary = RunSummary.from_json(data).naming(str(path))
        return RunSummary(RunHeader.read(summary.header).to_json(), summary.results, summary.format)
    except RecordError as error:
        raise UsageError(f"{path}: not a {kind}'s summary: {error}") from None
