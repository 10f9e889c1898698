"""Running a campaign: every planned run through the existing sweep, each into a folder of its own.

A campaign folder holds ``campaign.json`` (the matrix's fingerprint and plan settings), one folder per planned run
and ``results.csv`` (``campaign.table``). A run's folder is ``run_<repetition>_<config>_inprogress`` while it runs
and is renamed ``run_<repetition>_<config>_ret_<return code>`` when it ends (0: every batch size measured, 1: at
least one failed). Running the same command again skips the runs that have a ``_ret_`` folder and redoes the others;
a folder left ``_inprogress`` by a kill is kept, renamed ``..._abandoned-<k>``, never reused or deleted.

Several processes may run one campaign at once (Slurm array tasks with ``--only``): each renames only its own run's
folder, and the renames and the rebuild of results.csv from the folders happen under one lock (``flock``), so the
last writer always sees every finished run and no row is lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainbench.bench.sweep import measure_throughput
from trainbench.campaign.matrix import Experiment, Matrix, bench_configs, planned_runs
from trainbench.campaign.table import write_campaign_table
from trainbench.config import BenchConfig
from trainbench.engines.base import resolve_device_here
from trainbench.errors import UsageError
from trainbench.profile.run import run_profile
from trainbench.results.files import ABANDONED, IN_PROGRESS, REFUSED, write_json_atomic
from trainbench.results.records import format_of, unstamped

CAMPAIGN_FILE = "campaign.json"
RUN_FILE = "campaign_run.json"
LOCK_FILE = ".campaign.lock"
Echo = Callable[[str], None]


@dataclass(frozen=True)
class PlannedRun:
    number: int  # in the plan's order (--dry-run's first column, --only's argument)
    repetition: int
    experiment: Experiment

    @property
    def stem(self) -> str:
        return f"run_{self.repetition}_{self.experiment.name}"


@dataclass(frozen=True)
class CampaignOutcome:
    ran: list[tuple[PlannedRun, int]]  # this call's runs and their return codes
    skipped: list[PlannedRun]  # finished before this call

    @property
    def failed(self) -> list[tuple[PlannedRun, int]]:
        return [(run, code) for run, code in self.ran if code != 0]


def plan(matrix: Matrix, shuffle_seed: int | None = None) -> list[PlannedRun]:
    return [PlannedRun(n, repetition, experiment)
            for n, (repetition, experiment) in enumerate(planned_runs(matrix, shuffle_seed))]


@contextlib.contextmanager
def campaign_lock(folder: Path) -> Iterator[None]:
    """The campaign folder's lock, waited for: held only for renames and the table's rebuild (seconds)."""
    descriptor = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):  # a file system without locks: go on unguarded rather than refuse
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def open_campaign(folder: Path, matrix: Matrix, shuffle_seed: int | None, runs: int, replace: bool) -> None:
    """Make the folder and its campaign.json, or check that an existing one is of this matrix (a different matrix
    would mix two plans in one results table) unless ``replace``: then the new matrix is recorded, the old runs kept."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: not a folder, cannot hold a campaign")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{folder}: cannot make the campaign folder ({error.strerror or error})") from None
    record = {"matrix": matrix.source, "fingerprint": matrix.fingerprint(), "shuffle": shuffle_seed, "runs": runs}
    path = folder / CAMPAIGN_FILE
    with campaign_lock(folder):
        if path.exists() and not replace:
            old = _read_campaign(path)
            if old.get("fingerprint") != record["fingerprint"]:
                raise UsageError(f"{path}: this folder holds a campaign of another matrix ({old.get('matrix')}); "
                                 "choose another --output, or pass --replace-matrix to run this one beside its runs")
            if old.get("shuffle") != shuffle_seed:
                raise UsageError(f"{path}: the campaign was planned with --shuffle {old.get('shuffle')}; give the "
                                 "same, or run numbers would name other runs")
            return
        write_json_atomic(path, record)


def _read_campaign(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        format_of(data)
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not a campaign file ({type(error).__name__}: {error})") from None
    return unstamped(data)


_FINISHED = re.compile(r"_ret_(\d+)")


def finished_folder(folder: Path, run: PlannedRun) -> Path | None:
    """The run's finished folder (``<stem>_ret_<code>``), None when it has not finished."""
    for path in folder.glob(f"{run.stem}_ret_*"):
        if _FINISHED.fullmatch(path.name[len(run.stem):]) and path.is_dir():
            return path
    return None


def _start(folder: Path, run: PlannedRun) -> Path:
    """A fresh in-progress folder for the run, the one a killed attempt left moved aside; campaign_run.json in it."""
    path = folder / f"{run.stem}{IN_PROGRESS}"
    with campaign_lock(folder):
        if path.exists():
            attempt = 1
            while (folder / f"{run.stem}{ABANDONED}{attempt}").exists():
                attempt += 1
            path.rename(folder / f"{run.stem}{ABANDONED}{attempt}")
        path.mkdir()
    write_json_atomic(path / RUN_FILE, {"run": run.number, "repetition": run.repetition,
                                        "experiment": run.experiment.index, "config": run.experiment.name,
                                        "values": run.experiment.values})
    return path


def _finish(folder: Path, path: Path, run: PlannedRun, code: int) -> Path:
    with campaign_lock(folder):
        done = path.rename(folder / f"{run.stem}_ret_{code}")
        write_campaign_table(folder)
    return done


def _on_this_machine(configs: list[BenchConfig]) -> list[BenchConfig]:
    """The device "auto" resolved where the run happens (a Slurm task's node), as the throughput command does."""
    model = dataclasses.replace(configs[0].model, device=resolve_device_here(configs[0].model.device))
    return [dataclasses.replace(config, model=model) for config in configs]


def _measure(matrix: Matrix, run: PlannedRun, path: Path, echo: Echo) -> int:
    """One planned run: the throughput sweep into ``path``, or the profiled sweep into a folder inside it."""
    configs = _on_this_machine(bench_configs(matrix, run.experiment))
    settings = matrix.settings
    window = configs[0].profile
    if window is not None:
        store = run_profile(window, configs, path, echo, timeout_s=settings.timeout,
                            clock_control=settings.clock_control)
    else:
        store = measure_throughput(configs, path, echo, settings.timeout, run_dir=path)
    return 0 if all(result.ok for result in store.results) else 1


def run_one(matrix: Matrix, folder: Path, run: PlannedRun, echo: Echo) -> int:
    """Run one planned run into its folder; a refusal that every run would meet (a UsageError: no profiler, no GPU)
    leaves the folder abandoned, not finished, so that the next call redoes it."""
    path = _start(folder, run)
    echo(f"run {run.number} (repetition {run.repetition}, {run.experiment.name}): {path}")
    try:
        code = _measure(matrix, run, path, echo)
    except UsageError:
        with campaign_lock(folder), contextlib.suppress(OSError):
            path.rename(folder / f"{run.stem}{REFUSED}")  # kept for its logs; replaced by a later refusal
        raise
    done = _finish(folder, path, run, code)
    echo(f"run {run.number}: return code {code}: {done.name}")
    return code


def run_campaign(matrix: Matrix, folder: Path, echo: Echo, shuffle_seed: int | None = None,
                 only: Sequence[int] = (), replace: bool = False) -> CampaignOutcome:
    """Every planned run that has no finished folder yet (or only those numbered ``only``), in the plan's order."""
    runs = plan(matrix, shuffle_seed)
    unknown = [n for n in only if not 0 <= n < len(runs)]
    if unknown:
        raise UsageError(f"--only {unknown[0]}: the plan has runs 0 to {len(runs) - 1} (see --dry-run)")
    open_campaign(folder, matrix, shuffle_seed, len(runs), replace)
    chosen = [runs[n] for n in only] if only else runs
    outcome = CampaignOutcome([], [])
    for run in chosen:
        if finished_folder(folder, run) is not None:
            outcome.skipped.append(run)
            continue
        outcome.ran.append((run, run_one(matrix, folder, run, echo)))
    with campaign_lock(folder):
        write_campaign_table(folder)  # also after a call that ran nothing: the table matches the folders
    return outcome
