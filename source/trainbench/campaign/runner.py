"""Running a campaign: every planned run through the existing sweep, each into a folder of its own.

A campaign folder holds ``campaign.json`` (the matrix's fingerprint and plan settings), one folder per planned run
and ``results.csv`` (``campaign.table``). A run's folder is ``run_<repetition>_<config>_inprogress`` while it runs
and is renamed ``run_<repetition>_<config>_ret_<return code>`` when it ends (0: every batch size measured, 1: at
least one failed); its ``campaign_run.json`` records the matrix's fingerprint. Running the same command again skips
the runs that have a ``_ret_`` folder of this matrix and redoes the others; a folder left ``_inprogress`` by a kill
is kept, renamed ``..._abandoned-<k>``, never reused or deleted.

``--replace-matrix`` records another matrix in ``campaign.json`` (the matrices it replaced under ``replaced``); the
old runs stay on disk but the table counts only the new matrix's. A run of the new plan whose folder name an old run
already holds (same repetition and config string: a changed setting such as ``warmup``, which config strings do not
show) is refused before anything runs: its old result would be skipped as if it answered the new matrix.

Several processes may run one campaign at once (Slurm array tasks with ``--only``): each renames only its own run's
folder, and the renames and the rebuild of results.csv from the folders happen under one lock (``flock``), so the
last writer always sees every finished run and no row is lost. Each run is claimed for as long as it runs (a lock
of its own, ``.<run>.lock``): a second process for the same run (a requeued array task, the same command started
twice) is refused in one line, exit 2, and the first one's folder is left alone. A folder the process cannot write
in (read-only, no permission) is one line too.
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

from trainbench.bench.launch import local_process_problem
from trainbench.bench.sweep import measure_throughput
from trainbench.campaign.matrix import Experiment, Matrix, bench_configs, planned_runs
from trainbench.campaign.table import (
    CampaignMatrix,
    RunInfo,
    finished_folders,
    read_run_info,
    write_campaign_table,
)
from trainbench.config import BenchConfig
from trainbench.engines.devices import resolve_device_here
from trainbench.errors import UsageError, os_reason
from trainbench.profile.run import run_profile
from trainbench.results.files import write_json_atomic
from trainbench.results.layout import ABANDONED, CAMPAIGN, CAMPAIGN_RUN, FINISHED, IN_PROGRESS, REFUSED, RUN_PREFIX
from trainbench.results.records import format_of, unstamped
from trainbench.results.store import RunStore

LOCK_FILE = ".campaign.lock"
Echo = Callable[[str], None]


@dataclass(frozen=True)
class PlannedRun:
    number: int  # in the plan's order (--dry-run's first column, --only's argument)
    repetition: int
    experiment: Experiment

    @property
    def stem(self) -> str:
        return f"{RUN_PREFIX}{self.repetition}_{self.experiment.name}"


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


def _lock_file(path: Path) -> int:
    """The lock file's descriptor; a folder this process cannot write in is one line."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise UsageError(f"{path.parent}: cannot write in the campaign folder ({os_reason(error)})") from None


@contextlib.contextmanager
def campaign_lock(folder: Path) -> Iterator[None]:
    """The campaign folder's lock, waited for: held only for renames and the table's rebuild (seconds)."""
    descriptor = _lock_file(folder / LOCK_FILE)
    try:
        with contextlib.suppress(OSError):  # a file system without locks: go on unguarded rather than refuse
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def run_claim(folder: Path, run: PlannedRun) -> Iterator[None]:
    """The run's own lock, not waited for and held while it runs: another process running it now is refused."""
    descriptor = _lock_file(folder / f".{run.stem}.lock")
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{folder / (run.stem + IN_PROGRESS)}: run {run.number} is running in another process "
                             "now (a requeued or repeated task?); it was left alone: run this again when that one "
                             "has ended (finished runs are skipped)") from None
        except OSError:  # a file system without locks: go on unguarded rather than refuse
            pass
        yield
    finally:
        os.close(descriptor)


def check_campaign(folder: Path, matrix: Matrix, shuffle_seed: int | None, replace: bool) -> None:
    """Refuse, reading only, what ``open_campaign`` would refuse in an existing campaign.json (for --emit-slurm:
    its tasks would all fail)."""
    path = folder / CAMPAIGN
    if path.is_file() and not replace:
        _same_plan(path, _read_campaign(path), matrix.fingerprint(), shuffle_seed)


def _same_plan(path: Path, old: dict[str, Any], fingerprint: str, shuffle_seed: int | None) -> None:
    if old.get("fingerprint") != fingerprint:
        raise UsageError(f"{path}: this folder holds a campaign of another matrix ({old.get('matrix')}); "
                         "choose another --output, or pass --replace-matrix to run this one beside its runs")
    if old.get("shuffle") != shuffle_seed:
        raise UsageError(f"{path}: the campaign was planned with --shuffle {old.get('shuffle')}; give the "
                         "same, or run numbers would name other runs")


def _run_file_of(path: Path) -> RunInfo | None:
    """A run folder's campaign_run.json; None when unreadable (the table shows why)."""
    try:
        return read_run_info(path / CAMPAIGN_RUN)
    except UsageError:
        return None


def _taken_names(folder: Path, planned: Sequence[PlannedRun], answers: CampaignMatrix) -> None:
    """Refuse a plan one of whose runs has a finished folder of another matrix: the same name, other settings."""
    stems = {run.stem: run for run in planned}
    for found in sorted(finished_folders(folder), key=lambda item: item.path.name):
        run = stems.get(found.stem)
        if run is not None and not answers.answers(_run_file_of(found.path)):
            raise UsageError(f"{found.path}: holds run {run.number} of the matrix this folder held before (same "
                             "name, other settings); its result would stand for the new matrix's: choose another "
                             "--output for this matrix")


def open_campaign(folder: Path, matrix: Matrix, shuffle_seed: int | None, planned: Sequence[PlannedRun],
                  replace: bool) -> CampaignMatrix:
    """Make the folder and its campaign.json, or check that an existing one is of this matrix (a different matrix
    would mix two plans in one results table) unless ``replace``: then the new matrix is recorded with the ones it
    replaced (their runs are kept and left out of the table), and a plan that reuses an old run's name is refused.
    Returns what decides which finished folders answer this matrix."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: not a folder, cannot hold a campaign")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{folder}: cannot make the campaign folder ({os_reason(error)})") from None
    fingerprint = matrix.fingerprint()
    record: dict[str, Any] = {"matrix": matrix.source, "fingerprint": fingerprint, "shuffle": shuffle_seed,
                              "runs": len(planned)}
    path = folder / CAMPAIGN
    with campaign_lock(folder):
        old = _read_campaign(path) if path.exists() else None
        if old is not None and not replace:
            _same_plan(path, old, fingerprint, shuffle_seed)
            return CampaignMatrix(fingerprint, _replaced(old))
        replaced = _replaced(old) if old is not None else ()
        if old is not None and isinstance(old.get("fingerprint"), str) and old["fingerprint"] != fingerprint:
            replaced = (*replaced, old["fingerprint"])
        answers = CampaignMatrix(fingerprint, replaced)
        _taken_names(folder, planned, answers)
        write_json_atomic(path, {**record, "replaced": list(replaced)} if replaced else record)
    return answers


def _replaced(record: dict[str, Any]) -> tuple[str, ...]:
    replaced = record.get("replaced")
    return tuple(str(item) for item in replaced) if isinstance(replaced, list) else ()


def _read_campaign(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        format_of(data)
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not a campaign file ({type(error).__name__}: {error})") from None
    return unstamped(data)


_FINISHED = re.compile(rf"{FINISHED}(\d+)")


def finished_folder(folder: Path, run: PlannedRun, answers: CampaignMatrix | None = None) -> Path | None:
    """The run's finished folder (``<stem>_ret_<code>``) of the matrix ``answers`` stands for (any matrix when
    None), None when it has not finished; a finished folder of another matrix is refused (``_taken_names``)."""
    for path in sorted(folder.glob(f"{run.stem}{FINISHED}*")):
        if not (_FINISHED.fullmatch(path.name[len(run.stem):]) and path.is_dir()):
            continue
        if answers is not None and not answers.answers(_run_file_of(path)):
            _taken_names(folder, [run], answers)
        return path
    return None


def _written(action: Callable[[], Any], where: Path) -> Any:
    """``action`` (a rename, a mkdir in the campaign folder); an OSError is one line naming ``where``."""
    try:
        return action()
    except OSError as error:
        raise UsageError(f"{where}: cannot write in the campaign folder ({os_reason(error)})") from None


def _start(folder: Path, run: PlannedRun, fingerprint: str) -> Path:
    """A fresh in-progress folder for the run, the one a killed attempt left moved aside; campaign_run.json in it.
    The caller holds the run's claim: an in-progress folder here is a dead attempt's, never a live one's."""
    path = folder / f"{run.stem}{IN_PROGRESS}"
    with campaign_lock(folder):
        if path.exists():
            attempt = 1
            while (folder / f"{run.stem}{ABANDONED}{attempt}").exists():
                attempt += 1
            _written(lambda: path.rename(folder / f"{run.stem}{ABANDONED}{attempt}"), path)
        _written(path.mkdir, path)
    write_json_atomic(path / CAMPAIGN_RUN, {"run": run.number, "repetition": run.repetition,
                                        "experiment": run.experiment.index, "config": run.experiment.name,
                                        "values": run.experiment.values, "fingerprint": fingerprint})
    return path


def _finish(folder: Path, path: Path, run: PlannedRun, code: int) -> Path:
    with campaign_lock(folder):
        done = _written(lambda: path.rename(folder / f"{run.stem}{FINISHED}{code}"), path)
        write_campaign_table(folder)
    return done


def _on_this_machine(configs: list[BenchConfig]) -> list[BenchConfig]:
    """The device "auto" resolved where the run happens (a Slurm task's node), as the throughput command does, and
    its processes bounded as there (one per GPU or core)."""
    model = dataclasses.replace(configs[0].model, device=resolve_device_here(configs[0].model.device))
    if problem := local_process_problem(configs[0].launch, model.device):
        raise UsageError(f"gpus {configs[0].launch.processes_per_node}: {problem}")
    return [dataclasses.replace(config, model=model) for config in configs]


def _measure(matrix: Matrix, run: PlannedRun, path: Path, echo: Echo) -> int:
    """One planned run: the throughput sweep into ``path``, or the profiled sweep into a folder inside it."""
    configs = _on_this_machine(bench_configs(matrix, run.experiment))
    settings = matrix.settings
    window = configs[0].profile
    store: RunStore
    if window is not None:
        store = run_profile(window, configs, path, echo, timeout_s=settings.timeout,
                            clock_control=settings.clock_control)
    else:
        store = measure_throughput(configs, path, echo, settings.timeout, run_dir=path)
    return 0 if all(result.ok for result in store.results) else 1


def run_one(matrix: Matrix, folder: Path, run: PlannedRun, echo: Echo) -> int:
    """Run one planned run into its folder (the caller holds its claim); a refusal that every run would meet (a
    UsageError: no profiler, no GPU) leaves the folder abandoned, not finished, so that the next call redoes it."""
    path = _start(folder, run, matrix.fingerprint())
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
    answers = open_campaign(folder, matrix, shuffle_seed, runs, replace)
    chosen = [runs[n] for n in only] if only else runs
    outcome = CampaignOutcome([], [])
    for run in chosen:
        with run_claim(folder, run):  # checked under the claim: a run another process just finished is skipped
            if finished_folder(folder, run, answers) is not None:
                outcome.skipped.append(run)
                continue
            outcome.ran.append((run, run_one(matrix, folder, run, echo)))
    with campaign_lock(folder):
        write_campaign_table(folder)  # also after a call that ran nothing: the table matches the folders
    return outcome
