"""Options shared by the commands that build a model, and their conversion to typed configs."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.config import DEVICES, FRAMEWORKS, PRECISIONS, ModelConfig
from trainbench.data.source import num_classes, open_source, tfrecords_only
from trainbench.errors import UsageError
from trainbench.telemetry.nvml import visible_gpu_count


class Parser(argparse.ArgumentParser):
    """argparse whose errors are UsageErrors: one line on stderr and exit 2, like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def add_model_options(parser: argparse.ArgumentParser) -> None:
    # choices are checked by ModelConfig so the message is ours; argparse would print its usage block
    parser.add_argument("--framework", default="torch", help=f"one of {', '.join(FRAMEWORKS)} (default: torch)")
    parser.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)} (default: fp32)")
    parser.add_argument("--device", default="auto", help=f"one of {', '.join(DEVICES)} (default: auto)")
    parser.add_argument("--image-size", type=int, default=224, metavar="PX", help="square input size (default 224)")
    parser.add_argument("--num-classes", type=int,
                        help="classifier outputs (default: the data's classes with --data, else 1000)")
    parser.add_argument("--xla", action="store_true", help="TensorFlow: compile the training step with XLA")
    parser.add_argument("--compile", action="store_true", help="PyTorch: torch.compile the model")
    parser.add_argument("--channels-last", action="store_true", help="PyTorch: NHWC memory layout")
    parser.add_argument("--seed", type=int, default=0)


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """Synthetic batches or real TFRecords: the benchmark and the profiler feed the model the same way."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", action="store_true", help="random batches made on the device (default)")
    source.add_argument("--data", metavar="DIR", help="TFRecords folder (real input)")


def resolve_device(requested: str) -> str:
    """'auto' becomes 'cuda' or 'cpu' by the GPUs visible; asking for 'cuda' without one is a usage error."""
    if requested not in DEVICES:
        raise UsageError(f"unknown device {requested!r}: choose one of {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu"
    gpus = visible_gpu_count()
    if requested == "cuda" and gpus == 0:
        raise UsageError("--device cuda: no GPU is visible here (check the driver and CUDA_VISIBLE_DEVICES)")
    return "cuda" if gpus else "cpu"


def _num_classes(args: argparse.Namespace) -> int:
    """As given; else, with --data, the data's classes; else ImageNet's 1000. Refuses data TensorFlow cannot read."""
    data = getattr(args, "data", None)
    source = open_source(data) if data is not None else None
    if source is not None and args.framework == "tf":
        tfrecords_only(source)
    if args.num_classes is not None:
        return args.num_classes
    return num_classes(source) if source is not None else 1000


def model_config(args: argparse.Namespace) -> ModelConfig:
    return ModelConfig(
        framework=args.framework,
        precision=args.precision,
        image_size=args.image_size,
        num_classes=_num_classes(args),
        device=resolve_device(args.device),
        xla=args.xla,
        compile=args.compile,
        channels_last=args.channels_last,
        seed=args.seed,
    )


def existing_data_dir(path: str | None) -> str | None:
    """A data folder given by the user, as an absolute path (workers and resumed runs may start elsewhere): TFRecord
    shards (train-*, validation-*) or an image-folder tree; anything else is a UsageError naming it."""
    if path is None:
        return None
    open_source(path)
    return str(Path(path).resolve())
