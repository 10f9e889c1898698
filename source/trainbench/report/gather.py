"""What ``trainbench report`` puts on its page: everything reportable under the folders, as plain records.

Finds, and reads through the results model and the suite's own readers: throughput runs (``summary.json``),
profiles (``profile.json`` with ncu's per-kernel tables and nsys' timeline summaries), campaigns (``campaign.json``:
the campaign table and ``campaign_summary``), variability folders (``variability.json``: the variability
analysis), models (``model.json``), training runs (``metrics.jsonl`` beside ``config.json``) and their environments
(``env.json``); every measured setting of runs and campaigns is one row of the ranking (``report/ranking.py``),
whose pairs are compared with ``trainbench compare``'s verdict. The gathering lives here, in the top layer above
every one it reads (and imported only when a report is made: pandas and scipy stay out of every other command's
start-up); the page itself is ``report/html.py``, which receives the records.

A value that is no measurement (NaN, infinite, negative, a text or a list where a number belongs) is kept with why,
its file and field named: a result as ``invalid`` (the results model marks rates, times and their spreads), an
epoch, a model or a list of nsys' by index, telemetry columns by file and field. A file of the wrong shape (an
env.json whose ``gpu`` is a text) is left out and named like an unreadable one. The page is written by
``write_new``: under a name nothing holds, never over a file; so is the ranking's CSV beside it (``ranking.csv``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import pandas as pd

from trainbench.analysis.variability import across, load_runs, per_gpu, read_plan
from trainbench.campaign.table import CampaignRuns, campaign_runs, campaign_summary, runs_table
from trainbench.errors import UsageError, os_reason
from trainbench.profile.ncu import read_kernel_table
from trainbench.profile.nsys import TIMELINE_SUFFIX, read_timeline_summary
from trainbench.render.telemetry_plot import timeline_problems
from trainbench.report.found import (
    Campaign,
    Environment,
    ModelFile,
    Profile,
    ReportData,
    RunRecord,
    Training,
    Variability,
    short_names,
)
from trainbench.report.html import render
from trainbench.report.ranking import csv_frame, measured_rows
from trainbench.report.sections.invalid import invalid_items
from trainbench.results.csv_cells import neutral_frame
from trainbench.results.layout import (
    CAMPAIGN,
    ENV,
    MODEL,
    PROFILE,
    RANKING_CSV,
    REPORT_PAGE,
    SUMMARY,
    TRAIN_CONFIG,
    batch_file,
    in_unfinished_run,
)
from trainbench.results.records import RecordError, is_measurement, unstamped
from trainbench.results.run_settings import differing
from trainbench.results.store import read_summary
from trainbench.telemetry.schema import DEFAULT_OUTLIER_THRESHOLD, TELEMETRY_DIR, VARIABILITY_FILE
from trainbench.training.loop import FAILURES_FILE, METRICS_FILE, upgraded_metrics

MAX_NAMES = 10_000  # report-1.html... tried before giving up
# Values the page draws that the results model does not check itself (the windows' spread around images/s).
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
        named = str(path.parent) in str(error)  # the file, or one beside it (a campaign's run file)
        data.skipped.append(str(error) if named else f"{path}: {error}")
    except RecordError as error:  # a file of the wrong shape, the message says how
        data.skipped.append(f"{path}: {error}")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:  # RecursionError: deep JSON
        # what an unreadable file raises; anything else is a reader's bug, and fails instead of hiding on the page
        data.skipped.append(f"{path}: {type(error).__name__}: {error}")
    return None


def _json_object(path: Path) -> dict[str, Any]:
    """The file's object; a UsageError naming this file (a training's config.json is read for its metrics.jsonl)."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise UsageError(f"{path}: {type(error).__name__}: {error}") from None
    if not isinstance(content, dict):
        raise UsageError(f"{path}: not a JSON object")
    return unstamped(content)


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(line number, the line's object) for every line; None for a line that holds no JSON object, except the
    last one when it is cut short (by a crash: the lines before it still count)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        if isinstance(row, dict):
            yield number, row
        elif line.strip() and number < len(lines):
            yield number, None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _not_measured(value: Any) -> str:
    return f"is {value!r}, not a finite non-negative number"


# --- readers, one per kind of folder --------------------------------------------------------------------------


def read_run(path: Path) -> RunRecord:
    """A throughput run's or a profile's summary (results model), with the pictures in its folder and the
    telemetry values left out as no reading."""
    summary = read_summary(path, "throughput run or profile")
    pictures = sorted(picture for picture in path.parent.glob("*.png") if picture.is_file())
    return RunRecord(path.parent, summary.header, [result.to_row() for result in summary.results], pictures,
               timeline_problems(path.parent / TELEMETRY_DIR))


def _steps_problem(steps: Any) -> str | None:
    if not isinstance(steps, list):
        return f"step_gpu_ms is {steps!r}, not a list"
    bad = next((i for i, step in enumerate(steps) if step is None or not is_measurement(step)), None)
    return None if bad is None else f"step_gpu_ms[{bad}] {_not_measured(steps[bad])}"


_KERNEL_NUMBERS = ("total_ns", "instances", "mean_ns", "share")  # what the timeline section computes with


def _kernels_problem(kernels: Any) -> str | None:
    if not isinstance(kernels, list):
        return f"top_kernels is {kernels!r}, not a list"
    for i, kernel in enumerate(kernels):
        if not isinstance(kernel, dict):
            return f"top_kernels[{i}] is {kernel!r}, not an object"
        for name in _KERNEL_NUMBERS:
            if not is_measurement(kernel.get(name)):
                return f"top_kernels[{i}].{name} {_not_measured(kernel[name])}"
    return None


def _nsys_details(run: RunRecord, done: list[int]) -> Profile:
    """nsys' top kernels and per-step GPU time by batch size; a list holding something else is left out, named."""
    import pandas as pd

    kernels: dict[int, pd.DataFrame] = {}
    steps: dict[int, list[float]] = {}
    left_out: list[str] = []
    for batch in done:
        summary = read_timeline_summary(run.path, batch) or {}
        where = batch_file(run.path, batch, TIMELINE_SUFFIX)
        found_steps, found_kernels = summary.get("step_gpu_ms") or [], summary.get("top_kernels") or []
        if problem := _steps_problem(found_steps):
            left_out.append(f"{where}: {problem}")
        elif found_steps:
            steps[batch] = [float(step) for step in found_steps]
        if problem := _kernels_problem(found_kernels):
            left_out.append(f"{where}: {problem}")
        elif found_kernels:
            kernels[batch] = pd.DataFrame(found_kernels)
    return Profile(run, kernels, steps, left_out)


def read_profile(path: Path) -> Profile:
    run = read_run(path)
    done = [int(row["batch_size"]) for row in run.rows if row.get("status") == "ok"]
    if run.header.get("profiler") == "ncu":
        kernels = {batch: read_kernel_table(run.path, batch) for batch in done}
        return Profile(run, {batch: table for batch, table in kernels.items() if table is not None})
    if run.header.get("profiler") == "nsys":
        return _nsys_details(run, done)
    return Profile(run)


def _campaign_summaries(runs: CampaignRuns) -> dict[str, RunRecord]:
    """The counted throughput runs' summaries by folder name (their headers and values, for the ranking); one that
    cannot be read is left out here (the table's error row already names it)."""
    found = {}
    for folder, _, _ in runs.counted:
        with contextlib.suppress(UsageError, RecursionError):
            summary = read_summary(folder.path / SUMMARY, "campaign run")
            found[folder.path.name] = RunRecord(folder.path, summary.header,
                                                [result.to_row() for result in summary.results])
    return found


def read_campaign(path: Path) -> Campaign:
    runs = campaign_runs(path.parent)
    table = runs_table(runs)  # a run file of the wrong shape (gpus "two") is an error row naming it
    return Campaign(path.parent, table, campaign_summary(table), runs.left_out, _campaign_summaries(runs))


def read_variability(path: Path) -> Variability:
    folder = path.parent
    threshold = float(read_plan(folder).get("outlier_threshold", DEFAULT_OUTLIER_THRESHOLD))
    runs = load_runs(folder)
    gpus = per_gpu(runs, threshold)
    return Variability(folder, runs, gpus, across(runs, gpus), threshold)


# metrics.jsonl's values: (name, what it must be); a loss may be NaN or infinite (a training that diverged)
_LOSSES, _FRACTIONS = ("train_loss", "eval_loss"), ("eval_top1", "eval_top5")
_RATES = ("train_samples_per_sec", "train_s", "learning_rate_end")


def _epoch_problem(row: dict[str, Any]) -> str | None:
    """Why an epoch's row cannot be drawn, or None."""
    epoch = row.get("epoch")
    if not _whole(epoch) or epoch < 1:
        return f"epoch is {epoch!r}, not a whole number >= 1"
    for name in (*_LOSSES, *_FRACTIONS, *_RATES):
        value = row.get(name)
        if value is None:
            continue
        if not _number(value):
            return f"{name} is {value!r}, not a number"
        if name in _LOSSES and value < 0:
            return f"{name} is {value!r}, not a loss (below 0)"
        if name in _FRACTIONS and not 0 <= value <= 1:
            return f"{name} is {value!r}, not a fraction between 0 and 1"
        if name in _RATES and not is_measurement(value):
            return f"{name} {_not_measured(value)}"
    return None


def read_training(path: Path) -> Training:
    folder = path.parent
    config = _json_object(folder / TRAIN_CONFIG) if (folder / TRAIN_CONFIG).is_file() else None
    failures = ([row for _, row in _json_lines(folder / FAILURES_FILE) if row is not None]
                if (folder / FAILURES_FILE).is_file() else [])
    epochs: list[dict[str, Any]] = []
    invalid: dict[int, str] = {}
    left_out: list[str] = []
    for number, row in _json_lines(path):
        if row is None:
            left_out.append(f"{path}: line {number}: not a JSON object")
            continue
        row = upgraded_metrics(row)
        if problem := _epoch_problem(row):
            invalid[len(epochs)] = f"{path}: line {number}: {problem}"
        epochs.append(row)
    return Training(folder, config, epochs, failures, invalid, left_out)


_MODEL_NUMBERS = ("smape", "adjusted_r2", "rss", "relative_error")  # finite numbers (adjusted R^2 may be below 0)


def _listed_problem(model: dict[str, Any], name: str, numbers: tuple[str, ...]) -> str | None:
    """A list of objects (predictions, checks) whose ``numbers`` are finite numbers or absent."""
    items = model.get(name)
    if items is None:
        return None
    if not isinstance(items, list):
        return f"{name} is {items!r}, not a list"
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"{name}[{i}] is {item!r}, not an object"
        bad = next((key for key in numbers if item.get(key) is not None and not _finite(item[key])), None)
        if bad is not None:
            return f"{name}[{i}].{bad} is {item[bad]!r}, not a finite number"
    return None


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def _model_problem(model: Any) -> str | None:
    """Why one of model.json's models cannot be shown as a fit, or None."""
    if not isinstance(model, dict):
        return f" is {model!r}, not an object"
    bad = next((name for name in _MODEL_NUMBERS if model.get(name) is not None and not _finite(model[name])), None)
    if bad is not None:
        return f".{bad} is {model[bad]!r}, not a finite number"
    values = model.get("values")
    if values is not None and (not _whole(values) or values < 0):
        return f".values is {values!r}, not a count"
    for name, numbers in (("predictions", ("value",)), ("checks", ("measured", "predicted"))):
        if problem := _listed_problem(model, name, numbers):
            return f".{problem}"
    return None


def read_model(path: Path) -> ModelFile:
    """model.json; a model holding a value of the wrong type is left out, named (file, model, field)."""
    content = _json_object(path)
    models = content.get("models")
    if not isinstance(models, list):
        raise UsageError(f"{path}: models is {models!r}, not a list of models")
    invalid = {i: f"{path}: models[{i}]{problem}" for i, model in enumerate(models)
               if (problem := _model_problem(model))}
    return ModelFile(path.parent, content, invalid)


def _environment_settings(env: dict[str, Any]) -> dict[str, Any]:
    """What makes two environments the same machine and software (not the time, command or idle clocks), flat:
    the framework's versions by name ("framework.cudnn"), so that ``same_value`` reads them as versions."""
    gpu = env.get("gpu") or {}
    gpus = [(g.get("uuid"), g.get("name")) for g in gpu.get("gpus") or []]
    fixed = {name: env.get(name) for name in ("hostname", "platform", "python", "cpu_model", "trainbench_version",
                                              "suite_commit", "cuda_visible_devices")}
    framework = {f"framework.{name}": value for name, value in (env.get("framework") or {}).items()}
    return {**fixed, **framework, "gpu.driver": gpu.get("driver"), "gpu.gpus": gpus}


# env.json's nested values and what they must be: the environment section reads into them
_ENV_SHAPES: tuple[tuple[str, type, str], ...] = (("gpu", dict, "an object"), ("framework", dict, "an object"),
                                                   ("command", list, "a list"))


def read_environment(path: Path) -> dict[str, Any]:
    """env.json, its nested values checked: a UsageError naming the file and the field otherwise."""
    env = _json_object(path)
    for name, kind, what in _ENV_SHAPES:
        if env.get(name) is not None and not isinstance(env[name], kind):
            raise UsageError(f"{path}: {name} is {env[name]!r}, not {what}")
    gpus = (env.get("gpu") or {}).get("gpus")
    if gpus is not None and not (isinstance(gpus, list) and all(isinstance(gpu, dict) for gpu in gpus)):
        raise UsageError(f"{path}: gpu.gpus is {gpus!r}, not a list of objects")
    return env


def read_environments(data: ReportData, folders: list[Path]) -> list[Environment]:
    """The env.json files grouped: one group per machine and software, versions compared in any notation (torch's
    cuDNN 90100 is TensorFlow's "9.1.0")."""
    grouped: list[tuple[dict[str, Any], Environment]] = []
    for path in _files(folders, ENV):
        env = _readable(data, read_environment, path)
        if env is None:
            continue
        settings = _environment_settings(env)
        group = next((found for known, found in grouped if not differing(known, settings)), None)
        if group is None:
            group = Environment(env, [])
            grouped.append((settings, group))
        group.folders.append(path.parent)
        group.envs.append(env)
    return [group for _, group in grouped]


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
    campaigns, studies = _files(folders, CAMPAIGN), _files(folders, VARIABILITY_FILE)
    # a campaign's or a variability study's runs are shown by their own sections, not run by run
    grouped = [path.parent for path in (*campaigns, *studies)]
    summaries = [path for path in _files(folders, SUMMARY)
                 if not any(root in path.parents for root in grouped)]
    runs, profiles = _kept(data, read_run, summaries), _kept(data, read_profile, _files(folders, PROFILE))
    names = short_names([run.path for run in (*runs, *(profile.run for profile in profiles))])
    data.runs = [replace(run, name=names[run.path]) for run in runs]
    data.profiles = [replace(profile, run=replace(profile.run, name=names[profile.run.path])) for profile in profiles]
    data.campaigns = _kept(data, read_campaign, campaigns)
    data.variability = _kept(data, read_variability, studies)
    data.models = _kept(data, read_model, _files(folders, MODEL))
    data.trainings = _kept(data, read_training, _files(folders, METRICS_FILE))
    data.environments = read_environments(data, folders)
    data.measured = measured_rows(data)
    return data


def output_file(text: str) -> Path:
    """Where ``-o TEXT`` puts the page: an existing folder gets ``report.html`` (or the next free name) inside it;
    a file name needs its folder to exist. UsageError, naming the option, otherwise."""
    path = Path(text)
    if path.is_dir():
        return path / REPORT_PAGE
    if text.endswith(("/", os.sep)):
        raise UsageError(f"-o {text}: no such folder (the page is written into an existing folder, or to a file name)")
    if not path.parent.is_dir():
        what = "is a file" if path.parent.exists() else "does not exist"
        raise UsageError(f"-o {text}: the folder {path.parent} {what}")
    return path


def free_names(path: Path) -> Iterator[Path]:
    """The path itself, then path-1, path-2...: the names a report may take."""
    yield path
    for number in range(1, MAX_NAMES):
        yield path.with_name(f"{path.stem}-{number}{path.suffix}")


def _claim(name: Path, written: Path) -> bool:
    """Give the finished page ``written`` the name, unless the name is taken (False): a hard link never replaces
    a file, so a report made at the same moment by another process is not overwritten either."""
    try:
        os.link(written, name)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: create the name exclusively and copy the page into it
        try:
            with open(name, "x", encoding="utf-8", newline="\n") as out:
                out.write(written.read_text(encoding="utf-8"))
        except FileExistsError:
            return False
    return True


def write_new(path: Path, text: str) -> Path:
    """``text`` at ``path`` or the next free name (``free_names``), never replacing anything; the name taken."""
    written = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(written, "x", encoding="utf-8", newline="\n") as out:
            out.write(text)
        for name in free_names(path):
            if _claim(name, written):
                return name
    except OSError as error:
        raise UsageError(f"{path}: cannot write ({os_reason(error)})") from None
    finally:
        with contextlib.suppress(OSError):
            written.unlink()
    raise UsageError(f"{path}: no free name (it and {path.stem}-1 to -{MAX_NAMES - 1} are taken)")


def write_ranking(page: Path, data: ReportData) -> Path | None:
    """The ranking table (``report.ranking.csv_frame``) as ``ranking.csv`` beside the page (the next free name when
    taken, never over a file); None when nothing was measured."""
    frame = data.measured if data.measured is not None else measured_rows(data)
    if frame.empty:
        return None
    ranking = neutral_frame(csv_frame(frame)).to_csv(index=False, lineterminator="\n")
    return write_new(page.with_name(RANKING_CSV), ranking)


def make_report(folders: list[Path], output: Path) -> tuple[Path, ReportData, Path | None]:
    """The page of everything under ``folders`` at ``output`` (inside it when a folder; the next free name when
    taken), what it was made of, and the ranking's CSV beside it (None without a measured setting); UsageError when
    there is nothing to report."""
    data = gather(folders)
    if data.empty():
        why = f" ({'; '.join(data.skipped)})" if data.skipped else ""
        raise UsageError(f"{', '.join(map(str, folders))}: nothing to report (no run, profile, campaign, variability "
                         f"folder, model or training run){why}")
    page = write_new(output / REPORT_PAGE if output.is_dir() else output, render(data))
    return page, data, write_ranking(page, data)


def write_report(folders: list[Path], output: Path) -> Path:
    return make_report(folders, output)[0]


def left_out_lines(data: ReportData) -> list[str]:
    """What the page left out, counted, for the terminal (the page names each)."""
    lines = []
    if data.skipped:
        lines.append(f"left out, not readable: {len(data.skipped)} file{'s' if len(data.skipped) > 1 else ''} "
                     "(named at the top of the page)")
    invalid = len(invalid_items(data))
    if invalid:
        lines.append(f"left out of figures, comparisons and statistics: {invalid} invalid value"
                     f"{'s' if invalid > 1 else ''} (NaN, infinite, negative or not a number; listed under Invalid "
                     "values)")
    return lines
