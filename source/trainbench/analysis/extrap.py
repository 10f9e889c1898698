"""Extra-P, the real one, called as a program: its JSON Lines input written, its printed models read back.

Extra-P (PyPI ``extrap``, TU Darmstadt) fits performance models in its performance model normal form: a sum of
terms ``c_k * x^(i_k) * log2(x)^(j_k)`` per parameter (products of such terms across parameters), choosing the
exponents from a fixed set by cross-validated SMAPE. Its pins clash with the suite's (numpy < 2), so it lives in
an environment of its own (``make install`` creates ``.venv-extrap``) and is found as: ``$EXTRAP``, else
``.venv-extrap/bin/extrap`` in the repository, else ``extrap`` on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainbench.errors import UsageError

EXTRAP_ENV = "EXTRAP"
_REPO_PROGRAM = Path(__file__).resolve().parents[3] / ".venv-extrap" / "bin" / "extrap"
# What Extra-P prints per model: one tab-separated line (its --print placeholders).
_PRINT = "\t".join(("{callpath}", "{metric}", "{smape}", "{ar2}", "{rss}", "{re}", "{model:python}", "{model}"))
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Fit:
    """One model as Extra-P printed it: for a callpath (a group of measurements) and a metric."""

    callpath: str
    metric: str
    smape: float  # symmetric mean absolute percentage error at the measured points, in percent
    adjusted_r2: float
    rss: float  # residual sum of squares
    relative_error: float  # mean relative error at the measured points (a fraction)
    python: str  # the function as a Python expression over the parameter names, log2(...) for logarithms
    function: str  # the function as Extra-P writes it: c + c * x^(i) * log2(x)^(j)


def program() -> str:
    """The Extra-P command-line tool; a UsageError saying how to get it when there is none."""
    given = os.environ.get(EXTRAP_ENV)
    if given:
        if not (shutil.which(given) or Path(given).is_file()):
            raise UsageError(f"{EXTRAP_ENV}={given}: no such program")
        return given
    if _REPO_PROGRAM.is_file():
        return str(_REPO_PROGRAM)
    found = shutil.which("extrap")
    if found:
        return found
    raise UsageError("Extra-P is not installed: run `make install` (it creates .venv-extrap) or set "
                     f"{EXTRAP_ENV}=/path/to/extrap")


def write_input(path: Path, lines: list[dict[str, Any]]) -> None:
    """Extra-P's JSON Lines: {"params": {...}, "callpath": ..., "metric": ..., "value": ...}, one value a line
    (repetitions are lines with the same params, which Extra-P keeps apart)."""
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _modeler_options(parameters: int, strong_scaling: bool) -> list[str]:
    """Negative exponents (c / x: work split over more GPUs) only when asked: strong scaling."""
    if not strong_scaling:
        return []
    if parameters == 1:
        return ["--options", "allow_negative_exponents=true"]
    # The multi-parameter modeler takes the single-parameter modeler's options through #spo (KEY=VALUE joined).
    return ["--modeler", "multi-parameter", "--options", "#spm=Default", "#spo=allow_negative_exponents=true"]


def run(input_path: Path, parameters: int, *, strong_scaling: bool = False,
        experiment: Path | None = None) -> list[Fit]:
    """Models of every callpath and metric of the input; ``experiment``: also save Extra-P's own experiment file
    (opens in its GUI). Extra-P fails -> UsageError with its last line."""
    command = [program(), "--json", str(input_path), "--measure", "median", "--disable-progress",
               *_modeler_options(parameters, strong_scaling), "--print", _PRINT]
    if experiment is not None:
        command += ["--save-experiment", str(experiment)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(f"Extra-P ({command[0]}) could not run: {error}") from None
    fits = [_fit(line) for line in done.stdout.splitlines() if line.count("\t") == 7]
    if done.returncode != 0 or not fits:
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"exit {done.returncode}"
        raise UsageError(f"{input_path}: Extra-P made no model ({reason})")
    return fits


def _fit(line: str) -> Fit:
    callpath, metric, smape, ar2, rss, relative, python, function = line.split("\t")
    return Fit(callpath, metric, float(smape), float(ar2), float(rss), float(relative), python, function)
