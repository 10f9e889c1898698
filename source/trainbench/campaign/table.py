"""A campaign's results table (``results.csv``), rebuilt from its finished run folders, and its summary.

Which folders count:

- Only finished runs: folders named ``run_<repetition>_<config>_ret_<return code>``. The runner's other folders
  (``results.files``' markers: ``IN_PROGRESS`` while a run runs, ``ABANDONED`` after a kill, ``REFUSED`` after a
  refusal) hold no finished run and are never read.
- Only runs of the matrix in ``campaign.json``: each run records its matrix's fingerprint in ``campaign_run.json``;
  a run of another matrix (the folder's matrix before a ``--replace-matrix``) is left out. A run folder without a
  fingerprint (written before runs recorded it) counts unless ``campaign.json`` records a replacement since.
- One folder per planned run: when two finished folders name the same run (``run_0_x_ret_0`` and
  ``run_0_x_ret_1``), the one with the newest result file (``summary.json``, ``profile.json``; then
  ``campaign_run.json``; the name breaks a tie) counts and the other is left out.
  ``campaign_runs`` says what was left out, one line each; ``campaign summary`` and ``campaign run`` print them.

Rows are in planned-run order, one per run x batch size x timed window (a tidy table: filter and group it with
pandas, no cleaning needed). Columns, in order:

- ``run``: the planned run number (``--dry-run``'s first column, ``--only``'s argument); ``repetition``;
  ``experiment`` (the experiment's index in the plan); ``config`` (its config string, as in the folder's name).
- ``workload`` and its ``sample_unit`` (what samples/s counts: "image", "sentence pair", "sequence"), whether or
  not workload is an axis: as the run's summary header says (runs written before workloads: resnet50, image), else
  the run's axis value (empty when its campaign_run.json cannot be read).
- One column per axis of the matrix except batch_size and workload, named as in the matrix (``framework``,
  ``precision``, ``image_size``, ``data``, ``xla``...): the run's values (the union over runs; empty where a run
  lacks one). An axis named like a result field (``matmul_precision``, ``optimizer``, ``activation_checkpointing``,
  ``shard``) has no column here: the field's own column holds the axis's value on every row of the runs that have
  the axis (what was asked, the same on an oom row; ``shard`` "ddp" with one process too, where the run records
  none), and what the run recorded on the others (``"adamw (torch, fused)"``: name and implementation).
- ``batch_size``; ``window``: the timed window (0, 1... with ``windows: N``), empty for a batch size with no
  measurement (a failure: one row) and for a profiled one.
- ``status`` (ok, oom, error, interrupted, diverged, invalid), ``error`` (why it failed, or a warning on an ok result).
  ``invalid``: the run recorded it ok but a measured value (samples/s, a time, energy...) is NaN, infinite,
  negative or not a number; ``error`` names the file and the field (``results.store.read_summary``), and such values
  are left empty in the row so that every numeric column stays numeric.
- ``return_code`` (from the folder's name: 0 when every batch size was measured) and ``run_folder`` (its name).
- Then every result field that ``results.fields`` writes to results.csv, in the registry's order:
  ``samples_per_sec`` (over all windows of the batch size together, repeated on each of its rows),
  ``window_samples_per_sec`` (that window's own samples/s), the input pipeline's rate, the step times and counts,
  ``compile_s``, the GPU telemetry (the same on each window's row), what a sample costs: ``tokens_per_sec``
  (sequence workloads), ``parameters``, ``train_flops_per_sample``, ``achieved_flops`` and ``mfu`` (empty where not
  measured: the CPU, an unknown GPU), the machine's load, how the step ran (``matmul_precision``, ``optimizer``,
  ``attention_kernel``, ``image_layout``, ``activation_checkpointing``, ``shard``), its memory
  (``peak_memory_bytes`` and its kind, the breakdown by parameters, gradients, optimizer and activations,
  ``memory_note``) and, format 6, ``parameters_held`` (one process's), ``hardware_flops_per_sample`` and ``hfu``
  (the recomputed forward counted too); see the registry for each one's meaning.
- A profiled run (a ``profiler`` other than none) has one row per batch size, its samples/s columns empty
  (samples/s under a profiler are no throughput), and its profile record's values (``profiled_iterations``,
  ``profiled_samples_per_sec``, ``window_s``, the profiler's own summary columns...) in extra columns after all
  the others, in the order first seen.

A run folder that cannot be read (a bad ``campaign_run.json``, an unreadable summary) is one row with status
``error`` and the problem, naming the file, in ``error``; the table is built anyway.

``columns()`` is the one list of the fixed columns (the axis columns go after ``config``), derived from the
registry: a field added there is appended, so that existing columns keep their places.

The summary (``trainbench campaign summary DIR``) has one row per configuration (config and batch size) over its
repetitions: ``runs`` (repetitions with a result), ``ok``, ``invalid`` (results left out as above), the median, min
and max of the ok repetitions' samples_per_sec, ``spread_pct`` ((max - min) / median x 100) and ``cv_pct``
(standard deviation / mean x 100, ddof 1: empty with one repetition) and, when the matrix has a ``gpus`` axis,
``scaling_efficiency``: the median samples/s with N processes over N times the median of the same configuration
(every other axis equal) with 1. Invalid results never enter a statistic; the text's closing line counts them apart
from the failed ones and names each.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench import workloads
from trainbench.campaign.matrix import AXES, AXIS_DEFAULTS, NO_PROFILER
from trainbench.errors import UsageError, os_reason
from trainbench.render.console import aligned
from trainbench.results import fields
from trainbench.results.csv_cells import neutral_frame
from trainbench.results.files import write_text_atomic
from trainbench.results.header import RunHeader
from trainbench.results.layout import (
    CAMPAIGN,
    CAMPAIGN_RUN,
    FINISHED,
    PROFILE,
    RESULTS,
    RUN_PREFIX,
    SUMMARY,
    profile_folder,
)
from trainbench.results.records import BatchResult, RecordError, Status, format_of, is_measured, is_measurement
from trainbench.results.store import read_summary
from trainbench.results.variation import cv_pct

AXES_AFTER = "sample_unit"  # the axis columns are inserted after this one
WORKLOAD = "workload"  # always a column (also when the matrix varies it): the report draws each in its own unit
# Which run, workload, batch size and window a row holds, and how it ended; the result fields (``results.fields``)
# follow.
RUN_COLUMNS: tuple[str, ...] = ("run", "repetition", "experiment", "config", WORKLOAD, "sample_unit", "batch_size",
                                "window", "status", "error", "return_code", "run_folder")
RATE_COLUMNS = (fields.WINDOW_SAMPLES_PER_SEC, fields.SAMPLES_PER_SEC)  # left empty on a profiled run's rows


def result_values() -> tuple[str, ...]:
    """A result's values copied as they are (the per-window samples/s is set row by row): every field the registry
    writes to results.csv, in its order."""
    return tuple(name for name in fields.written_to(fields.Where.RESULTS_CSV) if name != fields.WINDOW_SAMPLES_PER_SEC)


def columns() -> tuple[str, ...]:
    """The fixed columns, in order (the axis columns go after ``config``): a field added to the registry is appended,
    so that existing columns keep their places."""
    return (*RUN_COLUMNS, *fields.written_to(fields.Where.RESULTS_CSV))


# As the registry declares them when this module is imported (a registry extended later: the functions above).
COLUMNS: tuple[str, ...] = columns()

STATISTICS = ("samples_per_sec_median", "samples_per_sec_min", "samples_per_sec_max", "spread_pct", "cv_pct")
SUMMARY_COLUMNS = ("config", "batch_size", "runs", "ok", "invalid", *STATISTICS, "scaling_efficiency")

# run_<repetition>_<config>_ret_<return code>; the config string never holds "_ret_<digits>" at its end
_FINISHED = re.compile(rf"{RUN_PREFIX}(\d+)_(.+){FINISHED}(-?\d+)")

Row = dict[str, Any]


@dataclass(frozen=True)
class RunFolder:
    """A finished run's folder, with what its name says."""

    path: Path
    repetition: int
    config: str
    return_code: int

    @property
    def stem(self) -> str:
        """The planned run's name (the runner's ``PlannedRun.stem``): the same for every folder of that run."""
        return f"run_{self.repetition}_{self.config}"


@dataclass(frozen=True)
class RunInfo:
    """campaign_run.json: which planned run the folder holds."""

    run: int
    repetition: int
    experiment: int
    config: str
    values: dict[str, Any]
    fingerprint: str | None = None  # the matrix the run belongs to; None in folders written before runs recorded it


@dataclass(frozen=True)
class CampaignMatrix:
    """campaign.json as far as the table needs it: the matrix whose runs count, and the matrices it replaced."""

    fingerprint: str | None  # None: no readable campaign.json, every finished run counts
    replaced: tuple[str, ...] = ()

    def answers(self, info: RunInfo | None) -> bool:
        """Whether a run folder's results answer this matrix (an unreadable run file: it cannot say, it counts)."""
        if self.fingerprint is None or info is None:
            return True
        if info.fingerprint is None:  # from before runs recorded it: of the matrix, unless one was replaced since
            return not self.replaced
        return info.fingerprint == self.fingerprint


Item = tuple[RunFolder, RunInfo | None, str | None]  # a finished folder, its run file, why that cannot be read


@dataclass(frozen=True)
class CampaignRuns:
    """The finished run folders the table counts, in planned-run order, and one line per thing left out."""

    counted: list[Item]
    left_out: list[str] = field(default_factory=list)


# --- reading the folders -----------------------------------------------------------------------------------------


def finished_folders(campaign_dir: Path) -> list[RunFolder]:
    """The folders of finished runs, by name (anything else in the campaign folder is ignored)."""
    folders = []
    for path in campaign_dir.glob(f"{RUN_PREFIX}*{FINISHED}*"):
        match = _FINISHED.fullmatch(path.name)
        if match and path.is_dir():
            folders.append(RunFolder(path, int(match[1]), match[2], int(match[3])))
    return folders


def read_run_info(path: Path) -> RunInfo:
    """A campaign_run.json; a UsageError naming the file and the field otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({os_reason(error)})") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise UsageError(f"{path}: not a campaign run file ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a campaign run file (not a JSON object)")
    try:
        format_of(data)
    except RecordError as error:
        raise UsageError(f"{path}: {error}") from None
    for key in ("run", "repetition", "experiment"):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{path}: {key} is {value!r}, not a whole number >= 0")
    config, values = data.get("config"), data.get("values")
    if not isinstance(config, str) or not config:
        raise UsageError(f"{path}: config is {config!r}, not a config string")
    if not isinstance(values, dict):
        raise UsageError(f"{path}: values is {values!r}, not an object of axis values")
    for key in ("gpus", "nodes"):  # counts the summary computes with (scaling efficiency)
        value = values.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{path}: values.{key} is {value!r}, not a whole number >= 1")
    fingerprint = data.get("fingerprint")
    if fingerprint is not None and (not isinstance(fingerprint, str) or not fingerprint):
        raise UsageError(f"{path}: fingerprint is {fingerprint!r}, not a matrix fingerprint")
    return RunInfo(data["run"], data["repetition"], data["experiment"], config, values, fingerprint)


def read_campaign_matrix(campaign_dir: Path) -> CampaignMatrix:
    """campaign.json's fingerprint and replaced ones; no fingerprint when it is absent or unreadable (the table is
    built anyway: it then counts every finished run)."""
    try:
        data = json.loads((campaign_dir / CAMPAIGN).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return CampaignMatrix(None)
    fingerprint = data.get("fingerprint") if isinstance(data, dict) else None
    if not isinstance(fingerprint, str):
        return CampaignMatrix(None)
    replaced = data.get("replaced")
    return CampaignMatrix(fingerprint, tuple(str(item) for item in replaced) if isinstance(replaced, list) else ())


def _run_columns(folder: RunFolder, info: RunInfo | None) -> Row:
    """The columns every row of a run shares; from the folder's name where its run file is unreadable."""
    row: Row = {"run_folder": folder.path.name, "return_code": folder.return_code}
    if info is None:
        return {"repetition": folder.repetition, "config": folder.config, **row}
    values = {axis: _cell(value) for axis, value in info.values.items() if axis != "batch_size"}
    return {"run": info.run, "repetition": info.repetition, "experiment": info.experiment, "config": info.config,
            **_workload_columns(info.values.get(WORKLOAD, AXIS_DEFAULTS[WORKLOAD])), **values, **row}


def _workload_columns(name: Any, sample_unit: Any = None) -> Row:
    """The workload and its sample unit (the descriptor's, when the file does not say; a name this trainbench does
    not know: no unit)."""
    if sample_unit is None and name in workloads.names():
        sample_unit = workloads.get(name).sample_unit
    return {WORKLOAD: name, "sample_unit": sample_unit}


def _cell(value: Any) -> Any:
    """A CSV cell: nested values (lists, objects) as JSON text."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def _window_rates(result: BatchResult) -> list[Any]:
    """Each timed window's samples/s: the stored list, or the one window's when there is no list; none (a
    failure) when nothing was measured."""
    rates = result.values.get(fields.WINDOW_SAMPLES_PER_SEC)
    if isinstance(rates, list) and rates:
        return rates
    overall = result.values.get(fields.SAMPLES_PER_SEC)
    return [] if overall is None else [overall]


def _shown(name: str, value: Any) -> Any:
    """An invalid result's value as its cell: a measured value that is no measurement is left empty (the error
    names it), so that the column stays numeric; a list item by item."""
    if not is_measured(name) or value is None:
        return value
    if isinstance(value, list):
        return [item if is_measurement(item) else None for item in value]
    return value if is_measurement(value) else None


def _cleared(result: BatchResult) -> BatchResult:
    if result.status is not Status.INVALID:
        return result
    return BatchResult(result.batch_size, result.status, result.error,
                       {name: _shown(name, value) for name, value in result.values.items()})


def throughput_rows(result: BatchResult) -> list[Row]:
    """One row per timed window of a batch size, or one row with no window when it has no measurement."""
    result = _cleared(result)
    common: Row = {"batch_size": result.batch_size,
                   **{name: _cell(result.values.get(name)) for name in result_values()},
                   "status": result.status.value, "error": result.error}
    rates = _window_rates(result)
    if not rates:
        return [common]
    return [{**common, "window": i, fields.WINDOW_SAMPLES_PER_SEC: rate} for i, rate in enumerate(rates)]


def _profile_column(name: str) -> bool:
    """Whether a profile record's value has a column: its own, or a measured one (never a run's, nor samples/s)."""
    if name in RATE_COLUMNS or (name in AXES and name not in result_values()):
        return False
    return name not in columns() or name in result_values()


def profile_row(result: BatchResult) -> Row:
    """One row per batch size: its record's values, except samples/s (under a profiler: no throughput) and those
    naming an axis (the profiler: the run's own value)."""
    result = _cleared(result)
    values = {name: _cell(value) for name, value in result.values.items() if _profile_column(name)}
    return {"batch_size": result.batch_size, **values, "status": result.status.value, "error": result.error}


def _summary_path(folder: Path, info: RunInfo) -> Path:
    profiler = info.values.get("profiler", NO_PROFILER)
    if profiler == NO_PROFILER:
        return folder / SUMMARY
    return folder / profile_folder(profiler) / PROFILE  # a profiled run's, in a folder of the profiler's


def result_rows(folder: RunFolder, info: RunInfo) -> list[Row]:
    """The rows of the run's results; UsageError when its summary cannot be read."""
    path = _summary_path(folder.path, info)
    if not path.is_file():
        raise UsageError(f"{path}: missing (the run recorded no result; return code {folder.return_code})")
    summary = read_summary(path, "campaign run")
    if not summary.results:
        raise UsageError(f"{path}: no batch size finished (return code {folder.return_code})")
    header = RunHeader.read(summary.header)  # what ran: files from before workloads read as ResNet-50's
    ran = _workload_columns(header.workload, header.sample_unit)
    if path.name == PROFILE:
        return [{**ran, **profile_row(result)} for result in summary.results]
    return [{**ran, **row} for result in summary.results for row in throughput_rows(result)]


def _error_row(message: str) -> Row:
    return {"status": Status.ERROR.value, "error": message}


def folder_rows(folder: RunFolder, info: RunInfo | None, problem: str | None) -> list[Row]:
    """Every row of one run folder; one error row when it cannot be read, so that the table is built anyway."""
    shared = _run_columns(folder, info)
    if info is None:
        return [{**shared, **_error_row(problem or "unreadable")}]
    try:
        rows = result_rows(folder, info)
    except UsageError as error:
        rows = [_error_row(str(error))]
    except (OSError, ValueError, TypeError) as error:  # a summary of unexpected shape: say so, go on
        rows = [_error_row(f"{folder.path}: {type(error).__name__}: {error}")]
    # An axis named like a result field (matmul_precision, optimizer, activation_checkpointing, shard) fills the
    # field's column with what the matrix asked: one value per configuration, on its failed rows too ("adamw", not the
    # recorded "adamw (torch, fused)"; "ddp" with one process, where the run records no shard).
    asked = {name: shared[name] for name in info.values if name in shared and name in result_values()}
    return [{**shared, **row, **asked} for row in rows]


def _read_folder(folder: RunFolder) -> tuple[RunInfo | None, str | None]:
    try:
        return read_run_info(folder.path / CAMPAIGN_RUN), None
    except UsageError as error:
        return None, str(error)


# --- the table -----------------------------------------------------------------------------------------------------


def _axis_columns(infos: Iterable[RunInfo | None]) -> list[str]:
    """The union of the runs' axes: in the matrix's order, unknown names (a newer matrix) after them; workload and
    the axes named like a result field (matmul_precision, optimizer, activation_checkpointing, shard) have their
    fixed columns."""
    fixed = columns()
    names = dict.fromkeys(name for info in infos if info for name in info.values
                          if name not in ("batch_size", WORKLOAD) and name not in fixed)
    return [axis for axis in AXES if axis in names] + [name for name in names if name not in AXES]


def _columns(rows: Sequence[Row], axes: Sequence[str]) -> list[str]:
    """COLUMNS with the axis columns after ``config`` and a profiled run's extra columns at the end (in the order
    first seen)."""
    fixed = columns()
    known = {*fixed, *axes}
    extra = dict.fromkeys(name for row in rows for name in row if name not in known)
    at = fixed.index(AXES_AFTER) + 1
    return [*fixed[:at], *axes, *fixed[at:], *extra]


def _series(values: Sequence[Any]) -> pd.Series:
    """A column whose CSV reads back without cleaning: whole numbers without ".0", true/false as True/False."""
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return pd.Series(values, dtype="boolean")
    if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
        return pd.Series(values, dtype="Int64")
    if present and all(isinstance(value, int | float) and not isinstance(value, bool) for value in present):
        return pd.Series([math.nan if value is None else value for value in values], dtype="float64")
    return pd.Series(values, dtype="object")


def _frame(rows: Sequence[Row], axes: Sequence[str]) -> pd.DataFrame:
    columns = _columns(rows, axes)
    return pd.DataFrame({name: _series([row.get(name) for row in rows]) for name in columns}, columns=columns)


def _order(item: Item) -> tuple[bool, int, str]:
    """Planned-run order; unreadable folders (no run number) last, by name."""
    folder, info, _ = item
    return info is None, info.run if info else 0, folder.path.name


def _result_time(item: Item) -> tuple[int, str]:
    """When the folder's result was written (its summary, else its run file, else the folder), then its name."""
    folder, info, _ = item
    candidates = [_summary_path(folder.path, info)] if info is not None else []
    for path in [*candidates, folder.path / CAMPAIGN_RUN, folder.path]:
        try:
            return path.stat().st_mtime_ns, folder.path.name
        except OSError:
            continue
    return 0, folder.path.name


def _named(paths: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(paths[:most])
    return shown if len(paths) <= most else f"{shown} and {len(paths) - most} more"


def _one_per_run(items: Sequence[Item]) -> tuple[list[Item], list[str]]:
    """The newest finished folder of each planned run, and a line for each other one."""
    by_run: dict[str, list[Item]] = {}
    for item in items:
        by_run.setdefault(item[0].stem, []).append(item)
    kept, notes = [], []
    for same in by_run.values():
        newest = max(same, key=_result_time)
        kept.append(newest)
        notes += [f"{item[0].path.name} left out: a second finished folder of the run in {newest[0].path.name} "
                  "(the newest result counts)" for item in sorted(same, key=_result_time) if item is not newest]
    return kept, notes


def campaign_runs(campaign_dir: Path) -> CampaignRuns:
    """The finished run folders that the table counts (see the module's docstring) and what was left out."""
    matrix = read_campaign_matrix(campaign_dir)
    items: list[Item] = [(folder, *_read_folder(folder)) for folder in finished_folders(campaign_dir)]
    other = sorted(folder.path.name for folder, info, _ in items if not matrix.answers(info))
    kept, notes = _one_per_run([item for item in items if matrix.answers(item[1])])
    if other:
        notes.insert(0, f"{len(other)} run folder{'s' if len(other) > 1 else ''} of another matrix than "
                        f"{CAMPAIGN}'s left out (the folder's matrix was replaced): {_named(other)}")
    return CampaignRuns(sorted(kept, key=_order), notes)


def runs_table(runs: CampaignRuns) -> pd.DataFrame:
    rows = [row for folder, info, problem in runs.counted for row in folder_rows(folder, info, problem)]
    return _frame(rows, _axis_columns(info for _, info, _ in runs.counted))


def campaign_table(campaign_dir: Path) -> pd.DataFrame:
    """The tidy table of every finished run in ``campaign_dir`` that answers its matrix (see the module's
    docstring)."""
    return runs_table(campaign_runs(campaign_dir))


def table_text(table: pd.DataFrame) -> str:
    return neutral_frame(table).to_csv(index=False, lineterminator="\n")


def write_campaign_table(campaign_dir: Path) -> Path:
    """``results.csv`` rebuilt from the folders and replaced by rename (never half-written); its path. Concurrent
    callers are serialised by the runner's lock: this only makes each write whole."""
    path = campaign_dir / RESULTS
    write_text_atomic(path, table_text(campaign_table(campaign_dir)))
    return path


# --- the summary ---------------------------------------------------------------------------------------------------


def _kinds(group: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Which rows are ok and which invalid. An ok row of results.csv read back whose samples/s is present but no
    measurement (infinite, negative, a text: a table edited by hand) is invalid too."""
    status = group["status"].astype("object")
    raw = group["samples_per_sec"] if "samples_per_sec" in group.columns else pd.Series(math.nan, index=group.index)
    rate = pd.to_numeric(raw, errors="coerce").astype("float64")
    no_measurement = raw.notna() & ~(rate.abs().lt(math.inf) & rate.ge(0))
    ok = status.eq(Status.OK.value)
    return ok & ~no_measurement, status.eq(Status.INVALID.value) | (ok & no_measurement)


def _rates(group: pd.DataFrame, ok: pd.Series) -> pd.Series:
    return pd.to_numeric(group.loc[ok, "samples_per_sec"], errors="coerce").astype("float64").dropna()


def _statistics(rates: pd.Series) -> dict[str, float]:
    if rates.empty:
        return {name: math.nan for name in STATISTICS}
    median, low, high = float(rates.median()), float(rates.min()), float(rates.max())
    cv = cv_pct(rates.tolist())
    return {"samples_per_sec_median": median, "samples_per_sec_min": low, "samples_per_sec_max": high,
            "spread_pct": (high - low) / median * 100 if median else math.nan,
            "cv_pct": math.nan if cv is None else cv}  # None (a single repetition): the table's NaN


def _group_order(group: pd.DataFrame, batch_size: Any) -> tuple[float, float]:
    experiment = pd.to_numeric(group["experiment"], errors="coerce").min()
    return (math.inf if pd.isna(experiment) else float(experiment),
            math.inf if pd.isna(batch_size) else float(batch_size))


def campaign_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (config and batch size) over its repetitions: see the module's docstring. Works on
    campaign_table's frame and on results.csv read back."""
    # one row per run x batch size: the window rows repeat the batch size's samples_per_sec
    results = table.drop_duplicates(["run_folder", "batch_size"])
    groups = []
    others = [axis for axis in AXES if axis in results.columns and axis != "gpus"]
    for (config, batch_size), group in results.groupby(["config", "batch_size"], dropna=False, sort=False):
        ok, invalid = _kinds(group)
        row = {"config": config, "batch_size": None if pd.isna(batch_size) else int(batch_size),
               "runs": int(group["run_folder"].nunique()), "ok": int(group.loc[ok, "run_folder"].nunique()),
               "invalid": int(group.loc[invalid, "run_folder"].nunique()), **_statistics(_rates(group, ok))}
        setting = (tuple(_first(group[axis]) for axis in others), row["batch_size"])
        gpus = int(group["gpus"].iloc[0]) if "gpus" in group.columns and pd.notna(group["gpus"].iloc[0]) else None
        groups.append((_group_order(group, batch_size), row, setting, gpus))
    _scaling_efficiency(groups)
    rows = [row for _, row, _, _ in sorted(groups, key=lambda item: item[0])]
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    summary["batch_size"] = summary["batch_size"].astype("Int64")
    return summary


def _first(column: pd.Series) -> Any:
    """A configuration's value of a column: its first present one (a result field named like an axis, such as
    matmul_precision, is empty on a failed row), None when none is: NaN would never equal itself as a key."""
    present = column.dropna()
    return present.iloc[0] if not present.empty else None


def _scaling_efficiency(groups: list[tuple[Any, dict[str, Any], Any, int | None]]) -> None:
    """Each row's samples/s with N processes over N x the same setting's with 1 (None without a 1-process row)."""
    single = {setting: row["samples_per_sec_median"] for _, row, setting, gpus in groups if gpus == 1}
    for _, row, setting, gpus in groups:
        reference = single.get(setting)
        measured = row["samples_per_sec_median"]
        row["scaling_efficiency"] = (measured / (gpus * reference) if gpus is not None and reference
                                     and not pd.isna(reference) and not pd.isna(measured) else None)


def _number(value: Any, digits: int) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def _summary_cells(row: pd.Series) -> tuple[str, ...]:
    batch = "" if pd.isna(row["batch_size"]) else str(int(row["batch_size"]))
    failed = row["runs"] - row["ok"] - row["invalid"]
    return (str(row["config"]), batch, str(row["runs"]), str(row["ok"]), str(failed), str(row["invalid"]),
            _number(row["samples_per_sec_median"], 2), _number(row["samples_per_sec_min"], 2),
            _number(row["samples_per_sec_max"], 2), _number(row["spread_pct"], 1), _number(row["cv_pct"], 1),
            _number(row["scaling_efficiency"], 3))


SUMMARY_HEADER = ("config", "batch", "runs", "ok", "failed", "invalid", "median samples/s", "min", "max", "spread %",
                  "CV %", "scaling")


def invalid_errors(table: pd.DataFrame) -> list[str]:
    """Why each invalid result was left out (its error: file and field), one per run folder and batch size."""
    if table.empty:
        return []
    results = table.drop_duplicates(["run_folder", "batch_size"])
    _, invalid = _kinds(results)
    return [str(error) if isinstance(error, str) and error else f"{folder}: batch size {batch}: samples_per_sec is "
            "no measurement" for folder, batch, error in results.loc[invalid, ["run_folder", "batch_size", "error"]]
            .itertuples(index=False)]


def _closing_line(summary: pd.DataFrame, errors: Sequence[str]) -> str:
    total, ok = int(summary["runs"].sum()), int(summary["ok"].sum())
    invalid = int(summary["invalid"].sum())
    failed = total - ok - invalid
    if ok == total:
        return f"all {total} results ok"
    line = f"{failed} of {total} results failed" if failed else f"{ok} of {total} results ok"
    if invalid:
        reasons = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more (results.csv's error column)"
                                           if len(errors) > 3 else "")
        line += f"; {invalid} invalid result{'s' if invalid > 1 else ''} left out ({reasons})"
    return line


def format_summary(summary: pd.DataFrame, errors: Sequence[str] = (), left_out: Sequence[str] = ()) -> str:
    """The summary as an aligned text table, the folders left out (``campaign_runs``), and a closing line counting
    the failed results (a batch size that was not measured, an unreadable run folder) and, apart, the invalid ones
    (``errors``: ``invalid_errors``), which no statistic holds."""
    if summary.empty:
        return "\n".join([*left_out, "no finished runs"])
    lines = aligned([SUMMARY_HEADER, *(_summary_cells(row) for _, row in summary.iterrows())])
    return "\n".join([*lines, *left_out, _closing_line(summary, errors)])
