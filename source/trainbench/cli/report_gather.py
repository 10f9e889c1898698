"""What ``trainbench report`` puts on its page: everything reportable under the folders, as plain records.

Finds, and reads through the results model and the suite's own readers: throughput runs (``summary.json``),
profiles (``profile.json`` with ncu's per-kernel tables and nsys' timeline summaries), campaigns (``campaign.json``:
``campaign_table`` and ``campaign_summary``), variability folders (``variability.json``: the variability analysis),
models (``model.json``), training runs (``metrics.jsonl`` beside ``config.json``) and their environments
(``env.json``); runs are compared as ``trainbench compare`` does. The gathering lives here, above every layer it
reads (and imported only when a report is made: pandas and scipy stay out of every other command's start-up); the
page itself is ``report/html.py``, which receives the records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from trainbench.analysis.variability import across, load_runs, per_gpu, read_plan
from trainbench.bench.compare import compare_loaded, load_run, setting_differences
from trainbench.campaign.runner import CAMPAIGN_FILE
from trainbench.campaign.table import campaign_summary, campaign_table
from trainbench.errors import UsageError
from trainbench.profile.ncu import read_kernel_table
from trainbench.profile.nsys import read_timeline_summary
from trainbench.report.html import (
    Campaign,
    Comparison,
    Environment,
    ModelFile,
    Profile,
    ReportData,
    Run,
    Training,
    Variability,
    render,
)
from trainbench.results.files import in_unfinished_run, write_text_atomic
from trainbench.results.records import unstamped
from trainbench.results.store import read_summary
from trainbench.telemetry.schema import DEFAULT_OUTLIER_THRESHOLD, VARIABILITY_FILE
from trainbench.training.loop import FAILURES_FILE, METRICS_FILE

MAX_COMPARISONS = 8  # runs compared with the first one; more would bury the page
Found = TypeVar("Found")


# --- finding files --------------------------------------------------------------------------------------------


def _files(folders: list[Path], name: str) -> list[Path]:
    """Every file ``name`` under the folders, sorted, leaving out a campaign's unfinished run folders."""
    found = []
    for folder in folders:
        found += [path for path in folder.rglob(name) if not in_unfinished_run(path, folder)]
    return sorted(set(found))


def _readable(data: ReportData, read: Callable[[Path], Found], path: Path) -> Found | None:
    """``read(path)``, or None with the path and the problem kept in ``data.skipped``: one unreadable file does
    not cost the page."""
    try:
        return read(path)
    except UsageError as error:
        data.skipped.append(str(error) if str(path) in str(error) else f"{path}: {error}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        data.skipped.append(f"{path}: {type(error).__name__}: {error}")
    return None


def _json_object(path: Path) -> dict[str, Any]:
    content = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(content, dict):
        raise ValueError("not a JSON object")
    return unstamped(content)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the lines before it still count
        if isinstance(row, dict):
            rows.append(row)
    return rows


# --- readers, one per kind of folder --------------------------------------------------------------------------


def read_run(path: Path) -> Run:
    """A throughput run's or a profile's summary (results model), with the pictures in its folder."""
    summary = read_summary(path, "throughput run or profile")
    return Run(path.parent, summary.header, [result.to_row() for result in summary.results],
               sorted(path.parent.glob("*.png")))


def read_profile(path: Path) -> Profile:
    run = read_run(path)
    done = [int(row["batch_size"]) for row in run.rows if row.get("status") == "ok"]
    if run.header.get("profiler") == "ncu":
        kernels = {batch: read_kernel_table(run.path, batch) for batch in done}
        return Profile(run, {batch: table for batch, table in kernels.items() if table is not None})
    if run.header.get("profiler") == "nsys":
        timelines = {batch: read_timeline_summary(run.path, batch) for batch in done}
        found = {batch: summary for batch, summary in timelines.items() if summary}
        return Profile(run, {batch: pd.DataFrame(summary.get("top_kernels") or []) for batch, summary in found.items()
                             if summary.get("top_kernels")},
                       {batch: list(summary.get("step_gpu_ms") or []) for batch, summary in found.items()})
    return Profile(run)


def read_campaign(path: Path) -> Campaign:
    table = campaign_table(path.parent)
    return Campaign(path.parent, table, campaign_summary(table))


def read_variability(path: Path) -> Variability:
    folder = path.parent
    threshold = float(read_plan(folder).get("outlier_threshold", DEFAULT_OUTLIER_THRESHOLD))
    runs = load_runs(folder)
    gpus = per_gpu(runs, threshold)
    return Variability(folder, runs, gpus, across(runs, gpus), threshold)


def read_training(path: Path) -> Training:
    folder = path.parent
    config = _json_object(folder / "config.json") if (folder / "config.json").is_file() else None
    failures = _json_lines(folder / FAILURES_FILE) if (folder / FAILURES_FILE).is_file() else []
    return Training(folder, config, _json_lines(path), failures)


def _environment_key(env: dict[str, Any]) -> str:
    """What makes two environments the same machine and software (not the time, command or idle clocks)."""
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    gpus = [(g.get("uuid"), g.get("name")) for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    fixed = [env.get(name) for name in ("hostname", "platform", "python", "cpu_model", "trainbench_version",
                                        "suite_commit", "cuda_visible_devices", "framework")]
    return json.dumps([*fixed, gpu.get("driver"), gpus], sort_keys=True, default=str)


def read_environments(data: ReportData, folders: list[Path]) -> list[Environment]:
    grouped: dict[str, Environment] = {}
    for path in _files(folders, "env.json"):
        env = _readable(data, _json_object, path)
        if env is not None:
            grouped.setdefault(_environment_key(env), Environment(env, [])).folders.append(path.parent)
    return list(grouped.values())


def compare_with_first(runs: list[Run]) -> list[Comparison]:
    """Every run against the first one, as ``trainbench compare FIRST RUN`` (at most ``MAX_COMPARISONS``)."""
    if len(runs) < 2:
        return []
    comparisons = []
    for other in runs[1:MAX_COMPARISONS + 1]:
        try:
            run_a, run_b = load_run(runs[0].path), load_run(other.path)
            comparisons.append(Comparison(run_a.path, run_b.path, compare_loaded(run_a, run_b),
                                          setting_differences(run_a, run_b)))
        except UsageError as error:
            comparisons.append(Comparison(runs[0].path, other.path, None, problem=f"Not compared: {error}"))
    return comparisons


# --- the whole gathering --------------------------------------------------------------------------------------


def _check_folders(folders: list[Path]) -> None:
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder}: not a folder ({'a file' if folder.exists() else 'no such folder'})")


def _kept(data: ReportData, read: Callable[[Path], Found], paths: list[Path]) -> list[Found]:
    return [found for found in (_readable(data, read, path) for path in paths) if found is not None]


def gather(folders: list[Path]) -> ReportData:
    """Everything reportable under ``folders``; a file that cannot be read is listed in ``skipped``."""
    _check_folders(folders)
    data = ReportData([str(folder) for folder in folders])
    campaigns, studies = _files(folders, CAMPAIGN_FILE), _files(folders, VARIABILITY_FILE)
    # a campaign's or a variability study's runs are shown by their own sections, not run by run
    grouped = [path.parent for path in (*campaigns, *studies)]
    summaries = [path for path in _files(folders, "summary.json")
                 if not any(root in path.parents for root in grouped)]
    data.runs = _kept(data, read_run, summaries)
    data.profiles = _kept(data, read_profile, _files(folders, "profile.json"))
    data.campaigns = _kept(data, read_campaign, campaigns)
    data.variability = _kept(data, read_variability, studies)
    data.models = _kept(data, lambda path: ModelFile(path.parent, _json_object(path)), _files(folders, "model.json"))
    data.trainings = _kept(data, read_training, _files(folders, METRICS_FILE))
    data.environments = read_environments(data, folders)
    data.comparisons = compare_with_first(data.runs)
    return data


def free_path(path: Path) -> Path:
    """The path itself, or path-1, path-2... when taken: a report is never overwritten."""
    candidate, number = path, 0
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    return candidate


def write_report(folders: list[Path], output: Path) -> Path:
    """The page of everything under ``folders`` at ``output`` (or the next free name); UsageError when there is
    nothing to report."""
    data = gather(folders)
    if data.empty():
        why = f" ({'; '.join(data.skipped)})" if data.skipped else ""
        raise UsageError(f"{', '.join(map(str, folders))}: nothing to report (no run, profile, campaign, variability "
                         f"folder, model or training run){why}")
    path = free_path(output)
    write_text_atomic(path, render(data))
    return path

