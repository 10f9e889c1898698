"""Options shared by the commands that build a model, and their conversion to typed configs."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from trainbench import workloads
from trainbench.bench.launch import local_process_problem
from trainbench.config import (
    ACTIVATION_CHECKPOINTINGS,
    COMPILE_MODES,
    CPU_BATCH_SIZES,
    DEVICES,
    FRAMEWORKS,
    GPU_BATCH_SIZES,
    LOADERS,
    MATMUL_PRECISIONS,
    MAX_BATCH_SIZE,
    MAX_COUNT,
    MAX_PROCESSES,
    MAX_SEED,
    OPTIMIZERS,
    PRECISIONS,
    SHARDS,
    BenchConfig,
    LaunchConfig,
    ModelConfig,
    OptimizerConfig,
    ProfileConfig,
    field_default,
    float_problem,
    int_problem,
    model_config_from,
    problems,
    refuse,
    telemetry_interval_problem,
    workload_problems,
)
from trainbench.data.model_data import with_data
from trainbench.data.source import open_source
from trainbench.engines.devices import resolve_device_here
from trainbench.errors import UsageError
from trainbench.workloads import settings as shape_settings

# --- option types: every number and list is checked where it is parsed, so the error names the option ---------
# argparse turns an ArgumentTypeError into "argument --steps: <message>". The bounds are config.py's checks, the
# ones the configurations themselves apply.

Number = TypeVar("Number", int, float)


def _within(value: Number, problem: str | None) -> Number:
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def whole_number(minimum: int, maximum: int = MAX_COUNT) -> Callable[[str], int]:
    """An argparse type: a whole number in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        return _within(value, int_problem(value, minimum, maximum))

    parse.__name__ = "whole number"
    return parse


def real_number(minimum: float, maximum: float = math.inf, *, above: bool = False,
                below: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number within the bounds (``above``/``below``: the bound itself excluded)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        return _within(value, float_problem(value, minimum, maximum, above=above, below=below))

    parse.__name__ = "number"
    return parse


def whole_numbers(minimum: int, maximum: int = MAX_COUNT, *,
                  increasing: bool = False) -> Callable[[str], tuple[int, ...]]:
    """An argparse type: "4,16" or "1 2 4" as distinct whole numbers in [minimum, maximum], in the order given
    (which must be increasing where ``increasing``)."""
    item = whole_number(minimum, maximum)

    def parse(text: str) -> tuple[int, ...]:
        values = tuple(item(word) for word in _items(text))
        repeated = sorted({value for value in values if values.count(value) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{repeated[0]} is given more than once in {text!r}")
        if increasing and list(values) != sorted(values):
            raise argparse.ArgumentTypeError(f"must be increasing, got {text!r}")
        return values

    parse.__name__ = "list"
    return parse


def names(text: str) -> tuple[str, ...]:
    """An argparse type: "a,b" as non-empty names."""
    return _items(text)


def path_text(text: str) -> str:
    """An argparse type: a file or folder path; "" would silently mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a path is needed, got an empty string")
    return text


def _items(text: str) -> tuple[str, ...]:
    """Items separated by commas and/or white space; an empty list or an empty item (``4,,8``) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("at least one value is needed, got an empty string")
    items = tuple(re.split(r"\s*,\s*|\s+", text.strip()))
    if "" in items:
        raise argparse.ArgumentTypeError(f"empty item in {text!r}")
    return items


SEED = whole_number(0, MAX_SEED)
POSITIVE = whole_number(1)
NON_NEGATIVE = whole_number(0)
TIMEOUT = real_number(0.0, above=True)


def telemetry_interval(text: str) -> float:
    """--telemetry-interval: 0 (no timeline) or a sampling period in seconds, with BenchConfig's bounds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    problem = telemetry_interval_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    """Several processes measuring together (PyTorch: torchrun, DDP)."""
    parser.add_argument("--gpus", type=whole_number(1, MAX_PROCESSES), default=1, metavar="N",
                        help="PyTorch: N processes on this node, one per GPU, launched by torchrun (DDP; on the CPU: "
                        "N processes with gloo); the batch size is per process (default 1)")
    parser.add_argument("--nodes", type=whole_number(1, MAX_PROCESSES), default=1, metavar="M",
                        help="PyTorch: nodes running this same command together (with --rdzv-endpoint; see "
                        "scripts/slurm/); TensorFlow: recorded, its workers come from TF_CONFIG or Slurm (default 1)")
    parser.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="the c10d rendezvous every node can reach")
    parser.add_argument("--rdzv-id", metavar="ID", help="the job's rendezvous name (default: $SLURM_JOB_ID)")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="start more processes than this node has GPUs (--device cuda) or cores (--device cpu)")
    parser.add_argument("--torchrun", action="store_true",
                        help="PyTorch: launch through torchrun and DDP even with --gpus 1 (to compare with the plain "
                        "path)")
    add_choice_option(parser, "--shard", SHARDS, field_default(ModelConfig, "shard"),
                      "PyTorch under torchrun: ddp keeps a replica of the model in every process; fsdp shards "
                      "parameters, gradients and optimizer state (FSDP2 per block, bf16 parameters with fp32 "
                      "reductions under --precision bf16)")


def launch_config(args: argparse.Namespace, model: ModelConfig, profiler: str | None = None) -> LaunchConfig:
    """The launch the options ask for, refused when it cannot run with the other settings (config.problems, asked
    as a campaign asks it: on the device as given, with the launch, ``profiler``, loader and data) or on this
    machine."""
    launch = LaunchConfig(processes_per_node=args.gpus, nodes=args.nodes, rdzv_endpoint=args.rdzv_endpoint,
                          rdzv_id=args.rdzv_id, torchrun=args.torchrun)
    refuse(problems(model, device=args.device, launch=launch, profiler=profiler, loader=args.loader, data=args.data))
    if problem := launch.rendezvous_problem(model.framework):
        raise UsageError(problem)
    if not args.oversubscribe and (problem := local_process_problem(launch, model.device)):
        raise UsageError(f"--gpus {launch.processes_per_node}: {problem} (--oversubscribe starts them anyway)")
    return launch


def add_telemetry_option(parser: argparse.ArgumentParser) -> None:
    default = field_default(BenchConfig, "telemetry_interval_s")
    parser.add_argument("--telemetry-interval", type=telemetry_interval, default=default, metavar="S",
                        help=f"sample the GPUs' clocks, power and temperature every S seconds into "
                        f"telemetry/batch_<X>.csv; 0: no timeline (energy is still read; default {default})")


def add_choice_option(parser: argparse.ArgumentParser, option: str, allowed: tuple[str, ...], default: str,
                      what: str = "") -> None:
    """A name from ``allowed``, checked by the configuration built from it so the message is ours (argparse's
    ``choices`` would print its usage block)."""
    parser.add_argument(option, default=default,
                        help=f"{what + ': ' if what else ''}one of {', '.join(allowed)} (default: {default})")


def _param_help(name: str) -> str:
    """"default: resnet50 224 (tiny 64)": each workload's default of a shape setting, at both sizes."""
    defaults = [f"{w.name} {w.default(name)}" + (f" (tiny {w.default(name, 'tiny')})"
                                                  if w.default(name, "tiny") != w.default(name) else "")
                for w in workloads.all_workloads() if name in w.params]
    return f"default: {', '.join(defaults)}; refused by the other workloads"


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """What is trained: the workload, its size and its shape settings, one option each as ``workloads.settings``
    declares them (None: the workload's default at its size, or with --data the data's classes: see with_data; a
    setting the workload does not have is refused by ModelConfig, in one line)."""
    add_choice_option(parser, "--workload", workloads.names(), field_default(ModelConfig, "workload"),
                      "what to train (trainbench workloads lists them)")
    add_choice_option(parser, "--size", workloads.size_names(), field_default(ModelConfig, "size"),
                      "the published network, or a small one of the same structure for CPU tests")
    for setting in shape_settings.SETTINGS:
        note = f"{setting.option_note}; " if setting.option_note else ""
        parser.add_argument(setting.option, type=whole_number(*shape_settings.checked_bounds(setting.name)),
                            metavar=setting.metavar, help=f"{setting.option_help} ({note}{_param_help(setting.name)})")


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """ModelConfig's settings, with its defaults."""
    add_choice_option(parser, "--framework", FRAMEWORKS, field_default(ModelConfig, "framework"))
    add_workload_options(parser)
    add_choice_option(parser, "--precision", PRECISIONS, field_default(ModelConfig, "precision"))
    add_choice_option(parser, "--device", DEVICES, field_default(ModelConfig, "device"))
    parser.add_argument("--xla", action="store_true", help="TensorFlow: compile the training step with XLA")
    parser.add_argument("--compile", nargs="?", const="default", metavar="MODE",
                        help="PyTorch: torch.compile the model, in MODE: one of "
                        f"{', '.join(COMPILE_MODES)} (default mode: default; reduce-overhead and max-autotune "
                        "replay CUDA graphs); compiling is timed apart, before the warm-up")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="PyTorch on a GPU: capture the whole eager step as one CUDA graph and replay it "
                        "(throughput and profile runs)")
    parser.add_argument("--channels-last", action="store_true",
                        help="PyTorch: NHWC memory layout (default NCHW, PyTorch's; TensorFlow's is NHWC)")
    parser.add_argument("--seed", type=SEED, default=field_default(ModelConfig, "seed"))
    add_choice_option(parser, "--matmul-precision", MATMUL_PRECISIONS, field_default(ModelConfig, "matmul_precision"),
                      "fp32's matrix products and convolutions, set the same in both frameworks: highest keeps them "
                      "fp32, high lets them use TF32 where the GPU has it (TensorFlow's own default)")
    add_choice_option(parser, "--activation-checkpointing", ACTIVATION_CHECKPOINTINGS,
                      field_default(ModelConfig, "activation_checkpointing"),
                      "PyTorch, transformer workloads: full keeps only each block's input and runs the block's "
                      "forward again in the backward pass (less memory, more FLOPs: hfu beside mfu)")


def add_optimizer_option(parser: argparse.ArgumentParser) -> None:
    """The optimizer a timed step updates with: the workload's reference unless asked (OptimizerConfig.reference)."""
    references = ", ".join(f"{workload.name} {workload.optimizer.name}" for workload in workloads.all_workloads())
    parser.add_argument("--optimizer", metavar="NAME",
                        help=f"one of {', '.join(OPTIMIZERS)} (default: the workload's reference: {references}); "
                        "fused on a GPU")


# What --data accepts (trainbench.data.source.open_source): TensorFlow reads shards only (tfrecords_only).
DATA_DIR_HELP = "TFRecords folder (train-*) or, for torch, an image-folder tree"


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """Synthetic batches or a data folder: the benchmark and the profiler feed the model the same way."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", action="store_true", help="random batches made on the device (default)")
    source.add_argument("--data", type=path_text, metavar="DIR", help=f"real input: {DATA_DIR_HELP}")
    add_loader_option(parser)


def add_loader_option(parser: argparse.ArgumentParser) -> None:
    add_choice_option(parser, "--loader", LOADERS, field_default(BenchConfig, "loader"),
                      "PyTorch with --data: decode and augment in CPU worker processes, or on the GPU (nvJPEG)")


def model_config(args: argparse.Namespace) -> ModelConfig:
    """The model the options ask for, on the device this machine offers (``--device auto`` resolved here). The
    workload's refusals (a framework it lacks, a setting it does not have, --data it cannot read) come first, as
    one line, before the data folder is opened."""
    model = model_config_from({**vars(args), "device": resolve_device_here(args.device)})
    data = getattr(args, "data", None)
    refuse([problem for problem in workload_problems(model, data) if problem])
    return with_data(model, data)


def existing_data_dir(path: str | None) -> str | None:
    """A data folder given by the user, as an absolute path (workers and resumed runs may start elsewhere): TFRecord
    shards (train-*, validation-*) or an image-folder tree; anything else is a UsageError naming it."""
    if path is None:
        return None
    open_source(path)
    return str(Path(path).resolve())


# What a throughput sweep is made of, shared by every command that runs one (throughput, profile, variability).
BATCH_SIZES = whole_numbers(1, MAX_BATCH_SIZE)


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
                        help="timed windows of --steps steps per batch size, back to back after the warm-up: "
                        "samples/s (in the workload's unit) median, min and max across them, and `compare` tests them "
                        f"(default {windows}; --repeats is its older name)")
    add_optimizer_option(parser)
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
        BenchConfig(model=model, batch_size=size, optimizer=OptimizerConfig.reference(model.workload, args.optimizer),
                    warmup_steps=args.warmup, steps=args.steps, data=data,
                    loader=args.loader, sync_every_step=args.sync_every_step, windows=args.windows, profile=profile,
                    telemetry_interval_s=args.telemetry_interval, launch=launch)
        for size in sizes
    ]
