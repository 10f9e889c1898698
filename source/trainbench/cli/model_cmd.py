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
from trainbench.analysis.measurements import METRICS, PARAMETERS
from trainbench.analysis.models import MIN_POINTS, Model, check, curve, fit, measured, split_out
from trainbench.cli.options import names, path_text
from trainbench.errors import UsageError
from trainbench.report.model_plot import Panel, plot_models
from trainbench.results.files import create_run_dir, write_csv_atomic, write_json_atomic

OUTPUT = "model_data"
DEFAULT_METRICS = ("step_time", "gpu_time")


def _choices(allowed: tuple[str, ...], what: str) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        chosen = names(text)
        unknown = [name for name in chosen if name not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0]!r}: choose from {', '.join(allowed)}")
        if len(set(chosen)) < len(chosen):
            raise argparse.ArgumentTypeError(f"a {what} is given more than once in {text!r}")
        return chosen

    return parse


def point(text: str) -> dict[str, float]:
    """An argparse type: "batch_size=512,gpus=16"."""
    at: dict[str, float] = {}
    for item in names(text):
        name, equals, number = item.partition("=")
        if not equals or name not in PARAMETERS:
            raise argparse.ArgumentTypeError(f"{item!r} is not PARAMETER=NUMBER with a parameter of "
                                             f"{', '.join(PARAMETERS)}")
        try:
            value = float(number)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: {number!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{item!r}: the value must be a finite number above 0")
        at[name] = value
    return at


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model", help="performance models of measured runs with Extra-P",
        description="Gather every timed window (and repetition) of the throughput runs, campaigns and nsys profiles "
        "under the folders, fit one model per metric and configuration with Extra-P (its performance model normal "
        "form), print each model's function, SMAPE, adjusted R^2, RSS and points, and the predictions asked for. "
        "Writes model.json, model.png, the measurements and Extra-P's own files to a new folder; the last line "
        "printed is that folder.")
    parser.add_argument("dirs", nargs="+", type=path_text, metavar="DIR",
                        help="run folders, folders of runs, campaign folders, nsys profile folders")
    parser.add_argument("--param", type=_choices(PARAMETERS, "parameter"), default=("batch_size",),
                        help=f"the model's parameters, from {', '.join(PARAMETERS)} (default batch_size)")
    parser.add_argument("--metric", type=_choices(tuple(METRICS), "metric"), default=DEFAULT_METRICS,
                        help=f"what is modelled, from {', '.join(METRICS)} (default: step_time of throughput runs, "
                        "gpu_time of nsys profiles)")
    parser.add_argument("--predict", type=point, action="append", default=[], metavar="PARAM=VALUE[,...]",
                        help="a point to predict, e.g. batch_size=512,gpus=16 (repeatable)")
    parser.add_argument("--leave-out", type=point, action="append", default=[], metavar="PARAM=VALUE[,...]",
                        help="fit without the measurements at this point, then compare the model's prediction "
                        "there with them: a check of the model (repeatable)")
    parser.add_argument("--strong-scaling", action="store_true",
                        help="a fixed global batch split over the GPUs: allow negative exponents (c / gpus)")
    parser.add_argument("--output", type=path_text, default=OUTPUT, metavar="DIR",
                        help=f"a new folder is made inside (default ./{OUTPUT})")
    parser.set_defaults(run=run)


def _number(value: float) -> str:
    return f"{value:.4g}"


def describe(model: Model) -> list[str]:
    """The lines printed for one model."""
    unit = METRICS.get(model.metric, "")
    counts = ", ".join(f"{name}: {len(values)} ({_number(min(values))}-{_number(max(values))})"
                       for name, values in model.points.items())
    lines = [f"{model.label}", f"  {model.metric} [{unit}] = {model.function}",
             f"  SMAPE {model.smape:.2f} %, adjusted R^2 {model.adjusted_r2:.4f}, RSS {model.rss:.3g}; "
             f"{model.values} values; points per parameter: {counts}"]
    lines += [f"  warning: {warning}" for warning in model.warnings]
    for prediction in model.predictions:
        at = ", ".join(f"{name}={_number(value)}" for name, value in prediction.at.items())
        beyond = (f" (extrapolated: {', '.join(prediction.extrapolated)} beyond the measured range)"
                  if prediction.extrapolated else "")
        lines.append(f"  predicted at {at}: {_number(prediction.value)} {unit}{beyond}")
    for held in model.checks:
        at = ", ".join(f"{name}={_number(value)}" for name, value in held.at.items())
        beyond = " (extrapolated)" if held.extrapolated else ""
        lines.append(f"  left out at {at}: measured {_number(held.measured)} {unit} (median), predicted "
                     f"{_number(held.predicted)}{beyond}: error {held.relative_error:+.1%}")
    return lines


def _panel(model: Model, points: pd.DataFrame) -> Panel:
    return Panel(f"{model.label}\n{model.short_function}  (SMAPE {model.smape:.2f} %)", model.parameters,
                 f"{model.metric} [{METRICS.get(model.metric, '')}]", measured(model, points), curve(model),
                 [{"at": p.at, "value": p.value} for p in model.predictions],
                 [{"at": c.at, "measured": c.measured} for c in model.checks])


def run(args: argparse.Namespace) -> int:
    folders = [Path(folder) for folder in args.dirs]
    points, held = split_out(measurements.gather(folders), args.leave_out)
    if args.leave_out and held.empty:
        raise UsageError("--leave-out: no measurement at that point")
    parameters, metrics = list(args.param), list(args.metric)
    with tempfile.TemporaryDirectory() as scratch:  # the run folder is made only once there are models
        models = fit(points, parameters, metrics, requests=args.predict, strong_scaling=args.strong_scaling,
                     keep=Path(scratch))
        out = create_run_dir(Path(args.output), "_".join(parameters))
        for made in Path(scratch).iterdir():  # Extra-P's input and experiment files
            shutil.move(made, out / made.name)
    models = [check(model, held) for model in models]
    write_csv_atomic(out / "measurements.csv", list(points.columns), points.to_dict("records"))
    write_json_atomic(out / "model.json", {
        "sources": [str(folder.resolve()) for folder in folders], "parameters": parameters, "metrics": metrics,
        "strong_scaling": args.strong_scaling, "min_points": MIN_POINTS, "left_out": args.leave_out,
        "models": [model.to_json() for model in models]})
    plot_models([_panel(model, points) for model in models], out / "model.png")
    for model in models:
        print("\n".join(describe(model)))
    print(out)
    return 0
