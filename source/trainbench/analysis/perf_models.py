"""Performance models of the measurements (``analysis.measurements``), fitted by Extra-P (``analysis.extrap``).

Measurements are grouped by what was measured: config, region, every setting of the runs that is not a parameter
(``settings``: the number of classes, step counts, launch path, CPU and GPU model, ...) and each of ``PARAMETERS``
not modelled (e.g. one model per image size). Runs that differ in a setting are never merged: they get models of
their own, whose labels name the settings that tell them apart. Each group and metric gets one model over the
chosen parameters, with its error figures, the points it stands on, and the predictions asked for. A prediction
outside the measured range of a parameter is an extrapolation and says so; fewer than ``MIN_POINTS`` distinct
values of a parameter (Extra-P's own minimum for telling terms apart) is warned about. A constant model (no
parameter explains the values) and a fit without a defined quality say so instead of a fit quality.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.analysis import extrap
from trainbench.analysis.measurements import NOT_RECORDED, PARAMETERS
from trainbench.errors import UsageError

MIN_POINTS = 5
NO_SETTINGS = "{}"  # the settings of measurements that came without any (a table built by hand)


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
    relative_error: float | None  # (predicted - measured) / measured; None when measured is 0 or no prediction
    extrapolated: list[str]


@dataclass(frozen=True)
class Model:
    """One metric of one group as a function of the parameters."""

    config: str
    region: str
    fixed: dict[str, Any]  # the group's values of the parameters not modelled
    settings: dict[str, str]  # the group's settings that tell it apart from a group of the same config and region
    metric: str
    parameters: list[str]
    function: str
    python: str
    smape: float  # as Extra-P printed them; ``quality`` says which of them mean something
    adjusted_r2: float
    rss: float
    relative_error: float
    points: dict[str, list[float]]  # each parameter's measured values
    values: int  # measurements the model stands on (every window and repetition)
    warnings: list[str] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    run_settings: dict[str, str] = field(default_factory=dict)  # every setting of its runs (measurements' settings)

    @property
    def short_function(self) -> str:
        """The function with its coefficients at 4 significant digits, for titles."""
        return re.sub(r"\d+\.\d+(e[-+]?\d+)?", lambda number: f"{float(number[0]):.4g}", self.function)

    @property
    def label(self) -> str:
        fixed = " ".join(f"{name}={value}" for name, value in self.fixed.items())
        settings = ", ".join(f"{name}={value}" for name, value in self.settings.items())
        return " | ".join(part for part in (self.config, self.region, fixed, settings) if part)

    @property
    def constant(self) -> bool:
        """No parameter in the function: Extra-P found no term that explains the values."""
        return not parameters_in(self.python)

    @property
    def quality(self) -> str:
        """The fit's quality in words: SMAPE and adjusted R^2 where they are defined, else what the fit is."""
        if not math.isfinite(self.smape):
            return "failed: Extra-P gave no error figure for this fit"
        if self.constant:
            return f"constant: no parameter explains the values (SMAPE {self.smape:.2f} % of their medians about it)"
        if not math.isfinite(self.adjusted_r2):
            return f"SMAPE {self.smape:.2f} %, adjusted R^2 undefined (as many terms as measured points)"
        return f"SMAPE {self.smape:.2f} %, adjusted R^2 {self.adjusted_r2:.4f}"

    def __call__(self, **at: float) -> float:
        return evaluate(self.python, at)

    def to_json(self) -> dict[str, Any]:
        """Every field; a figure that is not defined (a constant model's R^2, Extra-P's inf or nan) as null."""
        data = {**asdict(self), "label": self.label, "constant": self.constant, "quality": self.quality}
        if self.constant:
            data["adjusted_r2"] = None
        return _finite_or_none(data)


def _finite_or_none(data: Any) -> Any:
    """``data`` with every nan and infinity as None: JSON has neither."""
    if isinstance(data, dict):
        return {key: _finite_or_none(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_finite_or_none(item) for item in data]
    return None if isinstance(data, float) and not math.isfinite(data) else data


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


def value_at(expression: str, at: dict[str, float]) -> float:
    """``evaluate``, with nan where the function has no real value there (an overflow, a log of 0, 0 ** -1)."""
    try:
        result = evaluate(expression, at)
    except (OverflowError, ZeroDivisionError):
        return math.nan
    except ValueError as error:
        if "not a model function" in str(error):
            raise
        return math.nan  # math's domain errors
    return result if isinstance(result, float) else math.nan  # a negative number to a fraction is complex


def parameters_in(expression: str) -> set[str]:
    """The names a model function uses."""
    return {node.id for node in ast.walk(ast.parse(expression, mode="eval")) if isinstance(node, ast.Name)} - \
        set(_FUNCTIONS)


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

_GROUP = ["config", "region", "settings"]


def with_settings(points: pd.DataFrame) -> pd.DataFrame:
    """The measurements with a ``settings`` column (``NO_SETTINGS`` where a table built elsewhere has none)."""
    if "settings" not in points.columns:
        return points.assign(settings=NO_SETTINGS)
    settings = points["settings"].astype(object)  # an all-empty column reads as float: fill it as text
    return points.assign(settings=settings.where(settings.notna(), NO_SETTINGS))


def _check_values(points: pd.DataFrame) -> None:
    """A time, rate or energy is a finite non-negative number: anything else is refused, never modelled."""
    values = pd.to_numeric(points["value"], errors="coerce")
    bad = ~((values >= 0) & (values < math.inf))
    if bad.any():
        row = points[bad].iloc[0]
        value = row["value"].item() if hasattr(row["value"], "item") else row["value"]
        raise UsageError(f"{row['source']}: a {row['metric']} of {value!r} is no measurement (not a finite "
                         "non-negative number): nothing modelled")


def _plain(value: Any) -> Any:
    """A group's parameter value as JSON writes it: a Python number, None for a missing one."""
    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _groups(points: pd.DataFrame, parameters: list[str]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    keys = [*_GROUP, *(name for name in PARAMETERS if name not in parameters)]
    return [(dict(zip(keys, map(_plain, key), strict=True)), frame)
            for key, frame in points.groupby(keys, sort=True, dropna=False)]


def _distinct(groups: list[dict[str, Any]]) -> list[dict[str, str]]:
    """For each group, the settings in which it differs from another group of the same config, region and fixed
    parameters (which would otherwise share its label); a setting one of them lacks counts as NOT_RECORDED."""
    decoded = [json.loads(group["settings"]) for group in groups]
    peers = [tuple(str(value) for name, value in group.items() if name != "settings") for group in groups]
    distinct = []
    for settings, peer in zip(decoded, peers, strict=True):
        others = [other for other, key in zip(decoded, peers, strict=True) if key == peer]
        names = sorted({name for other in others for name in {*other, *settings}
                        if other.get(name, NOT_RECORDED) != settings.get(name, NOT_RECORDED)})
        distinct.append({name: settings.get(name, NOT_RECORDED) for name in names})
    return distinct


def _varying(frame: pd.DataFrame, parameters: list[str]) -> tuple[list[str], list[str]]:
    """The parameters that take more than one value here, and a warning for each that does not."""
    kept, warnings = [], []
    for name in parameters:
        values = sorted(frame[name].dropna().unique())
        if len(values) > 1:
            kept.append(name)
        else:
            warnings.append(f"{name} takes one value here ({_text(values[0]) if values else 'none'}): not modelled")
    return kept, warnings


def _point_warnings(frame: pd.DataFrame, parameters: list[str]) -> list[str]:
    return [f"{name}: {count} measured values, fewer than Extra-P's minimum of {MIN_POINTS}: the terms it "
            "chooses are a guess" for name in parameters if (count := frame[name].nunique()) < MIN_POINTS]


def _text(value: float) -> str:
    return f"{float(value):g}"


def point_text(at: dict[str, float]) -> str:
    """"batch_size=512,gpus=16", as --predict and --leave-out take it."""
    return ",".join(f"{name}={_text(value)}" for name, value in at.items())


def _predict(python: str, frame: pd.DataFrame, parameters: list[str],
             requests: list[dict[str, float]]) -> tuple[list[Prediction], list[str]]:
    """The predictions of the requests that name every parameter of the model, and a note for each that also
    names a parameter this model does not vary at another value than the one it was measured at."""
    predictions, notes = [], []
    for request in requests:
        if not set(parameters) <= set(request):
            continue  # the request names another set of parameters
        others = {name: sorted(float(v) for v in frame[name].dropna().unique())
                  for name in request if name not in parameters}
        off = [f"{name}={_text(request[name])} (measured at {', '.join(map(_text, values)) or 'none'} only)"
               for name, values in others.items() if values != [request[name]]]
        if off:
            notes.append(f"not predicted at {point_text(request)}: {'; '.join(off)} is not modelled here")
            continue
        at = {name: request[name] for name in parameters}
        outside = [name for name in parameters if not frame[name].min() <= at[name] <= frame[name].max()]
        predictions.append(Prediction(at, value_at(python, at), outside))
    return predictions, notes


@dataclass(frozen=True)
class _Series:
    """One group's measurements of one metric: one model."""

    group: dict[str, Any]  # config, region, settings (as in the table) and the parameters not modelled
    distinct: dict[str, str]  # the settings that tell it apart
    frame: pd.DataFrame
    warnings: list[str]


@dataclass
class _Job:
    """The series that share one Extra-P run: the same modelled parameters and measured points (Extra-P wants
    every callpath and metric of an input at the same points)."""

    parameters: list[str]
    lines: list[dict[str, Any]] = field(default_factory=list)
    series: dict[tuple[str, str], _Series] = field(default_factory=dict)  # by (callpath, metric)


def _jobs(points: pd.DataFrame, parameters: list[str], metrics: list[str]) -> list[_Job]:
    jobs: dict[tuple[Any, ...], _Job] = {}
    groups = _groups(points[points["metric"].isin(metrics)], parameters)
    for index, ((group, frame), distinct) in enumerate(zip(groups, _distinct([g for g, _ in groups]), strict=True)):
        for metric, series in frame.groupby("metric", sort=False):
            kept, warnings = _varying(series, parameters)
            if not kept:
                continue
            at = series[kept].astype(float)
            coordinates = tuple(sorted(set(at.itertuples(index=False, name=None))))
            job = jobs.setdefault((tuple(kept), coordinates), _Job(kept))
            callpath = f"g{index}"
            job.series[(callpath, str(metric))] = _Series(group, distinct, series, warnings)
            job.lines += [{"params": dict(zip(kept, row[:-1], strict=True)), "callpath": callpath,
                           "metric": metric, "value": float(row[-1])}
                          for row in at.assign(value=series["value"]).itertuples(index=False, name=None)]
    return list(jobs.values())


def _models(job: _Job, fits: list[extrap.Fit], requests: list[dict[str, float]]) -> list[Model]:
    models = []
    for fit in fits:
        series = job.series[(fit.callpath, fit.metric)]
        group, frame = series.group, series.frame
        fixed = {name: value for name, value in group.items() if name in PARAMETERS}
        points = {name: sorted(float(v) for v in frame[name].unique()) for name in job.parameters}
        predictions, notes = _predict(fit.python, frame, job.parameters, requests)
        models.append(Model(group["config"], group["region"], fixed, series.distinct, fit.metric, job.parameters,
                            fit.function, fit.python, fit.smape, fit.adjusted_r2, fit.rss, fit.relative_error,
                            points, len(frame), series.warnings + _point_warnings(frame, job.parameters) + notes,
                            predictions, run_settings=json.loads(group["settings"])))
    return models


def _refuse_unpredictable(models: list[Model]) -> None:
    """A prediction where the function has no finite value (it overflows, or takes a log of 0) is refused."""
    for model in models:
        for prediction in model.predictions:
            if not math.isfinite(prediction.value):
                raise UsageError(f"--predict {point_text(prediction.at)}: the model of {model.metric} "
                                 f"({model.label}: {model.short_function}) has no finite value there")


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
        measured_value, predicted = float(frame["value"].median()), value_at(model.python, at)
        error = (predicted - measured_value) / measured_value if measured_value and math.isfinite(predicted) \
            else None
        outside = [name for name in model.parameters
                   if not min(model.points[name]) <= at[name] <= max(model.points[name])]
        checks.append(Check(at, measured_value, predicted, error, outside))
    return replace(model, checks=checks)


def fit(points: pd.DataFrame, parameters: list[str], metrics: list[str], *, requests: Sequence[dict[str, float]] = (),
        strong_scaling: bool = False, keep: Path | None = None) -> list[Model]:
    """Models of ``metrics`` over ``parameters`` for every group of the measurements; ``keep``: a folder for
    Extra-P's input and experiment files (else they are temporary). A value that is no measurement, or a
    prediction where a model has no finite value, is a UsageError."""
    points = with_settings(points)
    _check_values(points[points["metric"].isin(metrics)])
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
    _refuse_unpredictable(models)
    return sorted(models, key=lambda model: (model.label, metrics.index(model.metric)))


# --- what a plot of a model draws ---------------------------------------------------------------------------------


def measured(model: Model, points: pd.DataFrame) -> pd.DataFrame:
    """The model's measurements per point: its parameters, median, min, max and count of the values."""
    frame = _model_rows(model, points)
    table = frame.groupby(model.parameters)["value"].agg(["median", "min", "max", "count"])
    return table.reset_index()


def _model_rows(model: Model, points: pd.DataFrame) -> pd.DataFrame:
    points = with_settings(points)
    chosen = (points["config"] == model.config) & (points["region"] == model.region) & (
        points["metric"] == model.metric) & (points["settings"] == json.dumps(model.run_settings))
    for name, value in model.fixed.items():
        chosen &= points[name].isna() if pd.isna(value) else points[name] == value
    return points[chosen]


def curve(model: Model, samples: int = 60) -> pd.DataFrame:
    """The model along its first parameter (geometric steps over the measured range, stretched to cover the
    predictions), one line per measured value of the second: its parameters and ``value`` (where finite)."""
    first, *rest = model.parameters
    values = model.points[first] + [p.at[first] for p in model.predictions] + [c.at[first] for c in model.checks]
    low, high = min(values), max(values)
    xs = [low * (high / low) ** (i / (samples - 1)) for i in range(samples)] if low > 0 else \
        [low + (high - low) * i / (samples - 1) for i in range(samples)]
    lines = [{}] if not rest else [{rest[0]: value} for value in model.points[rest[0]]]
    others = {name: model.points[name][0] for name in rest[1:]}  # a third parameter: drawn at its first value
    rows = [{**line, **others, first: x, "value": value_at(model.python, {**line, **others, first: x})}
            for line in lines for x in xs]
    return pd.DataFrame([row for row in rows if math.isfinite(row["value"])], columns=[*model.parameters, "value"])
