"""The results model: what a batch size's outcome and a run's summary are, once for every command.

On disk a run's summary (throughput's ``summary.json``, profile's ``profile.json``) is one JSON object: a
``"format"`` version, the run's settings (the header) and ``"results"``, one flat object per batch size, its values
named as ``results.fields`` declares them. Files written before the format version existed (those kept in
``benchmarks/results/``) are format 1; formats 1 and 2 named rates and energies after images (``images_per_sec``):
both are read, under the names of today (``_upgrade_row``). Format 4 added the workload to the header (a file
without one is ResNet-50's: ``results.header``) and tokens/s, FLOPs and MFU to the rows (absent: not measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trainbench.results import fields
from trainbench.results.derived import derived_problem

FORMAT = 6  # the version of every JSON object the suite writes (its "format" field); files without one are 1
FORMAT_KEY = "format"
RESULTS_KEY = "results"


class Status(StrEnum):
    """How a batch size ended. A str, so it compares with and serialises as its value ("ok", ...)."""

    OK = "ok"
    OOM = "oom"  # the batch did not fit in memory (host or device): a finding, not a fault
    ERROR = "error"  # anything else: a crash, a timeout, a profiler refusing
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM while it ran
    DIVERGED = "diverged"  # a timed step's loss was not finite, or fp16's loss scaler skipped a timed step
    INVALID = "invalid"  # set by readers only: an ok result holding a rate or time that no run measures


# The measured values a reader checks on an ok result: a rate or a time (per second, seconds, energy, power) that is
# not a finite, non-negative number (or a list of them, as each window's samples/s) makes the result INVALID. A
# registered field is measured when its entry says so; these suffixes judge the values no entry declares (a
# profiler's own columns).
MEASURED_SUFFIXES = ("_per_sec", "_s", "_j", "_per_sample", "_per_image", "_per_joule", "_w", "_mhz")
SPREAD_SUFFIXES = ("_median", "_min", "_max")  # a rate's statistics: gpu_time_s_median...


def is_measured(name: str) -> bool:
    declared = fields.BY_NAME.get(name)
    if declared is not None:
        return declared.measured
    base = next((name[:-len(end)] for end in SPREAD_SUFFIXES if name.endswith(end)), name)
    return base.endswith(MEASURED_SUFFIXES)


def is_measurement(value: Any) -> bool:
    """None (not measured) or a finite non-negative number: what a rate, time or energy may be."""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                             and value >= 0)


def _acceptable(value: Any) -> bool:
    """A measurement, or a list of measurements none of which is missing (each window's images/s)."""
    if isinstance(value, list):
        return all(item is not None and is_measurement(item) for item in value)
    return is_measurement(value)


class RecordError(ValueError):
    """A file that is not a result the suite wrote: the message says what is wrong (the caller names the file)."""


@dataclass(frozen=True)
class BatchResult:
    """One batch size's outcome. ``values`` holds what was measured (throughput statistics, a profiler's summary
    columns), empty for a failure; ``error`` says why it failed, or is a warning on an ``ok`` result."""

    batch_size: int
    status: Status
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, batch_size: int, status: Status, error: str) -> BatchResult:
        """The one way to record a batch size that produced no measurement."""
        if status is Status.OK:
            raise ValueError("a failed result needs a failure status")
        return cls(batch_size, status, error)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def get(self, name: str, default: Any = None) -> Any:
        """A value by its name in the flat row (batch_size, status and error included)."""
        return self.to_row().get(name, default)

    def replace(self, *, status: Status | None = None, error: str | None = None, **values: Any) -> BatchResult:
        """A copy with another status or error and more values (a profiler's analysis added to its run)."""
        return BatchResult(self.batch_size, status or self.status, error if error is not None else self.error,
                           {**self.values, **values})

    def to_row(self) -> dict[str, Any]:
        """The flat object written to summary files: batch_size, status, the values, error."""
        return {"batch_size": self.batch_size, "status": self.status.value, **self.values, "error": self.error}

    @classmethod
    def from_row(cls, row: Any, where: str = "result") -> BatchResult:
        """A result read back; RecordError names the field that is wrong."""
        if not isinstance(row, dict):
            raise RecordError(f"{where} is not an object")
        batch = row.get("batch_size")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise RecordError(f"{where}.batch_size is {batch!r}, not a positive whole number")
        try:
            status = Status(row.get("status", ""))  # missing: the ValueError below
        except ValueError:
            choices = ", ".join(s.value for s in Status)
            raise RecordError(f"{where}.status is {row.get('status')!r}, not one of {choices}") from None
        error = row.get("error")
        if error is not None and not isinstance(error, str):
            raise RecordError(f"{where}.error is {error!r}, not a text")
        values = {k: v for k, v in row.items() if k not in ("batch_size", "status", "error")}
        if status is Status.OK and (bad := next((k for k, v in values.items()
                                                 if is_measured(k) and not _acceptable(v)), None)):
            problem = f"{where}.{bad} is {values[bad]!r}, not a finite non-negative number"
            return cls(batch, Status.INVALID, problem, values)
        return cls(batch, status, error, values)


@dataclass(frozen=True)
class RunSummary:
    """A run's summary file: its settings (``header``) and one result per batch size, in the order run."""

    header: dict[str, Any]
    results: list[BatchResult]
    format: int = FORMAT

    def to_json(self) -> dict[str, Any]:
        return {FORMAT_KEY: self.format, **self.header, RESULTS_KEY: [r.to_row() for r in self.results]}

    @classmethod
    def from_json(cls, data: Any) -> RunSummary:
        """A summary of any format so far; RecordError when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get(RESULTS_KEY), list):
            raise RecordError("not a run summary (no list of results)")
        version = format_of(data)
        rows = [_upgrade_row(row, version) for row in data[RESULTS_KEY]]
        header = {k: v for k, v in data.items() if k not in (FORMAT_KEY, RESULTS_KEY)}
        results = [_checked(header, BatchResult.from_row(row, f"results[{i}]"), f"results[{i}]")
                   for i, row in enumerate(rows)]
        return cls(header, results, version)

    def ok_results(self) -> list[BatchResult]:
        return [r for r in self.results if r.ok]

    def invalid_results(self) -> list[BatchResult]:
        """Results left out of every statistic: an ok result with a rate or time that is no measurement."""
        return [r for r in self.results if r.status is Status.INVALID]

    def naming(self, source: str) -> RunSummary:
        """The summary with each invalid result's error starting with ``source`` (the file it was read from)."""
        results = [r.replace(error=f"{source}: {r.error}") if r.status is Status.INVALID else r for r in self.results]
        return RunSummary(self.header, results, self.format)


def _checked(header: dict[str, Any], result: BatchResult, where: str) -> BatchResult:
    """An ok result whose tokens/s, achieved FLOP/s or MFU does not follow from its rate, read as invalid."""
    if result.status is Status.OK and (problem := derived_problem(header, result.values, where)):
        return result.replace(status=Status.INVALID, error=problem)
    return result


def format_of(data: dict[str, Any]) -> int:
    """The format version of a JSON object the suite wrote: 1 for files from before versions were written."""
    version = data.get(FORMAT_KEY, 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordError(f"format is {version!r}, not a version number")
    if version > FORMAT:
        raise RecordError(f"format {version} is newer than this trainbench reads ({FORMAT}): update trainbench")
    return version


def stamped(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the current format version first (replacing any older one)."""
    return {FORMAT_KEY: FORMAT, **{k: v for k, v in data.items() if k != FORMAT_KEY}}


def unstamped(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its format version: the fields a configuration is built from."""
    return {k: v for k, v in data.items() if k != FORMAT_KEY}


def _upgrade_row(row: Any, version: int) -> Any:
    """A row of an older format under today's names. Format 1 profile rows named the images/s under the profiler
    ``window_images_per_sec`` (a number), the name throughput rows use for the list of each window's images/s;
    format 2 calls it ``profiled_images_per_sec``. Formats 1 and 2 counted images where format 3 counts samples
    (``fields.RENAMED``); a value already under its new name is kept."""
    if version >= 3 or not isinstance(row, dict):
        return row
    row = dict(row)
    if version == 1 and "profiler" in row and isinstance(row.get("window_images_per_sec"), int | float):
        row["profiled_images_per_sec"] = row.pop("window_images_per_sec")
    row = _renamed(row)
    for nested in ("ranks", "gpu_telemetry"):  # lists of objects holding the same names (per rank, per GPU)
        if isinstance(row.get(nested), list):
            row[nested] = [_renamed(item) if isinstance(item, dict) else item for item in row[nested]]
    return row


def _renamed(row: dict[str, Any]) -> dict[str, Any]:
    return {fields.RENAMED.get(name, name) if fields.RENAMED.get(name) not in row else name: value
            for name, value in row.items()}
