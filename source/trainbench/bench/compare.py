"""Compare two throughput runs batch size by batch size, with a significance test on their step times.

A difference is called significant only when the two samples are unlikely to come from one distribution: a
two-sided Mann-Whitney U test, which assumes no normality (pyperf's ``compare_to`` asks the same question with a
t-test). The samples are the windows' own images/s when both runs timed at least MIN_WINDOWS windows per batch
size (``--windows``), else the per-step intervals of each run's ``steps.csv`` (which are correlated in time, so
their test is the weaker one). Throughput is each run's
images / timed wall time. A comparison also says which settings of the two runs differ (model, data, GPU, ...),
since a change measured across different settings is not a change of the code or the machine alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu

from trainbench.config import float_problem
from trainbench.errors import UsageError
from trainbench.results import fields
from trainbench.results.layout import ENV, STEPS, SUMMARY
from trainbench.results.records import BatchResult
from trainbench.results.store import read_summary

RATE = fields.SAMPLES_PER_SEC  # what is compared; each window's own in WINDOWS
WINDOWS = fields.WINDOW_SAMPLES_PER_SEC
COLUMNS = ["batch_size", f"{RATE}_a", f"{RATE}_b", "change_pct", "p_value", "significant", "sample",
           f"{fields.TOKENS_PER_SEC}_a", f"{fields.TOKENS_PER_SEC}_b", f"{fields.MFU}_a", f"{fields.MFU}_b"]
MIN_WINDOWS = 3  # with fewer, Mann-Whitney cannot reach p < 0.1 on windows alone
# summary.json's header fields that change what is measured; "model" is compared field by field.
SETTINGS = ("workload", "framework", "precision", "image_size", "device", "data", "warmup_steps", "timed_steps",
            "sync_every_step")


@dataclass(frozen=True)
class ComparedRun:
    """A throughput run folder as compare reads it."""

    path: Path
    header: dict[str, Any]  # summary.json's settings (without its results and format version)
    results: dict[int, BatchResult]  # by batch size
    steps: pd.DataFrame  # the timed steps (batch_size, seconds); empty when no batch size succeeded
    env: dict[str, Any]  # env.json, {} when absent


def _bad(path: Path, problem: str) -> UsageError:
    return UsageError(f"{path}: {problem}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _bad(path, f"not a throughput run's file ({type(error).__name__}: {error})") from None


def _number(path: Path, where: str, value: Any, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or \
            (positive and value <= 0):
        raise _bad(path, f"{where} is {value!r}, not a {'positive ' if positive else ''}number")
    return float(value)


def _check_measured(path: Path, position: int, result: BatchResult) -> BatchResult:
    """An ok result's images/s and windows' images/s, which compare divides and tests, are positive numbers."""
    where = f"results[{position}]"
    if result.ok:
        _number(path, f"{where}.{RATE}", result.values.get(RATE))
        windows = result.values.get(WINDOWS) or []
        if not isinstance(windows, list):
            raise _bad(path, f"{where}.{WINDOWS} is not a list")
        for index, rate in enumerate(windows):
            _number(path, f"{where}.{WINDOWS}[{index}]", rate)
    return result


def _read_steps(run_dir: Path, needed: bool) -> pd.DataFrame:
    path = run_dir / STEPS
    if not needed and not path.exists():
        return pd.DataFrame({"batch_size": [], "seconds": []})
    try:
        steps = pd.read_csv(path)
        timed = steps.loc[steps["phase"] == "timed", ["batch_size", "seconds"]]
        timed = timed.astype({"batch_size": "int64", "seconds": "float64"})
    except (OSError, ValueError, KeyError, pd.errors.ParserError) as error:
        raise _bad(path, f"not a throughput run's steps.csv ({type(error).__name__}: {error})") from None
    if not timed["seconds"].map(math.isfinite).all() or (timed["seconds"] < 0).any():
        raise _bad(path, "a timed step's seconds is negative or not finite")
    return timed


def load_run(run_dir: Path) -> ComparedRun:
    """A run folder checked for the shape compare relies on; a one-line UsageError naming the file otherwise."""
    if not run_dir.is_dir():
        raise _bad(run_dir, "not a throughput run folder (no such folder)")
    summary_path = run_dir / SUMMARY
    if not summary_path.exists():
        raise _bad(run_dir, "not a throughput run folder (no summary.json)")
    summary = read_summary(summary_path, "throughput run")
    if invalid := summary.invalid_results():  # a test of no measurement would be no verdict: refuse, as for a bad file
        raise UsageError(str(invalid[0].error))
    results = [_check_measured(summary_path, i, r) for i, r in enumerate(summary.results)]
    env_path = run_dir / ENV
    env = _read_json(env_path) if env_path.exists() else {}
    by_batch = {r.batch_size: r for r in results}
    steps = _read_steps(run_dir, needed=bool(summary.ok_results()))
    return ComparedRun(run_dir, summary.header, by_batch, steps, env if isinstance(env, dict) else {})


def _flat_settings(run: ComparedRun) -> dict[str, Any]:
    settings = {key: run.header.get(key) for key in SETTINGS if key in run.header}
    model = run.header.get("model")
    if isinstance(model, dict):
        settings.update({f"model.{key}": value for key, value in model.items() if key not in SETTINGS})
    gpu = found if isinstance(found := run.env.get("gpu"), dict) else {}
    gpus = [g.get("name") for g in gpu.get("gpus", []) if isinstance(g, dict)]
    settings["gpus"] = ", ".join(str(name) for name in gpus) or "none"
    for key in ("driver",):
        if gpu.get(key) is not None:
            settings[f"gpu {key}"] = gpu[key]
    for key in ("cpu_model", "trainbench_version", "python"):
        if run.env.get(key) is not None:
            settings[key] = run.env[key]
    framework = run.env.get("framework")
    if isinstance(framework, dict):
        settings.update({f"version of {name}": version for name, version in framework.items()})
    return settings


def setting_differences(run_a: ComparedRun, run_b: ComparedRun) -> list[tuple[str, Any, Any]]:
    """(setting, A's value, B's value) for each setting recorded in both runs that differs."""
    a, b = _flat_settings(run_a), _flat_settings(run_b)
    return [(key, a[key], b[key]) for key in a if key in b and a[key] != b[key]]


def _p_value(a: BatchResult, b: BatchResult, steps_a: pd.Series, steps_b: pd.Series) -> tuple[float, str]:
    windows_a, windows_b = a.get(WINDOWS) or [], b.get(WINDOWS) or []
    if min(len(windows_a), len(windows_b)) >= MIN_WINDOWS:
        return float(mannwhitneyu(windows_a, windows_b, alternative="two-sided").pvalue), "windows"
    if steps_a.empty or steps_b.empty:
        return math.nan, "steps"  # steps.csv lost rows: no test, never a made-up verdict
    return float(mannwhitneyu(steps_a, steps_b, alternative="two-sided").pvalue), "steps"


def workload_of(run: ComparedRun) -> str:
    """The run's workload (files from before it was recorded: resnet50)."""
    return str(run.header.get("workload") or "resnet50")


def refuse_unlike(run_a: ComparedRun, run_b: ComparedRun) -> None:
    """Samples of two workloads are different things: their rates are not compared."""
    a, b = workload_of(run_a), workload_of(run_b)
    if a != b:
        raise UsageError(f"compare: run A is {a}, run B is {b}: samples/s of different workloads are not "
                         "comparable; compare runs of one workload")


def compare_loaded(run_a: ComparedRun, run_b: ComparedRun, alpha: float = 0.05) -> pd.DataFrame:
    """One row per batch size measured successfully in both runs; change_pct is B's samples/s over A's; tokens/s
    and MFU of each where recorded (None otherwise). Runs of different workloads are refused."""
    problem = float_problem(alpha, 0.0, 1.0, above=True, below=True)
    if problem is not None:
        raise UsageError(f"--alpha {problem}")
    refuse_unlike(run_a, run_b)
    rows = []
    for batch in sorted(set(run_a.results) & set(run_b.results)):
        a, b = run_a.results[batch], run_b.results[batch]
        if not (a.ok and b.ok):
            continue
        p_value, sample = _p_value(a, b, run_a.steps.loc[run_a.steps["batch_size"] == batch, "seconds"],
                                   run_b.steps.loc[run_b.steps["batch_size"] == batch, "seconds"])
        rate_a, rate_b = a.values[RATE], b.values[RATE]
        rows.append({
            "batch_size": batch,
            f"{RATE}_a": rate_a,
            f"{RATE}_b": rate_b,
            "change_pct": 100.0 * (rate_b / rate_a - 1.0),
            "p_value": p_value,
            "significant": bool(p_value < alpha),
            "sample": sample,
            **{f"{name}_{side}": result.values.get(name) for name in (fields.TOKENS_PER_SEC, fields.MFU)
               for side, result in (("a", a), ("b", b))},
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def compare_runs(run_a: Path, run_b: Path, alpha: float = 0.05) -> pd.DataFrame:
    return compare_loaded(load_run(run_a), load_run(run_b), alpha)


def statuses(run: ComparedRun) -> str:
    """'8 ok, 16 oom, ...': what each batch size of a run ended with."""
    return ", ".join(f"{batch} {result.status}" for batch, result in sorted(run.results.items())) or "none"
