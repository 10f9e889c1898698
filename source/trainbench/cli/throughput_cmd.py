"""``trainbench throughput``: samples/s of a workload's training across batch sizes."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.bench.sweep import measure_throughput
from trainbench.cli.options import add_sweep_options, bench_configs, model_config


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "throughput",
        help="measure training samples/s across batch sizes",
        description="Measure a workload's training throughput (--workload, default resnet50: images/s; sequence "
        "workloads also tokens/s; MFU on a GPU of known peak), one worker process per batch size. "
        "The last line printed is the run folder.",
    )
    add_sweep_options(parser, "throughput_data")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    configs = bench_configs(args, model_config(args))  # validates everything before a folder is made
    store = measure_throughput(configs, Path(args.output), lambda line: print(line, flush=True), args.timeout)
    print(f"report: trainbench report {store.path}", flush=True)
    print(store.path)
    return 0 if any(result.ok for result in store.results) else 1
