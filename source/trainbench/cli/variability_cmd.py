"""``trainbench variability run|report``: one configuration on every visible GPU, repeated, and how the GPUs differ.

The runner is ``trainbench.bench.variability``, the analysis ``trainbench.analysis.variability`` (imported when a
subcommand runs, so other commands do not pay for pandas).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trainbench.bench.variability import gpus_to_screen, run_variability
from trainbench.cli.options import POSITIVE, add_sweep_options, bench_configs, model_config, path_text, real_number
from trainbench.telemetry.schema import DEFAULT_OUTLIER_THRESHOLD

DEFAULT_OUTPUT = "variability_data"
THRESHOLD = real_number(0.0, 1.0, above=True, below=True)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("variability", help="compare the GPUs of a node on one configuration",
                                   description="Run one throughput configuration on each visible GPU, with "
                                   "repetitions, and report how the GPUs differ (samples/s in the workload's "
                                   "unit, clocks, power, energy per sample) and which are outliers.")
    commands = parser.add_subparsers(dest="variability_command", required=True, metavar="{run,report}")
    run_parser = commands.add_parser(
        "run", help="run the configuration on every visible GPU and report",
        description="Each (GPU, repetition) is a throughput run whose workers see that GPU alone "
        "(CUDA_VISIBLE_DEVICES=<its UUID>); repetitions are interleaved over the GPUs. Choose the GPUs with "
        "CUDA_VISIBLE_DEVICES. --device cpu checks the plumbing, on a machine with or without a GPU: every run then "
        "trains on the CPU (with no GPU visible, as one stand-in 'GPU'), so its report compares no GPUs.")
    add_sweep_options(run_parser, DEFAULT_OUTPUT)
    run_parser.add_argument("--repetitions", type=POSITIVE, default=3, metavar="N",
                            help="runs of the configuration per GPU (default 3)")
    run_parser.add_argument("--parallel", action="store_true",
                            help="run every GPU of a repetition at once (default: one GPU after another)")
    _add_threshold(run_parser, DEFAULT_OUTLIER_THRESHOLD)
    run_parser.set_defaults(run=run)
    report_parser = commands.add_parser("report", help="the report of a variability folder, again",
                                        description="Re-read a variability folder's runs and write its report "
                                        "(CSV files in the folder, a table on the terminal).")
    report_parser.add_argument("folder", type=path_text, metavar="DIR")
    _add_threshold(report_parser, None)
    report_parser.set_defaults(run=report)


def _add_threshold(parser: argparse.ArgumentParser, default: float | None) -> None:
    shown = f"default {default:g}" if default is not None else "default: the one the run used"
    parser.add_argument("--outlier-threshold", type=THRESHOLD, default=default, metavar="F",
                        help=f"a GPU whose median samples/s is below the GPUs' median by more than this fraction is "
                        f"an outlier ({shown})")


CPU_NOTE = ("device cpu: every run trained on the CPU; this checks the study's plumbing and compares no GPUs "
            "(its 'GPU' rows are CPU runs)")


def _on_cpu(folder: Path) -> bool:
    from trainbench.analysis.variability import read_plan

    config = read_plan(folder).get("config")
    model = config.get("model") if isinstance(config, dict) else None
    return isinstance(model, dict) and model.get("device") == "cpu"


def _print_report(folder: Path, threshold: float | None) -> None:
    from trainbench.analysis.variability import format_report, write_report

    text = format_report(write_report(folder, threshold))
    print(f"{text}\n{CPU_NOTE}" if _on_cpu(folder) else text)


def run(args: argparse.Namespace) -> int:
    configs = bench_configs(args, model_config(args))  # validates everything before a folder is made
    # The CPU stand-in only when asked for: "auto" falls back to the CPU without a GPU, and a study of no GPU
    # that nobody asked for would be a silent surprise.
    gpus = gpus_to_screen(os.environ.get("CUDA_VISIBLE_DEVICES"), args.device)
    folder = run_variability(configs, gpus, Path(args.output), lambda line: print(line, flush=True),
                             args.repetitions, args.parallel, args.outlier_threshold, args.timeout)
    _print_report(folder, args.outlier_threshold)
    print(f"report: trainbench report {folder}", flush=True)
    print(folder)
    return 0


def report(args: argparse.Namespace) -> int:
    _print_report(Path(args.folder), args.outlier_threshold)
    return 0
