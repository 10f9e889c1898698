"""Performance models of the measurements (``analysis.measurements``), fitted by Extra-P (``analysis.extrap``).

Measurements are grouped by what was measured (config, region, and each of ``PARAMETERS`` not modelled, e.g. one
model per image size); each group and metric gets one model over the chosen parameters, with its error figures,
the points it stands on, and the predictions asked for. A prediction outside the measured range of a parameter is
an extrapolation and says so; fewer than ``MIN_POINTS`` distinct values of a parameter (Extra-P's own minimum for
telling terms apart) is warned about.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.analysis import extrap
from trainbench.analysis.measurements import PARAMETERS
from trainbench.errors import UsageError

MIN_POINTS = 5


@dataclass(frozen=True)
class Prediction:
    at: dict[str, float]
    value: float
    extrapolated: list[str]  # the parameters outside their measured range


@dataclass(frozen=True)
class Check:
    """A measured point left out of the fit, against the model's prediction there."""

    at: dict[str, float]
    measured: float  # the median of its values, as Extra-P models medians
    predicted: float
    relative_error: float  # (predicted - measured) / measured
    extrapolated: list[str]


@dataclass(frozen=True)
class Model:
    """One metric of one group as a function of the parameters."""

    config: str
    region: str
    fixed: dict[str, Any]  # the group's values of the parameters not modelled
    metric: str
    parameters: list[str]
    function: str
    python: str
    smape: float
    adjusted_r2: float
    rss: float
    relative_error: float
    points: dict[str, list[float]]  # each parameter's measured values
    values: int  # measurements the model stands on (every window and repetition)
    warnings: list[str] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def short_function(self) -> str:
        """The function with its coefficients at 4 significant digits, for titles."""
        return re.sub(r"\d+\.\d+(e[-+]?\d+)?", lambda number: f"{float(number[0]):.4g}", self.function)

    @property
    def label(self) -> str:
        fixed = " ".join(f"{name}={value}" for name, value in self.fixed.items())
        return " | ".join(part for part in (self.config, self.region, fixed) if part)

    def __call__(self, **at: float) -> float:
        return evaluate(self.python, at)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


# --- Extra-P's functions, evaluated without eval ------------------------------------------------------------------

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow}
_UNARY: dict[type, Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS: dict[str, Callable[[float], float]] = {"log2": math.log2, "log": math.log, "sqrt": math.sqrt}


def evaluate(expression: str, at: dict[str, float]) -> float:
    """Extra-P's ``{model:python}`` text at a point: numbers, the parameter names, + - * / **, log2(); anything
    else is refused (it is a program's output, never trusted as code)."""
    return _value(ast.parse(expression, mode="eval").body, at)


def _value(node: ast.AST, at: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id in at:
        return float(at[node.id])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, at), _value(node.right, at))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, at))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and len(node.args) == 1 and not node.keywords):
        return _FUNCTIONS[node.func.id](_value(node.args[0], at))
    raise ValueError(f"not a model function: {ast.unparse(node)!r}")


# --- groups -------------------------------------------------------------------------------------------------------


def _groups(points: pd.DataFrame, parameters: list[str]) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    keys = ["config", "region", *(name for name in PARAMETERS if name not in parameters)]
    return [(key, frame) for key, frame in points.groupby(keys, sort=True, dropna=False)]


def _varying(frame: pd.DataFrame, parameters: list[str]) -> tuple[list[str], list[str]]:
    """The parameters that take more than one value here, and a warning for each that does not."""
    kept, warnings = [], []
    for name in parameters:
        values = sorted(frame[name].dropna().unique())
        if len(values) > 1:
            kept.append(name)
        else:
            warnings.append(f"{name} takes one value here ({values[0] if values else 'none'}): not modelled")
    return kept, warnings


def _point_warnings(frame: pd.DataFrame, parameters: list[str]) -> list[str]:
    return [f"{name}: {count} measured values, fewer than Extra-P's minimum of {MIN_POINTS}: the terms it "
            "chooses are a guess" for name in parameters if (count := frame[name].nunique()) < MIN_POINTS]


def _predict(python: str, frame: pd.DataFrame, parameters: list[str],
             requests: list[dict[str, float]]) -> list[Prediction]:
    predictions = []
    for request in requests:
        at = {name: request[name] for name in parameters if name in request}
        if len(at) < len(parameters):
            continue  # the request names another set of parameters
        outside = [name for name in parameters if not frame[name].min() <= at[name] <= frame[name].max()]
        predictions.append(Prediction(at, evaluate(python, at), outside))
    return predictions


@dataclass
class _Job:
    """The groups that share one Extra-P run (the same modelled parameters)."""

    parameters: list[str]
    lines: list[dict[str, Any]] = field(default_factory=list)
    groups: dict[str, tuple[tuple[Any, ...], pd.DataFrame, list[str]]] = field(default_factory=dict)


def _jobs(points: pd.DataFrame, parameters: list[str], metrics: list[str]) -> list[_Job]:
    jobs: dict[tuple[str, ...], _Job] = {}
    wanted = points[points["metric"].isin(metrics)]
    fixed_names = [name for name in PARAMETERS if name not in parameters]
    for index, (key, frame) in enumerate(_groups(wanted, parameters)):
        kept, warnings = _varying(frame, parameters)
        if not kept:
            continue
        job = jobs.setdefault(tuple(kept), _Job(kept))
        callpath = f"g{index}"
        job.groups[callpath] = ((*key[:2], dict(zip(fixed_names, key[2:], strict=True))), frame, warnings)
        job.lines += [{"params": {name: float(row[name]) for name in kept}, "callpath": callpath,
                       "metric": row["metric"], "value": float(row["value"])} for _, row in frame.iterrows()]
    return list(jobs.values())


def _models(job: _Job, fits: list[extrap.Fit], requests: list[dict[str, float]]) -> list[Model]:
    models = []
    for fit in fits:
        (config, region, fixed), frame, warnings = job.groups[fit.callpath]
        frame = frame[frame["metric"] == fit.metric]
        points = {name: sorted(float(v) for v in frame[name].unique()) for name in job.parameters}
        models.append(Model(config, region, fixed, fit.metric, job.parameters, fit.function, fit.python, fit.smape,
                            fit.adjusted_r2, fit.rss, fit.relative_error, points, len(frame),
                            warnings + _point_warnings(frame, job.parameters),
                            _predict(fit.python, frame, job.parameters, requests)))
    return models


def split_out(points: pd.DataFrame, leave_out: list[dict[str, float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measurements to fit, and those at the ``leave_out`` points (every named parameter equal) kept apart."""
    held = pd.Series(False, index=points.index)
    for at in leave_out:
        match = pd.Series(True, index=points.index)
        for name, value in at.items():
            match &= points[name] == value
        held |= match
    return points[~held], points[held]


def check(model: Model, held: pd.DataFrame) -> Model:
    """The model with a Check for each left-out point of its own group and metric."""
    rows = _model_rows(model, held)
    if rows.empty or not set(model.parameters) <= set(rows.columns):
        return model
    checks = []
    for key, frame in rows.groupby(model.parameters):
        at = dict(zip(model.parameters, (float(v) for v in (key if isinstance(key, tuple) else (key,))),
                      strict=True))
        measured_value, predicted = float(frame["value"].median()), model(**at)
        outside = [name for name in model.parameters
                   if not min(model.points[name]) <= at[name] <= max(model.points[name])]
        checks.append(Check(at, measured_value, predicted, (predicted - measured_value) / measured_value, outside))
    return replace(model, checks=checks)


def fit(points: pd.DataFrame, parameters: list[str], metrics: list[str], *, requests: list[dict[str, float]] = (),
        strong_scaling: bool = False, keep: Path | None = None) -> list[Model]:
    """Models of ``metrics`` over ``parameters`` for every group of the measurements; ``keep``: a folder for
    Extra-P's input and experiment files (else they are temporary)."""
    jobs = _jobs(points, parameters, metrics)
    if not jobs:
        raise UsageError(f"no group of measurements varies in {', '.join(parameters)}: nothing to model "
                         f"({', '.join(metrics)})")
    models: list[Model] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = keep or Path(scratch)
        for index, job in enumerate(jobs):
            stem = f"extrap_{'_'.join(job.parameters)}" + (f"_{index}" if len(jobs) > 1 else "")
            extrap.write_input(folder / f"{stem}.jsonl", job.lines)
            experiment = folder / f"{stem}.extra-p" if keep else None
            fits = extrap.run(folder / f"{stem}.jsonl", len(job.parameters), strong_scaling=strong_scaling,
                              experiment=experiment)
            models += _models(job, fits, list(requests))
    return sorted(models, key=lambda model: (model.label, metrics.index(model.metric)))


# --- what a plot of a model draws ---------------------------------------------------------------------------------


def measured(model: Model, points: pd.DataFrame) -> pd.DataFrame:
    """The model's measurements per point: its parameters, median, min, max and count of the values."""
    frame = _model_rows(model, points)
    table = frame.groupby(model.parameters)["value"].agg(["median", "min", "max", "count"])
    return table.reset_index()


def _model_rows(model: Model, points: pd.DataFrame) -> pd.DataFrame:
    chosen = (points["config"] == model.config) & (points["region"] == model.region) & (
        points["metric"] == model.metric)
    for name, value in model.fixed.items():
        chosen &= points[name].isna() if pd.isna(value) else points[name] == value
    return points[chosen]


def curve(model: Model, samples: int = 60) -> pd.DataFrame:
    """The model along its first parameter (geometric steps over the measured range, stretched to cover the
    predictions), one line per measured value of the second: its parameters and ``value``."""
    first, *rest = model.parameters
    values = model.points[first] + [p.at[first] for p in [*model.predictions, *model.checks]]
    low, high = min(values), max(values)
    xs = [low * (high / low) ** (i / (samples - 1)) for i in range(samples)] if low > 0 else \
        [low + (high - low) * i / (samples - 1) for i in range(samples)]
    lines = [{}] if not rest else [{rest[0]: value} for value in model.points[rest[0]]]
    others = {name: model.points[name][0] for name in rest[1:]}  # a third parameter: drawn at its first value
    return pd.DataFrame([{**line, **others, first: x, "value": model(**{**line, **others, first: x})}
                         for line in lines for x in xs])
