"""``trainbench profile PROFILER``: profile iterations [start, start + count) of training, per batch size."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.cli.options import (
    BATCH_SIZES,
    NON_NEGATIVE,
    POSITIVE,
    TIMEOUT,
    add_input_options,
    add_launch_options,
    add_model_options,
    add_optimizer_option,
    bench_configs,
    model_config,
    names,
    path_text,
)
from trainbench.config import PROFILERS, BenchConfig, ProfileConfig, field_default
from trainbench.profile.run import run_profile
from trainbench.render.console import format_fields


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="profile a window of training iterations (ncu, nsys, nvprof, torch, tf)",
        description="Run each batch size in a worker under PROFILER, profiling exactly iterations "
        "[start, start + count) of the workload's network (--workload, default resnet50): ncu gives the "
        "FMA/FP16/Tensor/SFU pipe utilizations, nsys the GPU's busy fraction, "
        "nvprof (GPUs before compute capability 8.0) a timeline, torch and tf their frameworks' traces (CPU too). "
        "Results go to a new folder OUTPUT/profiled_data_PROFILER; the last line printed is that folder.",
    )
    parser.add_argument("profiler", help=f"one of {', '.join(PROFILERS)}")
    add_model_options(parser)
    start, iterations = field_default(ProfileConfig, "start_iteration"), field_default(ProfileConfig, "iterations")
    parser.add_argument("--start-iteration", type=NON_NEGATIVE, default=start, metavar="N",
                        help=f"iterations run before the window (default {start})")
    parser.add_argument("--iterations", type=POSITIVE, default=iterations, metavar="N",
                        help=f"iterations profiled (default {iterations})")
    parser.add_argument("--batch-sizes", type=BATCH_SIZES, help="e.g. 4,16 (default: as trainbench throughput)")
    add_optimizer_option(parser)
    add_input_options(parser)
    parser.add_argument("--metrics", type=names,
                        help="ncu: comma-separated metrics instead of the set chosen for the GPU")
    parser.add_argument("--clock-control", choices=("base", "none"), default="base",
                        help="ncu: lock the clocks to base while profiling (ncu's default) or leave them be")
    parser.add_argument("--output", type=path_text, default=".", metavar="DIR",
                        help="where profiled_data_PROFILER is made "
                        "(default: here; profiled_data_PROFILER-1, -2... when taken)")
    parser.add_argument("--timeout", type=TIMEOUT, metavar="S", help="give up on a batch size after S seconds")
    add_launch_options(parser)
    # bench_configs reads the throughput options; the profiler's window replaces the timed steps, so these are
    # placeholders that pass BenchConfig's checks, not settings
    parser.set_defaults(run=run, warmup=0, steps=1, sync_every_step=False, windows=1, telemetry_interval=0)


def profile_configs(args: argparse.Namespace) -> tuple[ProfileConfig, list[BenchConfig]]:
    """The profiler's window and one configuration per batch size; what cannot go together (a GPU profiler on
    --device cpu, another framework's profiler) is refused as a campaign refuses it (config.problems)."""
    window = ProfileConfig(tool=args.profiler, start_iteration=args.start_iteration, iterations=args.iterations)
    return window, bench_configs(args, model_config(args), window)


def run(args: argparse.Namespace) -> int:
    window, configs = profile_configs(args)
    metrics = list(args.metrics) if args.metrics else None
    store = run_profile(window, configs, Path(args.output), lambda line: print(line, flush=True), metrics,
                        args.timeout, args.clock_control)
    print(format_fields(store.rows(), store.fields[:-1]))
    print(f"report: trainbench report {store.path}", flush=True)
    print(store.path)
    return 0 if any(result.ok for result in store.results) else 1
