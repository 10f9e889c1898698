"""``trainbench throughput``: images/s of ResNet-50 training across batch sizes."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.bench.sweep import measure_throughput
from trainbench.cli.options import add_input_options, add_model_options, existing_data_dir, model_config
from trainbench.config import CPU_BATCH_SIZES, GPU_BATCH_SIZES, BenchConfig, ModelConfig, parse_batch_sizes


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "throughput",
        help="measure training images/s across batch sizes",
        description="Measure ResNet-50 training throughput, one worker process per batch size. "
        "The last line printed is the run folder.",
    )
    add_model_options(parser)
    parser.add_argument("--batch-sizes", help=f"e.g. 4,16 (default: {GPU_BATCH_SIZES} on a GPU, "
                        f"{CPU_BATCH_SIZES} on the CPU)")
    parser.add_argument("--warmup", type=int, default=10, metavar="N", help="untimed steps first (default 10)")
    parser.add_argument("--steps", type=int, default=50, metavar="N", help="timed steps per window (default 50)")
    parser.add_argument("--repeats", type=int, default=1, metavar="N",
                        help="timed windows per batch size, back to back after the warm-up: images/s median, min "
                        "and max across them, and `compare` tests them (default 1)")
    add_input_options(parser)
    parser.add_argument("--output", default="throughput_data", metavar="DIR",
                        help="a new run folder is made inside (default ./throughput_data)")
    parser.add_argument("--sync-every-step", action="store_true",
                        help="wait for the device after every step (exact per-step times, slightly slower)")
    parser.add_argument("--timeout", type=float, metavar="S", help="give up on a batch size after S seconds")
    parser.set_defaults(run=run)


def bench_configs(args: argparse.Namespace, model: ModelConfig) -> list[BenchConfig]:
    default = GPU_BATCH_SIZES if model.device == "cuda" else CPU_BATCH_SIZES
    sizes = parse_batch_sizes(args.batch_sizes) if args.batch_sizes else default
    data = existing_data_dir(args.data)
    return [
        BenchConfig(model=model, batch_size=size, warmup_steps=args.warmup, steps=args.steps, data=data,
                    sync_every_step=args.sync_every_step, repeats=args.repeats)
        for size in sizes
    ]


def run(args: argparse.Namespace) -> int:
    configs = bench_configs(args, model_config(args))  # validates everything before a folder is made
    store = measure_throughput(configs, Path(args.output), lambda line: print(line, flush=True), args.timeout)
    print(store.path)
    return 0 if any(result["status"] == "ok" for result in store.results) else 1
