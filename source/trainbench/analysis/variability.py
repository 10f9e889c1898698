"""GPU-to-GPU variability: how the GPUs of one node differ on the same configuration (after Sinha et al., SC22,
"Not all GPUs are created equal": same-model GPUs differ by 8% on average, up to 22%).

Reads a variability folder (``trainbench.bench.variability`` writes it): ``variability.json`` (the host, the GPUs,
the repetitions, the outlier threshold) and one throughput run folder per (GPU, repetition), ``gpu<i>_rep<r>/``,
any of which may be missing or cut short by a crash: what is there is read, what is not is left out and said so
(``unmeasured``, the report's "GPU 3: no finished run"). Runs that used different settings are refused: the study
compares GPUs on one configuration. A result whose values are no measurement (``read_summary`` marks it invalid) is
shown as invalid and counted, never part of a median.

- ``load_runs``: one row per (GPU, repetition, batch size) result, failures kept with their status.
- ``unmeasured``: the plan's GPUs with no result at all, and why.
- ``per_gpu``: each GPU's medians over its ok repetitions, against the median GPU, outliers marked.
- ``across``: the spread per batch size, over the GPUs' medians and over every ok repetition.
- ``iterations``: one run's timed steps with the GPU's state (clock, power, temperature) as each ended.
- ``write_report`` / ``format_report``: the CSV files in the folder and the terminal table.

Medians, not means, summarise a GPU's repetitions: one disturbed repetition should not make a GPU an outlier.
"""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainbench.errors import UsageError
from trainbench.results import fields
from trainbench.results.csv_cells import neutral_frame
from trainbench.results.files import write_text_atomic
from trainbench.results.header import RunHeader
from trainbench.results.layout import ENV, STEPS, SUMMARY, batch_file
from trainbench.results.records import RecordError, Status, format_of
from trainbench.results.store import read_summary
from trainbench.results.variation import cv_pct
from trainbench.telemetry.schema import (
    DEFAULT_OUTLIER_THRESHOLD,
    EVENT_SAMPLE,
    EVENT_STEP_END,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    PHASE_TIMED,
    TELEMETRY_DIR,
    TELEMETRY_FIELDS,
    VARIABILITY_FILE,
    variability_run_name,
)

RUNS_FILE = "variability_runs.csv"
GPUS_FILE = "variability_gpus.csv"
ACROSS_FILE = "variability_across.csv"

# The result fields read into the runs table, looked up in the registry: a field renamed there is an import error
# here, never a column of Nones.
RUN_VALUES: tuple[str, ...] = tuple(fields.BY_NAME[name].name for name in (
    "samples_per_sec",
    "sm_clock_median_mhz",
    "mean_power_w",
    "temperature_max_c",
    "joules_per_sample",
))
RUN_COLUMNS: tuple[str, ...] = (
    "host", "gpu_index", "uuid", "name", "repetition", "batch_size", "status", *RUN_VALUES, "run", "error",
)
GPU_COLUMNS: tuple[str, ...] = (
    "batch_size", "host", "uuid", "gpu_index", "name", "repetitions", "failed", "invalid", "samples_per_sec_median",
    "sm_clock_median_mhz", "power_median_w", "temperature_median_c", "temperature_max_c",
    "joules_per_sample_median", "vs_median_pct", "outlier",
)
ACROSS_COLUMNS: tuple[str, ...] = (
    "batch_size", "scope", "n", "samples_per_sec_median", "cv_pct", "spread_pct", "slowest_over_median", "outliers",
)
SCOPE_GPUS = "gpus"  # over each GPU's median
SCOPE_RUNS = "runs"  # over every ok repetition of every GPU
# The GPU state columns of a timeline sample, as an iteration gets them.
STATE_FIELDS: tuple[str, ...] = ("sm_clock_mhz", "power_w", "temperature_c")
ITERATION_COLUMNS: tuple[str, ...] = ("window", "step", "duration_s", "end_time_s", *STATE_FIELDS)
UNMEASURED_COLUMNS: tuple[str, ...] = ("gpu_index", "uuid", "name", "reason")
_OK = "ok"  # Status.OK's value: the runs table holds statuses as text
_INVALID = Status.INVALID.value


def _not_a_folder(path: Path, problem: str) -> UsageError:
    return UsageError(f"{path}: not a variability folder's plan: {problem}")


def read_plan(folder: Path) -> dict[str, Any]:
    """``variability.json`` checked: a UsageError naming the file and what is wrong, before any run is read (a
    wrong folder should say so, not report zero GPUs)."""
    path = folder / VARIABILITY_FILE
    if not path.is_file():
        raise UsageError(f"{path}: not found, so {folder} is not a variability folder")
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _not_a_folder(path, f"{type(error).__name__}: {error}") from None
    if not isinstance(plan, dict):
        raise _not_a_folder(path, "not a JSON object")
    try:
        format_of(plan)
    except RecordError as error:
        raise _not_a_folder(path, str(error)) from None
    gpus = plan.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise _not_a_folder(path, f"gpus is {gpus!r}, not a list of GPUs")
    for i, gpu in enumerate(gpus):
        index = gpu.get("index") if isinstance(gpu, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise _not_a_folder(path, f"gpus[{i}] has no whole-number index")
        for key in ("uuid", "name"):
            if gpu.get(key) is not None and not isinstance(gpu[key], str):
                raise _not_a_folder(path, f"gpus[{i}].{key} is {gpu[key]!r}, not a text")
    repetitions = plan.get("repetitions")
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
        raise _not_a_folder(path, f"repetitions is {repetitions!r}, not a positive whole number")
    threshold = plan.get("outlier_threshold", DEFAULT_OUTLIER_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold < 1:
        raise _not_a_folder(path, f"outlier_threshold is {threshold!r}, not a fraction between 0 and 1")
    host = plan.get("host")
    if host is not None and not isinstance(host, str):
        raise _not_a_folder(path, f"host is {host!r}, not a text")
    return plan


def load_runs(folder: Path) -> pd.DataFrame:
    """One row per (GPU, repetition, batch size) result found in ``folder`` (``RUN_COLUMNS``): a failed result
    keeps its status and error with no values; a missing run folder or summary gives no rows."""
    plan = read_plan(folder)
    rows = []
    settings = _SameSettings(folder)
    for gpu in plan["gpus"]:
        for repetition in range(plan["repetitions"]):
            run_dir = folder / variability_run_name(gpu["index"], repetition)
            if not (run_dir / SUMMARY).is_file():
                continue  # not run yet, or killed before its summary: nothing measured
            summary = read_summary(run_dir / SUMMARY, "throughput run")
            settings.check(run_dir.name, summary.header)
            host = plan.get("host") or _env_hostname(run_dir)
            for result in summary.results:
                rows.append({
                    "host": host, "gpu_index": gpu["index"], "uuid": gpu.get("uuid"), "name": gpu.get("name"),
                    "repetition": repetition, "batch_size": result.batch_size, "status": result.status.value,
                    **{name: result.values.get(name) for name in RUN_VALUES},
                    "run": run_dir.name, "error": result.error,
                })
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    for name in RUN_VALUES:  # None, or a value of the wrong type in a hand-edited file: NaN
        runs[name] = pd.to_numeric(runs[name], errors="coerce").astype("float64")
    for name in ("gpu_index", "repetition", "batch_size"):
        runs[name] = runs[name].astype("int64")
    return runs.sort_values(["gpu_index", "repetition", "batch_size"], kind="stable", ignore_index=True)


def _flat(header: dict[str, Any]) -> dict[str, Any]:
    """A summary's settings with nested ones (model, launch) as ``model.precision``: each compared on its own."""
    flat: dict[str, Any] = {}
    for key, value in header.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": item for inner, item in value.items()})
        else:
            flat[key] = value
    return flat


class _SameSettings:
    """The settings of the first run read; every later run must have the same (a copied or edited run folder
    would otherwise put two configurations into one GPU comparison)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.first: tuple[str, dict[str, Any]] | None = None

    def check(self, run: str, header: dict[str, Any]) -> None:
        settings = _flat(header)
        if self.first is None:
            self.first = (run, settings)
            return
        first_run, first = self.first
        for key in sorted(set(first) | set(settings)):
            if first.get(key) != settings.get(key):
                raise UsageError(
                    f"{self.folder}: its runs used different settings: {key} is {first.get(key)!r} in {first_run} "
                    f"but {settings.get(key)!r} in {run}; a variability study compares GPUs on one configuration "
                    "(report the runs of each setting in a folder of their own)")


def unmeasured(folder: Path, runs: pd.DataFrame) -> pd.DataFrame:
    """The plan's GPUs without any result in ``runs`` (``UNMEASURED_COLUMNS``), each with why: no run folder yet, or
    folders without a summary.json (killed, or still running)."""
    plan = read_plan(folder)
    measured = set(runs["gpu_index"].tolist())
    rows = []
    for gpu in plan["gpus"]:
        if gpu["index"] in measured:
            continue
        names = [variability_run_name(gpu["index"], r) for r in range(plan["repetitions"])]
        present = [name for name in names if (folder / name).is_dir()]
        reason = (f"{len(present)} of its {len(names)} run folders exist, none with a {SUMMARY}" if present
                  else f"none of its {len(names)} run folders exists")
        rows.append({"gpu_index": gpu["index"], "uuid": gpu.get("uuid"), "name": gpu.get("name"), "reason": reason})
    return pd.DataFrame(rows, columns=list(UNMEASURED_COLUMNS)).astype({"gpu_index": "int64"})


def _env_hostname(run_dir: Path) -> str | None:
    """The host a run's env.json names (only when the plan has none); None when it cannot be read."""
    try:
        env = json.loads((run_dir / ENV).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    host = env.get("hostname") if isinstance(env, dict) else None
    return host if isinstance(host, str) else None


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    """The repetitions that measured something: status ok with an images/s."""
    return runs[(runs["status"] == _OK) & runs["samples_per_sec"].notna()]


def per_gpu(runs: pd.DataFrame, threshold: float = DEFAULT_OUTLIER_THRESHOLD) -> pd.DataFrame:
    """Per (batch size, host, GPU): medians over its ok repetitions, ``vs_median_pct`` against the median of the
    GPUs' medians at that batch size, ``outlier`` when slower than that median by more than ``threshold`` (a
    fraction). A GPU with no ok repetition keeps a row (repetitions 0, no values, not an outlier: unmeasured).
    ``failed``: results that did not finish (oom, error, ...); ``invalid``: ok results whose values are no
    measurement, left out like the failed ones."""
    keys = ["batch_size", "host", "uuid", "gpu_index", "name"]
    rows = []
    for key, group in runs.groupby(keys, dropna=False, sort=True):
        ok = _ok(group)
        rows.append({
            **dict(zip(keys, key, strict=True)),
            "repetitions": len(ok),
            "failed": int((~group["status"].isin([_OK, _INVALID])).sum()),
            "invalid": int((group["status"] == _INVALID).sum()),
            "samples_per_sec_median": ok["samples_per_sec"].median(),
            "sm_clock_median_mhz": ok["sm_clock_median_mhz"].median(),
            "power_median_w": ok["mean_power_w"].median(),
            "temperature_median_c": ok["temperature_max_c"].median(),
            "temperature_max_c": ok["temperature_max_c"].max(),
            "joules_per_sample_median": ok["joules_per_sample"].median(),
        })
    gpus = pd.DataFrame(rows, columns=[c for c in GPU_COLUMNS if c not in ("vs_median_pct", "outlier")])
    gpus = gpus.astype({"repetitions": "int64", "failed": "int64", "invalid": "int64"})
    middle = gpus.groupby("batch_size")["samples_per_sec_median"].transform("median")
    ratio = gpus["samples_per_sec_median"] / middle - 1
    gpus["vs_median_pct"] = (ratio * 100).astype("float64")
    gpus["outlier"] = (ratio < -threshold).astype(bool)  # NaN (unmeasured) compares False
    gpus["batch_size"] = gpus["batch_size"].astype("int64")
    gpus["gpu_index"] = gpus["gpu_index"].astype("int64")
    for name in ("uuid", "name", "host"):  # groupby's NaN for a missing text back to None
        gpus[name] = gpus[name].astype(object).where(gpus[name].notna(), None)
    return gpus.sort_values(["batch_size", "gpu_index"], kind="stable", ignore_index=True)


def spread(values: pd.Series) -> dict[str, float]:
    """n, median, cv_pct (sample std / mean x 100, NaN below 2 values), spread_pct ((max - min) / median x 100),
    slowest_over_median (min / median): the numbers the study compares GPUs by."""
    values = values.dropna().astype("float64")
    n = len(values)
    if n == 0:
        nan = float("nan")
        return {"n": 0, "samples_per_sec_median": nan, "cv_pct": nan, "spread_pct": nan, "slowest_over_median": nan}
    median = float(values.median())
    return {
        "n": n,
        "samples_per_sec_median": median,
        "cv_pct": float("nan") if (cv := cv_pct(values.tolist())) is None else cv,
        "spread_pct": float((values.max() - values.min()) / median * 100),
        "slowest_over_median": float(values.min() / median),
    }


def across(runs: pd.DataFrame, per_gpu_frame: pd.DataFrame) -> pd.DataFrame:
    """Per batch size, the spread over the GPUs' medians (scope ``gpus``, with the outliers' indices) and over
    every ok repetition of every GPU (scope ``runs``: repetition noise included, so it is the wider one)."""
    ok = _ok(runs)
    batch_sizes = sorted(set(per_gpu_frame["batch_size"]) | set(ok["batch_size"]))
    rows = []
    for batch in batch_sizes:
        gpus = per_gpu_frame[per_gpu_frame["batch_size"] == batch]
        outliers = gpus.loc[gpus["outlier"].astype(bool), "gpu_index"]
        rows.append({"batch_size": batch, "scope": SCOPE_GPUS, **spread(gpus["samples_per_sec_median"]),
                     "outliers": ",".join(str(int(i)) for i in sorted(outliers))})
        rows.append({"batch_size": batch, "scope": SCOPE_RUNS,
                     **spread(ok.loc[ok["batch_size"] == batch, "samples_per_sec"]), "outliers": None})
    return pd.DataFrame(rows, columns=list(ACROSS_COLUMNS)).astype({"batch_size": "int64", "n": "int64"})


def _read_csv(path: Path) -> pd.DataFrame | None:
    """A CSV a killed process may have left: a last line without its line end (a row cut short, whose last number
    may be a prefix of the real one) is dropped; None when absent or unreadable. Every column as text."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    text = text[: text.rfind("\n") + 1]
    if not text.strip():
        return None
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, on_bad_lines="skip")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError):
        return None


def _numbers(frame: pd.DataFrame, name: str) -> pd.Series:
    column = frame[name] if name in frame.columns else pd.Series("", index=frame.index)
    return pd.to_numeric(column, errors="coerce").astype("float64")


def iterations(run_dir: Path, batch_size: int, gpu: int | None = None) -> pd.DataFrame:
    """Every timed step of one batch size (``ITERATION_COLUMNS``): its duration (from the previous step's end, the
    first of a window from the window's start) and the GPU's state as it ended, from the latest ``sample`` at or
    before that moment (NaN before the first sample). ``gpu``: whose samples (NVML index) when the timeline has
    several; the lowest index otherwise. Without a timeline (or a timed step in it), the step times of steps.csv
    with no GPU state."""
    timeline = _read_csv(batch_file(run_dir / TELEMETRY_DIR, batch_size, ".csv"))
    if timeline is None or "time_s" not in timeline.columns or "event" not in timeline.columns:
        return _steps_only(run_dir, batch_size)
    frame = pd.DataFrame({"event": timeline["event"], "phase": timeline.get("phase", "")})
    for name in TELEMETRY_FIELDS:
        if name not in ("event", "phase"):
            frame[name] = _numbers(timeline, name)
    frame = frame[frame["time_s"].notna()].sort_values("time_s", kind="stable")
    steps = frame[(frame["event"] == EVENT_STEP_END) & (frame["phase"] == PHASE_TIMED) & frame["window"].notna()]
    if steps.empty:  # killed before its first timed step's row was flushed: steps.csv may still have the steps
        return _steps_only(run_dir, batch_size)
    starts = frame[frame["event"] == EVENT_WINDOW_START].groupby("window")["time_s"].min()
    ends = frame[frame["event"] == EVENT_WINDOW_END].groupby("window")["time_s"].max()
    steps = steps[["window", "step", "time_s"]].rename(columns={"time_s": "end_time_s"})
    # A window's last step ends at the window's synchronised end (its step_end came before the final sync), so the
    # durations add up to the window, as steps.csv's do.
    last = ~steps["window"].duplicated(keep="last")
    steps.loc[last, "end_time_s"] = steps.loc[last, "window"].map(ends).fillna(steps.loc[last, "end_time_s"])
    previous = steps.groupby("window")["end_time_s"].shift(1)
    previous = previous.fillna(steps["window"].map(starts))  # a window's first step: from its start
    steps = steps.assign(duration_s=steps["end_time_s"] - previous)
    samples = frame[(frame["event"] == EVENT_SAMPLE) & frame["gpu"].notna()]
    if gpu is None and not samples.empty:
        gpu = int(samples["gpu"].min())
    samples = samples[samples["gpu"] == gpu][["time_s", *STATE_FIELDS]]
    merged = pd.merge_asof(steps.reset_index(drop=True), samples, left_on="end_time_s", right_on="time_s",
                           direction="backward")
    return _iteration_frame(merged)


def _steps_only(run_dir: Path, batch_size: int) -> pd.DataFrame:
    """The timed steps steps.csv recorded (a run without a timeline: CPU, no NVML, telemetry off): durations
    only; ``window`` from the summary's timed_steps when it says, ``step`` as steps.csv numbers them."""
    table = _read_csv(run_dir / STEPS)
    if table is None or not {"batch_size", "phase", "step", "seconds"} <= set(table.columns):
        return _iteration_frame(pd.DataFrame())
    mine = table[(_numbers(table, "batch_size") == batch_size) & (table["phase"] == PHASE_TIMED)]
    step = _numbers(mine, "step")
    per_window = _timed_steps(run_dir)
    window = (step // per_window) if per_window else pd.Series(np.nan, index=mine.index)
    return _iteration_frame(pd.DataFrame({"window": window, "step": step, "duration_s": _numbers(mine, "seconds")}))


def _timed_steps(run_dir: Path) -> int | None:
    try:
        timing = RunHeader.read(read_summary(run_dir / SUMMARY).header).timing
    except UsageError:
        return None
    value = timing.timed_steps if timing else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _iteration_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``ITERATION_COLUMNS`` in order and typed (window and step whole numbers that may be missing)."""
    out = frame.reindex(columns=list(ITERATION_COLUMNS)).reset_index(drop=True)
    out = out.astype({name: "float64" for name in ITERATION_COLUMNS})
    return out.astype({"window": "Int64", "step": "Int64"})


def write_report(folder: Path, threshold: float | None = None) -> dict[str, pd.DataFrame]:
    """The folder's report: variability_runs.csv, variability_gpus.csv, variability_across.csv and per GPU
    gpu<index>_iterations.csv (every repetition and batch size), each replaced atomically. ``threshold`` None:
    the one the run was made with. Returns the frames, keyed ``runs``, ``gpus``, ``across``, ``unmeasured`` (not
    written: the terminal report names those GPUs) and ``gpu<index>_iterations``."""
    plan = read_plan(folder)
    if threshold is None:
        threshold = float(plan.get("outlier_threshold", DEFAULT_OUTLIER_THRESHOLD))
    runs = load_runs(folder)
    gpus = per_gpu(runs, threshold)
    frames = {"runs": runs, "gpus": gpus, "across": across(runs, gpus), "unmeasured": unmeasured(folder, runs)}
    for gpu in plan["gpus"]:
        index = gpu["index"]
        parts = []
        done = runs.loc[runs["gpu_index"] == index, ["repetition", "batch_size", "run"]].drop_duplicates()
        for repetition, batch, run in done.itertuples(index=False):
            steps = iterations(folder / run, int(batch), index)
            parts.append(steps.assign(repetition=int(repetition), batch_size=int(batch)))
        columns = ["repetition", "batch_size", *ITERATION_COLUMNS]
        table = pd.concat(parts, ignore_index=True)[columns] if parts else _iteration_frame(pd.DataFrame()).assign(
            repetition=pd.Series(dtype="int64"), batch_size=pd.Series(dtype="int64"))[columns]
        frames[f"gpu{index}_iterations"] = table
    for name, frame in frames.items():
        if name == "unmeasured":
            continue
        file = {"runs": RUNS_FILE, "gpus": GPUS_FILE, "across": ACROSS_FILE}.get(name, f"{name}.csv")
        write_text_atomic(folder / file, neutral_frame(frame).to_csv(index=False))
    return frames


def _text(value: Any, form: str, suffix: str = "") -> str:
    """A number for the table, ``-`` when unmeasured."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, form) + suffix


_SAFE = re.compile(r"[^\x20-\x7e]")


def _gpu_line(row: Any) -> str:
    name = _SAFE.sub("?", str(row.name or "-"))[:24]
    notes = "".join(f" ({count} {what})" for count, what in ((row.failed, "failed"), (row.invalid, "invalid"))
                    if count)
    return (f"{row.gpu_index:>4}  {name:<24} {row.repetitions:>4} {_text(row.samples_per_sec_median, '.1f'):>10} "
            f"{_text(row.vs_median_pct, '+.1f', '%'):>9} {_text(row.sm_clock_median_mhz, '.0f'):>7} "
            f"{_text(row.power_median_w, '.1f'):>8} {_text(row.joules_per_sample_median, '.4f'):>8}"
            f"{'  OUTLIER' if row.outlier else ''}{notes}")


def _spread_line(row: Any) -> str:
    what = "GPUs' medians" if row.scope == SCOPE_GPUS else "all runs"
    outliers = f", outliers: GPU {row.outliers}" if row.scope == SCOPE_GPUS and row.outliers else ""
    return (f"  across {what} (n={row.n}): median {_text(row.samples_per_sec_median, '.1f')} images/s, "
            f"cv {_text(row.cv_pct, '.2f')}%, spread {_text(row.spread_pct, '.1f')}%, "
            f"slowest {_text(row.slowest_over_median, '.3f')} x median{outliers}")


def _unmeasured_lines(frames: dict[str, pd.DataFrame]) -> list[str]:
    table = frames.get("unmeasured", pd.DataFrame(columns=list(UNMEASURED_COLUMNS)))
    return [f"GPU {row.gpu_index} ({_SAFE.sub('?', str(row.name or '-'))}): no finished run ({row.reason}); left "
            "out of every figure" for row in table.itertuples(index=False)]


def _invalid_lines(runs: pd.DataFrame) -> list[str]:
    bad = runs[runs["status"] == _INVALID]
    if bad.empty:
        return []
    plural = "s" if len(bad) > 1 else ""
    lines = [f"{len(bad)} invalid result{plural} left out of every median and spread:"]
    return lines + [f"  {_SAFE.sub('?', str(error))}" for error in bad["error"]]


def format_report(frames: dict[str, pd.DataFrame]) -> str:
    """The terminal table: per batch size, a line per GPU (images/s, against the median GPU, SM clock, power,
    J/image, OUTLIER, failed and invalid counts), the GPUs with a result at other batch sizes but none at this
    one, then the spread over the GPUs and over every run; after the tables, the GPUs with no finished run and the
    invalid results left out."""
    gpus, spreads = frames["gpus"], frames["across"]
    lines = []
    header = (f"{'GPU':>4}  {'name':<24} {'runs':>4} {'images/s':>10} {'vs median':>9} {'SM MHz':>7} "
              f"{'power W':>8} {'J/image':>8}")
    every_gpu = sorted(set(gpus["gpu_index"]))
    for batch in sorted(set(gpus["batch_size"]) | set(spreads["batch_size"])):
        lines.append(f"batch {batch}")
        lines.append(header)
        here = gpus[gpus["batch_size"] == batch]
        lines += [_gpu_line(row) for row in here.itertuples(index=False)]
        lines += [f"{index:>4}  no result at batch {batch} (left out of its figures)"
                  for index in every_gpu if index not in set(here["gpu_index"])]
        lines += [_spread_line(row) for row in spreads[spreads["batch_size"] == batch].itertuples(index=False)]
    notes = _unmeasured_lines(frames) + _invalid_lines(frames["runs"])
    return "\n".join((lines or ["no result in this variability folder"]) + notes)
