"""``trainbench throughput``: samples/s of a workload's training across batch sizes, or (``--max-batch``) the
largest batch size that fits (``bench.max_batch``)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from trainbench.bench.max_batch import measure_max_batch, parse_bytes
from trainbench.bench.sweep import measure_throughput
from trainbench.cli.options import add_sweep_options, bench_configs, model_config
from trainbench.config import BenchConfig
from trainbench.errors import UsageError


def memory_limit(text: str) -> int:
    """--memory-limit: bytes, plain or with a unit (argparse names the option in its one-line error)."""
    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "throughput",
        help="measure training samples/s across batch sizes",
        description="Measure a workload's training throughput (--workload, default resnet50: images/s; sequence "
        "workloads also tokens/s; MFU on a GPU of known peak), one worker process per batch size. "
        "The last line printed is the run folder.",
    )
    add_sweep_options(parser, "throughput_data")
    parser.add_argument("--max-batch", action="store_true",
                        help="search for the largest batch size that fits instead of a sweep: from the first of "
                        "--batch-sizes (default 1), doubling until a size does not fit (out of memory, or over "
                        "--memory-limit), then bisecting down to a gap of 1; each try in its own worker, all of them "
                        "in summary.json, the verdict in max_batch.json")
    parser.add_argument("--memory-limit", type=memory_limit, metavar="BYTES",
                        help="with --max-batch: a size fits only when its peak memory (peak_memory_bytes) is within "
                        "BYTES: a whole number, or with a unit: 512MiB, 24GiB (binary), 2GB or 2G (decimal)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.memory_limit is not None and not args.max_batch:
        raise UsageError("--memory-limit is the limit of --max-batch's search; add --max-batch")
    configs = bench_configs(args, model_config(args))  # validates everything before a folder is made
    if args.max_batch:
        return run_max_batch(args, configs[0])
    store = measure_throughput(configs, Path(args.output), echo, args.timeout)
    print(f"report: trainbench report {store.path}", flush=True)
    print(store.path)
    return 0 if any(result.ok for result in store.results) else 1


def echo(line: str) -> None:
    print(line, flush=True)


def run_max_batch(args: argparse.Namespace, config: BenchConfig) -> int:
    """The search from the first of --batch-sizes; 0 when it ended with a size that fits, 1 otherwise (nothing
    fits, or an error stopped it)."""
    start = args.batch_sizes[0] if args.batch_sizes else 1  # the search's own default, not the sweep's list
    if args.batch_sizes and len(args.batch_sizes) > 1:
        echo(f"--max-batch starts at the first of --batch-sizes ({start}); the others are not tried as such")
    store, search = measure_max_batch(dataclasses.replace(config, batch_size=start), Path(args.output),
                                      args.memory_limit, echo, args.timeout)
    print(f"report: trainbench report {store.path}", flush=True)
    print(store.path)
    return 0 if search.complete and search.largest_fit is not None else 1
