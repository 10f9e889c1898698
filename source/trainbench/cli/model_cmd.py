"""``trainbench model DIR...``: performance models of measured runs with Extra-P, their error and predictions."""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from trainbench.analysis import measurements
from trainbench.analysis.measurements import METRIC_ALIASES, METRICS, PARAMETERS
from trainbench.analysis.perf_models import MIN_POINTS, Model, check, curve, fit, measured, point_text, split_out
from trainbench.cli.options import names, path_text
from trainbench.config import MAX_BATCH_SIZE, MAX_IMAGE_SIZE, MAX_PROCESSES
from trainbench.errors import UsageError
from trainbench.render.model_plot import Panel, plot_models
from trainbench.results.files import create_run_dir, write_csv_atomic, write_json_atomic
from trainbench.results.layout import MEASUREMENTS, MODEL, MODEL_PLOT
from trainbench.workloads import all_workloads

OUTPUT = "model_data"
# The largest value of each parameter a run can have: a point beyond it is no question a model of these runs answers
LARGEST = {"batch_size": MAX_BATCH_SIZE, "gpus": MAX_PROCESSES * MAX_PROCESSES, "image_size": MAX_IMAGE_SIZE,
           "seq_len": max(w.params["seq_len"].maximum for w in all_workloads() if "seq_len" in w.params)}
DEFAULT_METRICS = ("step_time", "gpu_time")


def _choices(allowed: tuple[str, ...], what: str,
             aliases: dict[str, str] | None = None) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple((aliases or {}).get(name, name) for name in names(text))
        unknown = [name for name in chosen if name not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0]!r}: choose from {', '.join(allowed)}")
        if len(set(chosen)) < len(chosen):
            raise argparse.ArgumentTypeError(f"a {what} is given more than once in {text!r}")
        return chosen

    return parse


class _Once(argparse.Action):
    """An option given at most once: a second --param or --output would silently replace the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if getattr(namespace, f"_{self.dest}_given", False):
            raise argparse.ArgumentError(self, "is given more than once (give every value in one, comma-separated)")
        setattr(namespace, f"_{self.dest}_given", True)
        setattr(namespace, self.dest, values)


def point(text: str) -> dict[str, float]:
    """An argparse type: "batch_size=512,gpus=16"."""
    at: dict[str, float] = {}
    for item in names(text):
        name, equals, number = item.partition("=")
        if not equals or name not in PARAMETERS:
            raise argparse.ArgumentTypeError(f"{item!r} is not PARAMETER=NUMBER with a parameter of "
                                             f"{', '.join(PARAMETERS)}")
        if name in at:
            raise argparse.ArgumentTypeError(f"{name} is given more than once in {text!r}")
        try:
            value = float(number)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: {number!r} is not a number") from None
        if not math.isfinite(value) or not 1 <= value <= LARGEST[name]:
            raise argparse.ArgumentTypeError(f"{item!r}: {name} must be a finite number from 1 to "
                                             f"{LARGEST[name]} (the largest a run can have)")
        at[name] = value
    return at


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model", help="performance models of measured runs with Extra-P",
        description="Gather every timed window (and repetition) of the throughput runs, campaigns and nsys profiles "
        "under the folders, fit one model per metric and configuration (runs that differ in any setting that is not a "
        "parameter are modelled apart) with Extra-P (its performance model normal form), print what was left out "
        "(values that are no measurement), each model's function, fit quality, RSS and points, and the predictions "
        "asked for. "
        "Writes model.json, model.png, the measurements and Extra-P's own files to a new folder; the last line "
        "printed is that folder.")
    parser.add_argument("dirs", nargs="+", type=path_text, metavar="DIR",
                        help="run folders, folders of runs, campaign folders, nsys profile folders")
    parser.add_argument("--param", action=_Once, type=_choices(PARAMETERS, "parameter"), default=("batch_size",),
                        help=f"the model's parameters, from {', '.join(PARAMETERS)} (default batch_size)")
    parser.add_argument("--metric", action=_Once, type=_choices(tuple(METRICS), "metric", METRIC_ALIASES),
                        default=DEFAULT_METRICS,
                        help=f"what is modelled, from {', '.join(METRICS)} (default: step_time of throughput runs, "
                        "gpu_time of nsys profiles)")
    parser.add_argument("--predict", type=point, action="append", default=[], metavar="PARAM=VALUE[,...]",
                        help="a point to predict, e.g. batch_size=512,gpus=16: every --param parameter, each from 1 "
                        "to the largest a run can have (repeatable)")
    parser.add_argument("--leave-out", type=point, action="append", default=[], metavar="PARAM=VALUE[,...]",
                        help="fit without the measurements at this point (--param parameters only), then compare the "
                        "model's prediction there with them: a check of the model (repeatable)")
    parser.add_argument("--strong-scaling", action="store_true",
                        help="a fixed global batch split over the GPUs: allow negative exponents (c / gpus)")
    parser.add_argument("--output", action=_Once, type=path_text, default=OUTPUT, metavar="DIR",
                        help=f"a new folder is made inside (default ./{OUTPUT})")
    parser.set_defaults(run=run)


def _number(value: float) -> str:
    return f"{value:.4g}"


def _at(at: dict[str, float]) -> str:
    return ", ".join(f"{name}={_number(value)}" for name, value in at.items())


def describe(model: Model) -> list[str]:
    """The lines printed for one model."""
    unit = METRICS.get(model.metric, "")
    counts = ", ".join(f"{name}: {len(values)} ({_number(min(values))}-{_number(max(values))})"
                       for name, values in model.points.items())
    rss = f"RSS {model.rss:.3g}; " if math.isfinite(model.rss) else ""
    lines = [f"{model.label}", f"  {model.metric} [{unit}] = {model.function}",
             f"  {model.quality}; {rss}{model.values} values; points per parameter: {counts}"]
    lines += [f"  warning: {warning}" for warning in model.warnings]
    for prediction in model.predictions:
        beyond = (f" (extrapolated: {', '.join(prediction.extrapolated)} beyond the measured range)"
                  if prediction.extrapolated else "")
        below = " (below zero: the model does not hold there)" if prediction.value < 0 else ""
        lines.append(f"  predicted at {_at(prediction.at)}: {_number(prediction.value)} {unit}{beyond}{below}")
    for held in model.checks:
        beyond = " (extrapolated)" if held.extrapolated else ""
        if not math.isfinite(held.predicted):
            predicted = "the model has no finite value there"
        else:
            error = "no relative error (measured 0)" if held.relative_error is None else \
                f"error {held.relative_error:+.1%}"
            predicted = f"predicted {_number(held.predicted)}{beyond}: {error}"
        lines.append(f"  left out at {_at(held.at)}: measured {_number(held.measured)} {unit} (median), {predicted}")
    return lines


def _panel(model: Model, points: pd.DataFrame) -> Panel:
    quality = "constant" if model.constant else model.quality.split(",")[0].split(":")[0]
    return Panel(f"{model.label}\n{model.short_function}  ({quality})", model.parameters,
                 f"{model.metric} [{METRICS.get(model.metric, '')}]", measured(model, points), curve(model),
                 [{"at": p.at, "value": p.value} for p in model.predictions],
                 [{"at": c.at, "measured": c.measured} for c in model.checks])


def _check_points(option: str, chosen: list[dict[str, float]], parameters: list[str], every: bool) -> None:
    """Each point names only parameters of the model (and, ``every``, all of them), and is given once."""
    for index, at in enumerate(chosen):
        text = point_text(at)
        if at in chosen[:index]:
            raise UsageError(f"{option} {text} is given more than once")
        if unknown := [name for name in at if name not in parameters]:
            raise UsageError(f"{option} {text}: {unknown[0]} is not a parameter of the model (--param "
                             f"{','.join(parameters)})")
        if every and (missing := [name for name in parameters if name not in at]):
            raise UsageError(f"{option} {text}: give a value for every parameter of the model (missing "
                             f"{', '.join(missing)})")


def _checked(models: list[Model], held: pd.DataFrame, leave_out: list[dict[str, float]]) -> list[Model]:
    """The models with their checks against the left-out points; a point no model could check is refused."""
    models = [check(model, held) for model in models]
    for at in leave_out:
        if not any(all(c.at.get(name) == value for name, value in at.items()) for m in models for c in m.checks):
            raise UsageError(f"--leave-out {point_text(at)}: no model stands on the other measurements of its "
                             "group (too few points left to fit), so nothing checks it")
    return models


def run(args: argparse.Namespace) -> int:
    folders = [Path(folder) for folder in args.dirs]
    parameters, metrics = list(args.param), list(args.metric)
    _check_points("--predict", args.predict, parameters, every=True)
    _check_points("--leave-out", args.leave_out, parameters, every=False)
    gathered = measurements.collect(folders)
    points, held = split_out(gathered.table, args.leave_out)
    for at in args.leave_out:
        if split_out(held, [at])[1].empty:
            raise UsageError(f"--leave-out {point_text(at)}: no measurement at that point")
    with tempfile.TemporaryDirectory() as scratch:  # the run folder is made only once there are models
        models = fit(points, parameters, metrics, requests=args.predict, strong_scaling=args.strong_scaling,
                     keep=Path(scratch))
        models = _checked(models, held, args.leave_out)
        out = create_run_dir(Path(args.output), "_".join(parameters))
        for made in Path(scratch).iterdir():  # Extra-P's input and experiment files
            shutil.move(made, out / made.name)
    write_csv_atomic(out / MEASUREMENTS, list(points.columns), points.to_dict("records"))
    write_json_atomic(out / MODEL, {
        "sources": [str(folder.resolve()) for folder in folders], "parameters": parameters, "metrics": metrics,
        "strong_scaling": args.strong_scaling, "min_points": MIN_POINTS, "left_out": args.leave_out,
        "results_left_out": gathered.left_out, "models": [model.to_json() for model in models]})
    plot_models([_panel(model, points) for model in models], out / MODEL_PLOT)
    if gathered.left_out:
        print(f"note: {gathered.left_out_line()}")
    for model in models:
        print("\n".join(describe(model)))
    print(out)
    return 0
