"""Compare two throughput runs batch size by batch size, with a significance test on their windows.

The verdict is ``results.significance.compare_results``, the one the report gives too: Welch's t-test on the windows'
own samples/s (``--windows``), the change of overall samples/s (all samples / all timed wall time) with its 95 %
interval, and a sentence. With one window a side there is no test, and the sentence says how many windows are
needed: per-step times are correlated in time, so they are no sample for an honest test, and steps.csv is not read.

A comparison also says which settings of the two runs differ (``settings_sentence``): a change measured across two
or more settings is the effect of none of them alone. Settings are what is measured (``SETTINGS``, how the step ran:
``STEP``, the model's options, the GPUs); versions, driver, CPU and Python are the environment, listed apart
(``environment_sentence``). Versions are equal in any notation (cuDNN 90100 is "9"): ``results.run_settings``.

The step's settings (``STEP``: the fp32 products' ``matmul_precision`` and the ``optimizer``'s name, format 5;
``activation_checkpointing`` and ``shard``, format 6) are shown for both runs (``step_line``) and differ like any
other setting. A file from before format 5 records neither of format 5's: they read unknown there, never "highest" or
the reference optimizer (those runs took their framework's default: TF32 in TensorFlow), so they are not counted as a
difference, and the step line says which run does not record them. Format 6's are known in every file (a run from
before could neither recompute nor shard: "none" and "ddp", ``results.header.BEFORE_FORMAT_6``): a difference there
is a difference, and the step line names them where either run is not at those defaults.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench import workloads
from trainbench.config import float_problem
from trainbench.errors import UsageError
from trainbench.results import fields
from trainbench.results.header import BEFORE_FORMAT_6
from trainbench.results.layout import ENV, SUMMARY
from trainbench.results.records import BatchResult
from trainbench.results.run_settings import STEP, STEP_SINCE_5, STEP_SINCE_6, differing, step_as_run
from trainbench.results.significance import compare_results
from trainbench.results.store import read_summary
from trainbench.workloads import settings as shape_settings

RATE = fields.SAMPLES_PER_SEC  # what is compared; each window's own in WINDOWS
WINDOWS = fields.WINDOW_SAMPLES_PER_SEC
COLUMNS = ["batch_size", f"{RATE}_a", f"{RATE}_b", "change_pct", "change_low_pct", "change_high_pct", "p_value",
           "significant", "windows_a", "windows_b", "verdict",
           f"{fields.TOKENS_PER_SEC}_a", f"{fields.TOKENS_PER_SEC}_b", f"{fields.MFU}_a", f"{fields.MFU}_b"]
# summary.json's header fields that change what is measured (with the shape settings the header repeats at its top
# level: workloads.settings); "model" is compared field by field.
SETTINGS = ("workload", "framework", "precision",
            *(setting.name for setting in shape_settings.SETTINGS if setting.in_header), "device", "data",
            "warmup_steps", "timed_steps", "sync_every_step")
NOT_RECORDED = "not recorded"
Difference = tuple[str, Any, Any]  # (setting, A's value, B's value)


@dataclass(frozen=True)
class ComparedRun:
    """A throughput run folder as compare reads it."""

    path: Path
    header: dict[str, Any]  # summary.json's settings (without its results and format version)
    results: dict[int, BatchResult]  # by batch size
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
    return ComparedRun(run_dir, summary.header, by_batch, env if isinstance(env, dict) else {})


# --- settings and environment -----------------------------------------------------------------------------------


def measured_settings(run: ComparedRun) -> dict[str, Any]:
    """What decides the number measured: the header's ``SETTINGS``, the step's (``STEP``, where recorded), the
    model's options and the GPUs (the GPUs only where env.json reports on them: an absent file is no "none")."""
    settings = {key: run.header.get(key) for key in SETTINGS if key in run.header}
    settings.update({key: value for key, value in step_as_run(run.header).items() if value is not None})
    model = run.header.get("model")
    if isinstance(model, dict):
        # The model's options as asked (None: the workload's default), with the shape settings as run from the
        # header's "params" (defaults resolved): a default and the same value given are one setting, not a change.
        params = run.header.get("params")
        effective = {**model, **(params if isinstance(params, dict) else {})}
        settings.update({f"model.{key}": value for key, value in effective.items()
                         if key not in SETTINGS and key not in STEP})
    if "gpu" in run.env:
        gpu = found if isinstance(found := run.env.get("gpu"), dict) else {}
        gpus = [g.get("name") for g in gpu.get("gpus", []) if isinstance(g, dict)]
        settings["gpus"] = ", ".join(str(name) for name in gpus) or "none"
    return settings


def environment(run: ComparedRun) -> dict[str, Any]:
    """What the run happened to run on, not what was asked for: driver, CPU, Python, trainbench and library
    versions (env.json's; host and time are left out: they differ between any two runs)."""
    found: dict[str, Any] = {}
    gpu = run.env.get("gpu")
    if isinstance(gpu, dict) and gpu.get("driver") is not None:
        found["gpu driver"] = gpu["driver"]
    for key in ("cpu_model", "cpu_class", "trainbench_version", "python"):
        if run.env.get(key) is not None:
            found[key] = run.env[key]
    framework = run.env.get("framework")
    if isinstance(framework, dict):  # its "framework" name is a setting, its "devices" no version
        found.update({f"version of {name}": version for name, version in framework.items()
                      if name != "framework" and isinstance(version, str | int) and not isinstance(version, bool)})
    return found


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """The settings recorded in both that differ (versions equal in any notation): a setting one run's files
    predate is not known to differ."""
    common = [key for key in a if key in b]
    return [(key, a[key], b[key]) for key in differing({k: a[k] for k in common}, {k: b[k] for k in common})]


def split_differences(run_a: ComparedRun, run_b: ComparedRun) -> tuple[list[Difference], list[Difference]]:
    """(measured settings that differ, environment that differs)."""
    return (_differences(measured_settings(run_a), measured_settings(run_b)),
            _differences(environment(run_a), environment(run_b)))


def setting_differences(run_a: ComparedRun, run_b: ComparedRun) -> list[Difference]:
    """(setting, A's value, B's value) for each setting or environment entry recorded in both runs that differs:
    the measured settings first."""
    measured, env = split_differences(run_a, run_b)
    return measured + env


def _values(differences: list[Difference]) -> str:
    return "; ".join(f"{name} (A {a}, B {b})" for name, a, b in differences)


def unrecorded(run_a: ComparedRun, run_b: ComparedRun) -> dict[str, list[str]]:
    """The step settings of format 5 (``STEP_SINCE_5``) one run records and the other does not (a file from before
    format 5), by the run that does not ("A", "B"): unknown there, so they may differ. Format 6's are known in every
    file: never listed here."""
    a, b = step_as_run(run_a.header), step_as_run(run_b.header)
    found: dict[str, list[str]] = {}
    for side, mine, theirs in (("A", a, b), ("B", b, a)):
        names = [name for name in STEP_SINCE_5 if mine[name] is None and theirs[name] is not None]
        if names:
            found[side] = names
    return found


def settings_sentence(run_a: ComparedRun, run_b: ComparedRun) -> str:
    """Whether a change between the runs can be one setting's effect, in one sentence; a step setting that one run
    does not record may differ too, and the sentence says so rather than counting it equal or different."""
    measured, _ = split_differences(run_a, run_b)
    unknown = "; ".join(f"{side} does not record {' or '.join(names)} (a file from before format 5)"
                        for side, names in unrecorded(run_a, run_b).items())
    if not measured:
        if unknown:
            return (f"The runs differ in no recorded setting, but {unknown}: the change may be the step's, the "
                    "machine's or the code's.")
        return "The runs differ in no setting: the change is the machine's or the code's."
    more = f"; {unknown}, which may differ too" if unknown else ""
    if len(measured) == 1:
        return f"The runs differ in one setting: {_values(measured)}{more}."
    names = ", ".join(name for name, _, _ in measured)
    return (f"These runs differ in {len(measured)} settings ({names}){more}: a change below is not the effect of "
            "any one of them.")


def _step_shown(run: ComparedRun, name: str, value: str | None) -> str:
    """A step setting as shown: the optimizer as its ok results recorded it where they agree and name it
    ("adamw (torch, fused)": its implementation too), else the header's value; "not recorded"."""
    if value is None:
        return NOT_RECORDED
    if name == "optimizer":
        recorded = {str(r.values[name]) for r in run.results.values() if r.ok and r.values.get(name) is not None}
        if len(recorded) == 1 and (found := recorded.pop()).split(" ")[0] == value:
            return found
    return value


def step_line(run_a: ComparedRun, run_b: ComparedRun) -> str | None:
    """"step: matmul_precision highest in both; optimizer A sgd (torch, foreach), B adamw (torch, fused); shard A ddp,
    B fsdp": format 5's settings where either run records them, saying which run does not (unknown, not taken as
    "highest"), and format 6's where either run is not at their defaults (no recomputation, DDP: what every run
    before format 6 ran, and most since); None when there is nothing to say (two files from before format 5, which
    compare as they always did)."""
    a, b = step_as_run(run_a.header), step_as_run(run_b.header)
    recorded = any(values[name] is not None for values in (a, b) for name in STEP_SINCE_5)
    names = [*(STEP_SINCE_5 if recorded else ()),
             *(name for name in STEP_SINCE_6 if any(values[name] != BEFORE_FORMAT_6[name] for values in (a, b)))]
    if not names:
        return None
    parts = []
    for name in names:
        shown_a, shown_b = _step_shown(run_a, name, a[name]), _step_shown(run_b, name, b[name])
        parts.append(f"{name} {shown_a} in both" if shown_a == shown_b else f"{name} A {shown_a}, B {shown_b}")
    missing = [side for side, values in (("A", a), ("B", b))
               if recorded and any(values[name] is None for name in STEP_SINCE_5)]
    note = f" ({' and '.join(missing)}: unknown, not taken as highest or the reference optimizer)" if missing else ""
    return f"step: {'; '.join(parts)}{note}"


def environment_sentence(run_a: ComparedRun, run_b: ComparedRun) -> str | None:
    """"environment differs: python (A 3.11.9, B 3.12.3); ..." or None when it does not."""
    _, env = split_differences(run_a, run_b)
    return f"environment differs: {_values(env)}" if env else None


# --- the comparison ---------------------------------------------------------------------------------------------


def workload_of(run: ComparedRun) -> str:
    """The run's workload (files from before it was recorded: resnet50)."""
    return str(run.header.get("workload") or workloads.DEFAULT)


def refuse_unlike(run_a: ComparedRun, run_b: ComparedRun) -> None:
    """Samples of two workloads are different things: their rates are not compared."""
    a, b = workload_of(run_a), workload_of(run_b)
    if a != b:
        raise UsageError(f"compare: run A is {a}, run B is {b}: samples/s of different workloads are not "
                         "comparable; compare runs of one workload")


def compare_loaded(run_a: ComparedRun, run_b: ComparedRun, alpha: float = 0.05) -> pd.DataFrame:
    """One row per batch size measured successfully in both runs: ``compare_results``'s verdict (change_pct: B's
    samples/s over A's; its interval and Welch's p, NaN without a test, with fewer than 2 windows a side;
    significant: None then); tokens/s and MFU of each where recorded (None otherwise). Runs of different
    workloads are refused."""
    problem = float_problem(alpha, 0.0, 1.0, above=True, below=True)
    if problem is not None:
        raise UsageError(f"--alpha {problem}")
    refuse_unlike(run_a, run_b)
    rows = []
    for batch in sorted(set(run_a.results) & set(run_b.results)):
        a, b = run_a.results[batch], run_b.results[batch]
        if not (a.ok and b.ok):
            continue
        verdict = compare_results(a.values, b.values, alpha=alpha)
        rows.append({
            "batch_size": batch,
            f"{RATE}_a": a.values[RATE],
            f"{RATE}_b": b.values[RATE],
            "change_pct": verdict.change_pct,
            "change_low_pct": verdict.low_pct,
            "change_high_pct": verdict.high_pct,
            "p_value": verdict.p_value,
            "significant": verdict.significant,
            "windows_a": verdict.samples_a,
            "windows_b": verdict.samples_b,
            "verdict": verdict.text,
            **{f"{name}_{side}": result.values.get(name) for name in (fields.TOKENS_PER_SEC, fields.MFU)
               for side, result in (("a", a), ("b", b))},
        })
    # significant stays True/False/None (no verdict); the interval and p are numbers, NaN without a test
    return pd.DataFrame(rows, columns=COLUMNS).astype(
        {"significant": object, "p_value": float, "change_low_pct": float, "change_high_pct": float})


def compare_runs(run_a: Path, run_b: Path, alpha: float = 0.05) -> pd.DataFrame:
    return compare_loaded(load_run(run_a), load_run(run_b), alpha)


def statuses(run: ComparedRun) -> str:
    """'8 ok, 16 oom, ...': what each batch size of a run ended with."""
    return ", ".join(f"{batch} {result.status}" for batch, result in sorted(run.results.items())) or "none"
