"""``trainbench input-bench``: images/s of the input pipeline alone (reading, decoding, augmenting; no training)."""

from __future__ import annotations

import argparse
import json

from trainbench.bench.input_bench import InputBench, measure_input
from trainbench.cli.options import NON_NEGATIVE, POSITIVE, SEED, existing_data_dir, path_text, whole_number
from trainbench.config import FRAMEWORKS, MAX_BATCH_SIZE, MAX_IMAGE_SIZE, MAX_WORKERS
from trainbench.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "input-bench",
        help="measure the input pipeline alone in images/s",
        description="Read, decode and augment training batches from a data folder (TFRecord shards, or for "
        "PyTorch also an image-folder tree) as training would, without training: images / wall time of the "
        "timed batches, warm-up excluded. The last line printed is the result as JSON.",
    )
    parser.add_argument("data", type=path_text, metavar="DIR",
                        help="TFRecords folder (train-*) or, for torch, an image-folder tree")
    parser.add_argument("--framework", default="torch", help=f"one of {', '.join(FRAMEWORKS)} (default: torch)")
    parser.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=128, metavar="N",
                        help="images per batch (default 128)")
    parser.add_argument("--warmup", type=NON_NEGATIVE, default=5, metavar="N", help="untimed batches first (default 5)")
    parser.add_argument("--steps", type=POSITIVE, default=20, metavar="N", help="timed batches (default 20)")
    parser.add_argument("--workers", type=whole_number(0, MAX_WORKERS), metavar="N",
                        help="torch: DataLoader worker processes; tf: tf.data threads (default: all cores)")
    parser.add_argument("--image-size", type=whole_number(32, MAX_IMAGE_SIZE), default=224, metavar="PX",
                        help="square output size (default 224)")
    parser.add_argument("--seed", type=SEED, default=0)
    parser.set_defaults(run=run)


def bench_from_args(args: argparse.Namespace) -> InputBench:
    if args.framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {args.framework!r}: choose one of {', '.join(FRAMEWORKS)}")
    return InputBench(args.framework, str(existing_data_dir(args.data)), args.batch_size, args.image_size,
                      args.warmup, args.steps, args.workers, args.seed)


def run(args: argparse.Namespace) -> int:
    bench = bench_from_args(args)
    result = measure_input(bench)
    workers = "all cores" if bench.workers is None else f"{bench.workers} workers"
    print(f"input pipeline ({bench.framework}, {workers}, batch {bench.batch_size}, {bench.image_size} px): "
          f"{result['images_per_sec']:.1f} images/s ({result['images']} images in {result['seconds']:.3f} s)")
    print(json.dumps({"data": bench.data, "workers": bench.workers, **result}))
    return 0
