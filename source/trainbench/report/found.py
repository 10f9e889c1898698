"""What the report was given: plain records of the runs, profiles, campaigns... found under the folders.

``report/gather.py`` fills them through the suite's own readers (the results model, the campaign table, the
variability analysis); the sections (``report/sections/``) only draw them. An empty list is a section
that explains its absence. A value that is no measurement (NaN, infinite, negative, a text where a number belongs)
is kept with why, naming its file and field: the page lists it as invalid and leaves it out of every figure,
comparison and statistic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainbench.results.records import Status

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class RunRecord:
    """A throughput run or a profile: its folder, settings (the summary's header), result rows (``to_row``) and
    the pictures in its folder."""

    path: Path
    header: dict[str, Any]
    rows: list[dict[str, Any]]  # an ok result whose rate or time is no measurement has status "invalid"
    pictures: list[Path] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # other values of its files left out (telemetry): why
    name: str = ""  # how the page names it: the end of its path that no other run's shares ("a/run", "b/run")

    def invalid_rows(self) -> list[dict[str, Any]]:
        return [row for row in self.rows if row.get("status") == Status.INVALID]

    @property
    def shown_name(self) -> str:
        return self.name or self.path.name


@dataclass(frozen=True)
class Profile:
    """A profiled sweep with the details its profiler left beside profile.json, by batch size."""

    run: RunRecord
    top_kernels: dict[int, pd.DataFrame] = field(default_factory=dict)  # ncu's per-kernel table, nsys' top kernels
    step_gpu_ms: dict[int, list[float]] = field(default_factory=dict)  # nsys: each profiled step's GPU busy time
    left_out: list[str] = field(default_factory=list)  # details of the profiler's files left out: why


@dataclass(frozen=True)
class Environment:
    """One env.json and the run folders whose environment is the same machine and software (versions in any
    notation: ``results.run_settings.same_value``); ``envs``: each folder's own env.json (its command and time)."""

    env: dict[str, Any]
    folders: list[Path]
    envs: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Campaign:
    path: Path
    table: pd.DataFrame  # campaign_table: one row per run x batch size x window
    summary: pd.DataFrame  # campaign_summary: one row per configuration over its repetitions
    left_out: list[str] = field(default_factory=list)  # run folders the table does not count, and why
    # the counted throughput runs' summaries by folder name: their headers and every value (the ranking's settings,
    # per-window seconds and trust flags; the table holds the matrix's axes and results.csv's fields only)
    runs: dict[str, RunRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class Variability:
    path: Path
    runs: pd.DataFrame  # one row per (GPU, repetition, batch size)
    gpus: pd.DataFrame  # per GPU, against the median GPU
    across: pd.DataFrame  # per batch size, the spread over the GPUs
    threshold: float  # the outlier threshold (a fraction)


@dataclass(frozen=True)
class ModelFile:
    path: Path  # the folder holding model.json (and model.png)
    content: dict[str, Any]
    invalid: dict[int, str] = field(default_factory=dict)  # models[i] left out (a value of the wrong type): why


@dataclass(frozen=True)
class Training:
    path: Path
    config: dict[str, Any] | None  # config.json, None when unreadable
    epochs: list[dict[str, Any]]  # metrics.jsonl
    failures: list[dict[str, Any]] = field(default_factory=list)  # failures.jsonl
    invalid: dict[int, str] = field(default_factory=dict)  # epochs[i] left out of the figure (a bad value): why
    left_out: list[str] = field(default_factory=list)  # lines of metrics.jsonl that hold no epoch: why


@dataclass
class ReportData:
    """Everything found under the folders given (``sources``); ``skipped``: files that could not be read, with why."""

    sources: list[str]
    environments: list[Environment] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    profiles: list[Profile] = field(default_factory=list)
    campaigns: list[Campaign] = field(default_factory=list)
    variability: list[Variability] = field(default_factory=list)
    models: list[ModelFile] = field(default_factory=list)
    trainings: list[Training] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # every measured setting (report.ranking.measured_rows), made once for the headline, comparisons and CSV; None:
    # made when first asked for
    measured: pd.DataFrame | None = None

    def empty(self) -> bool:
        return not (self.runs or self.profiles or self.campaigns or self.variability or self.models
                    or self.trainings)


def short_names(paths: list[Path]) -> dict[Path, str]:
    """Each path's last parts, as few as make it differ from every other path's: "run" where it is the only one,
    "a/run" and "b/run" where two runs share a folder name."""
    depth = dict.fromkeys(paths, 1)
    while True:
        names = {path: "/".join(path.parts[-depth[path]:]) for path in paths}
        taken = Counter(names.values())
        clashing = [path for path in paths if taken[names[path]] > 1 and depth[path] < len(path.parts)]
        if not clashing:
            return names
        for path in clashing:
            depth[path] += 1
