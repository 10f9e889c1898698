"""``trainbench throughput``: images/s of ResNet-50 training across batch sizes."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.bench.sweep import measure_throughput
from trainbench.cli.options import (
    NON_NEGATIVE,
    POSITIVE,
    TIMEOUT,
    add_input_options,
    add_launch_options,
    add_model_options,
    add_telemetry_option,
    existing_data_dir,
    launch_config,
    model_config,
    path_text,
    whole_numbers,
)
from trainbench.config import (
    CPU_BATCH_SIZES,
    GPU_BATCH_SIZES,
    MAX_BATCH_SIZE,
    BenchConfig,
    ModelConfig,
    ProfileConfig,
    field_default,
)

BATCH_SIZES = whole_numbers(1, MAX_BATCH_SIZE)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "throughput",
        help="measure training images/s across batch sizes",
        description="Measure ResNet-50 training throughput, one worker process per batch size. "
        "The last line printed is the run folder.",
    )
    add_sweep_options(parser, "throughput_data")
    parser.set_defaults(run=run)


def add_sweep_options(parser: argparse.ArgumentParser, output: str) -> None:
    """What a throughput sweep is made of (model, batch sizes, steps, input, telemetry), for every command that
    runs one; ``output``: the default folder the run folders go in."""
    add_model_options(parser)
    parser.add_argument("--batch-sizes", type=BATCH_SIZES, help=f"e.g. 4,16 (default: {GPU_BATCH_SIZES} on a GPU, "
                        f"{CPU_BATCH_SIZES} on the CPU; at most {MAX_BATCH_SIZE})")
    warmup, steps, windows = (field_default(BenchConfig, name) for name in ("warmup_steps", "steps", "windows"))
    parser.add_argument("--warmup", type=NON_NEGATIVE, default=warmup, metavar="N",
                        help=f"untimed steps first (default {warmup})")
    parser.add_argument("--steps", type=POSITIVE, default=steps, metavar="N",
                        help=f"timed steps per window (default {steps})")
    parser.add_argument("--windows", "--repeats", type=POSITIVE, default=windows, metavar="N", dest="windows",
                        help="timed windows of --steps steps per batch size, back to back after the warm-up: images/s "
                        f"median, min and max across them, and `compare` tests them (default {windows}; --repeats is "
                        "its older name)")
    add_input_options(parser)
    parser.add_argument("--output", type=path_text, default=output, metavar="DIR",
                        help=f"a new run folder is made inside (default ./{output})")
    parser.add_argument("--sync-every-step", action="store_true",
                        help="wait for the device after every step (exact per-step times, slightly slower)")
    parser.add_argument("--timeout", type=TIMEOUT, metavar="S", help="give up on a batch size after S seconds")
    add_telemetry_option(parser)
    add_launch_options(parser)


def bench_configs(args: argparse.Namespace, model: ModelConfig,
                  profile: ProfileConfig | None = None) -> list[BenchConfig]:
    """One configuration per batch size; with ``profile``, the profiler's window (``trainbench profile``)."""
    default = GPU_BATCH_SIZES if model.device == "cuda" else CPU_BATCH_SIZES
    sizes = args.batch_sizes or default
    data = existing_data_dir(args.data)
    launch = launch_config(args, model, profile.tool if profile else None)
    return [
        BenchConfig(model=model, batch_size=size, warmup_steps=args.warmup, steps=args.steps, data=data,
                    loader=args.loader, sync_every_step=args.sync_every_step, windows=args.windows, profile=profile,
                    telemetry_interval_s=args.telemetry_interval, launch=launch)
        for size in sizes
    ]


def run(args: argparse.Namespace) -> int:
    configs = bench_configs(args, model_config(args))  # validates everything before a folder is made
    store = measure_throughput(configs, Path(args.output), lambda line: print(line, flush=True), args.timeout)
    print(f"report: trainbench report {store.path}", flush=True)
    print(store.path)
    return 0 if any(result.ok for result in store.results) else 1
