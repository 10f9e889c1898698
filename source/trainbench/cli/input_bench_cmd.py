"""``trainbench input-bench``: images/s of the input pipeline alone (reading, decoding, augmenting; no training)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from trainbench import workloads
from trainbench.bench.input_bench import InputBench, measure_input
from trainbench.cli.options import (
    DATA_DIR_HELP,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    add_choice_option,
    add_loader_option,
    existing_data_dir,
    path_text,
    whole_number,
    with_data,
)
from trainbench.config import (
    FRAMEWORKS,
    MAX_BATCH_SIZE,
    MAX_IMAGE_SIZE,
    MAX_WORKERS,
    MIN_IMAGE_SIZE,
    PARAM_FIELDS,
    ModelConfig,
    field_default,
    model_config_from,
    refuse,
    workload_problems,
)
from trainbench.frameworks import capabilities_of
from trainbench.render.console import per_second
from trainbench.workloads.settings import named, shape_words


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "input-bench",
        help="measure the input pipeline alone in images/s",
        description="Read, decode and augment training batches from a data folder (TFRecord shards, or for "
        "PyTorch also an image-folder tree) as training would, without training: images / wall time of the "
        "timed batches, warm-up excluded. The last line printed is the result as JSON.",
    )
    parser.add_argument("data", type=path_text, metavar="DIR", help=DATA_DIR_HELP)
    add_choice_option(parser, "--framework", FRAMEWORKS, field_default(ModelConfig, "framework"))
    add_choice_option(parser, "--workload", workloads.names(), field_default(ModelConfig, "workload"),
                      "whose input to read (only workloads that read --data have an input pipeline)")
    add_choice_option(parser, "--size", workloads.size_names(), field_default(ModelConfig, "size"))
    seq_len, image_size = named("seq_len"), named("image_size")  # InputBench's own two: text and image pipelines
    parser.add_argument(seq_len.option, type=POSITIVE, metavar=seq_len.metavar,
                        help="text: tokens per sequence (default: the data's; translation pairs are padded to it)")
    batch_size, warmup, steps, image_default = (field_default(InputBench, name)
                                                for name in ("batch_size", "warmup", "steps", image_size.name))
    parser.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=batch_size, metavar="N",
                        help=f"images per batch (default {batch_size})")
    parser.add_argument("--warmup", type=NON_NEGATIVE, default=warmup, metavar="N",
                        help=f"untimed batches first (default {warmup})")
    parser.add_argument("--steps", type=POSITIVE, default=steps, metavar="N", help=f"timed batches (default {steps})")
    parser.add_argument("--workers", type=whole_number(0, MAX_WORKERS), default=field_default(InputBench, "workers"),
                        metavar="N",
                        help="torch: DataLoader worker processes; tf: tf.data threads (default: all cores)")
    parser.add_argument(image_size.option, type=whole_number(MIN_IMAGE_SIZE, MAX_IMAGE_SIZE),
                        metavar=image_size.metavar, help=f"square output size of image workloads (default "
                        f"{image_default}); refused for the others, as throughput and train refuse it")
    parser.add_argument("--seed", type=SEED, default=field_default(InputBench, "seed"))
    add_loader_option(parser)
    parser.set_defaults(run=run)


def workload_problem(args: argparse.Namespace) -> ModelConfig:
    """The workload's refusals, in one line, before the folder is looked at: one without an input pipeline (it runs
    on synthetic data only), a framework it lacks, a shape setting it does not have. Returns its model."""
    model = model_config_from({"framework": args.framework, "workload": args.workload, "size": args.size,
                               **{name: getattr(args, name, None) for name in PARAM_FIELDS}, "device": "cpu"})
    refuse([problem for problem in workload_problems(model, args.data) if problem])
    return model


def bench_from_args(args: argparse.Namespace) -> InputBench:
    """InputBench checks the settings, then the folder is looked at: a wrong framework is named before the folder,
    then a folder the workload cannot read (``with_data``: its record kind, vocabulary, sequence length)."""
    model = workload_problem(args)
    image_size = field_default(InputBench, "image_size") if args.image_size is None else args.image_size
    bench = InputBench(args.framework, args.data, args.batch_size, image_size, args.warmup, args.steps,
                       args.workers, args.seed, args.loader, model.workload, args.seq_len)
    bench = dataclasses.replace(bench, data=str(existing_data_dir(bench.data)))
    if model.spec.image_input:  # the image pipeline reads images of any folder; it has no other setting
        return bench
    return dataclasses.replace(bench, seq_len=with_data(model, bench.data).seq_len)


def run(args: argparse.Namespace) -> int:
    bench = bench_from_args(args)
    result = measure_input(bench)
    workers = "all cores" if bench.workers is None else f"{bench.workers} workers"
    choice_of_loaders = len(capabilities_of(bench.framework).loaders) > 1  # TensorFlow has tf.data only
    loader = f", {bench.loader} loader" if choice_of_loaders else ""
    unit = workloads.get(bench.workload).sample_unit
    shape = " ".join(shape_words(result, "amount"))  # "64 px", "128 tokens": the result holds the one it had
    tokens = f", {result['tokens_per_sec']:.0f} tokens/s" if "tokens_per_sec" in result else ""
    print(f"input pipeline ({bench.framework}{loader}, {workers}, batch {bench.batch_size}, {shape}): "
          f"{result['samples_per_sec']:.1f} {per_second(unit)}{tokens} ({result['samples']} {unit}s in "
          f"{result['seconds']:.3f} s)")
    print(json.dumps({"data": bench.data, "workers": bench.workers, **result}))
    return 0
