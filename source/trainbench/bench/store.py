"""The results store: one new folder per run, never overwritten, rewritten atomically after each batch size.

A run killed at any point leaves every finished batch size on disk: the summary is replaced by rename (never
half-written) and the per-step rows are appended and flushed as each batch size completes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainbench.data.outputs import write_text_atomic
from trainbench.errors import UsageError

RESULT_FIELDS: tuple[str, ...] = (
    "batch_size",
    "status",
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
    "error",
)
JSON_ONLY_FIELDS: tuple[str, ...] = ("gpus_at_window_end", "window_images_per_sec")  # nested: summary.json only
STEP_FIELDS: tuple[str, ...] = ("batch_size", "phase", "step", "seconds")


def create_fresh_dir(root: Path, name: str) -> Path:
    """Make ``root/name``, or ``root/name-1``, ``-2``... when taken; an existing folder is never reused.

    Every command makes its output folder here: a root that cannot hold it (a file, a path through a file, a
    read-only mount, no permission) is a UsageError naming the root and the reason, before anything is written."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: not a folder, cannot make a run folder in it")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            path = root / (name if attempt == 0 else f"{name}-{attempt}")
            try:
                path.mkdir()  # atomic: fails if someone else has the name
            except FileExistsError:
                continue
            return path
    except OSError as error:
        raise UsageError(f"{root}: cannot make a run folder in it: {error.strerror or error}") from None
    raise UsageError(f"{root}: {name} and its 999 numbered variants are all taken; choose another output folder")


def create_run_dir(root: Path, label: str) -> Path:
    """Make ``root/<UTC time>_<label>`` (with a numeric suffix when taken)."""
    return create_fresh_dir(root, f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}_{label}")


def worker_file(run_dir: Path, batch_size: int, suffix: str) -> Path:
    """A worker's own file in a run folder: logs/batch_<X><suffix> (.log, .config.json, .result.json)."""
    return run_dir / "logs" / f"batch_{batch_size}{suffix}"


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_csv_atomic(path: Path, fields: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, text.getvalue())


def append_csv(path: Path, fields: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(rows)
        out.flush()
        os.fsync(out.fileno())


class ThroughputRun:
    """The files of one throughput sweep: summary.json/.csv, steps.csv, env.json, logs/."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header  # framework, precision, image_size, data, ...
        self.results: list[dict[str, Any]] = []
        (path / "logs").mkdir(exist_ok=True)
        self._write_summary()

    def log_path(self, batch_size: int) -> Path:
        return worker_file(self.path, batch_size, ".log")

    def add(self, result: dict[str, Any], warmup_s: Sequence[float] = (), step_s: Sequence[float] = ()) -> None:
        """Record one batch size's result (any status) and its per-step times."""
        self.results.append({field: result.get(field) for field in RESULT_FIELDS + JSON_ONLY_FIELDS})
        batch = result["batch_size"]
        rows = [
            {"batch_size": batch, "phase": phase, "step": i, "seconds": seconds}
            for phase, times in (("warmup", warmup_s), ("timed", step_s))
            for i, seconds in enumerate(times)
        ]
        if rows:
            append_csv(self.path / "steps.csv", STEP_FIELDS, rows)
        self._write_summary()

    def _write_summary(self) -> None:
        write_json_atomic(self.path / "summary.json", {**self.header, "results": self.results})
        write_csv_atomic(self.path / "summary.csv", RESULT_FIELDS, self.results)
