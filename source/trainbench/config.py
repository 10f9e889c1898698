"""Typed configurations for the jobs, instead of loose flag dictionaries.

A configuration is validated once, when it is built, so engines and workers can trust it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trainbench.errors import UsageError

Framework = Literal["tf", "torch"]
Precision = Literal["fp32", "fp16", "bf16"]
Device = Literal["auto", "cpu", "cuda"]

FRAMEWORKS: tuple[str, ...] = ("tf", "torch")
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
PROFILERS: tuple[str, ...] = ("ncu", "nsys", "nvprof", "torch", "tf")

# The original suite's sweep on a GPU; the CPU default is short so a laptop finishes in minutes.
GPU_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 96, 128)
CPU_BATCH_SIZES: tuple[int, ...] = (1, 2, 4)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"unknown {name} {value!r}: choose one of {', '.join(allowed)}")
    return value


# Upper bounds: far beyond any real run, low enough that a typo fails at once with one line instead of looping for
# hours or overflowing a framework's integer shapes.
# 2**24 images are 206 GB of fp32 input even at 32 px, beyond any one device; published ImageNet global batches stop
# near 64k. Up to this bound a batch that cannot be allocated is a recorded allocation failure, not a refusal.
MAX_BATCH_SIZE = 2**24
MAX_COUNT = 10**9  # steps, iterations, epochs, repeats, examples: 10**9 steps of any size would take years
MAX_IMAGE_SIZE = 4096
MAX_NUM_CLASSES = 2**20
MAX_SEED = 2**32 - 1  # numpy's and TensorFlow's seeds are unsigned 32-bit
MAX_WORKERS = 1024  # input pipeline processes or threads


def int_problem(value: int, minimum: int, maximum: int = MAX_COUNT) -> str | None:
    """What is wrong with a whole number given for a setting, or None when it is within [minimum, maximum]."""
    if minimum <= value <= maximum:
        return None
    return f"must be a whole number from {minimum} to {maximum}, got {value}"


def float_problem(value: float, minimum: float, maximum: float = math.inf, *, above: bool = False,
                  below: bool = False) -> str | None:
    """What is wrong with a number given for a setting, or None when it is finite and within the bounds
    (``above``/``below``: the bound itself is excluded). NaN compares false to everything, so it is caught here."""
    low_ok = value > minimum if above else value >= minimum
    high_ok = value < maximum if below else value <= maximum
    if math.isfinite(value) and low_ok and high_ok:
        return None
    bounds = [f"{'above' if above else 'at least'} {minimum:g}"]
    if math.isfinite(maximum):
        bounds.append(f"{'below' if below else 'at most'} {maximum:g}")
    return f"must be a finite number {' and '.join(bounds)}, got {value}"


def _check(name: str, problem: str | None) -> None:
    if problem is not None:
        raise UsageError(f"{name} {problem}")


def _whole(name: str, value: int, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    _check(name, int_problem(value, minimum, maximum))
    return value


@dataclass(frozen=True)
class ModelConfig:
    """What is trained and how: shared by the throughput benchmark and end-to-end training."""

    framework: str = "torch"
    precision: str = "fp32"
    image_size: int = 224
    num_classes: int = 1000
    device: str = "auto"
    xla: bool = False  # TensorFlow: jit_compile the training step
    compile: bool = False  # PyTorch: torch.compile the model
    channels_last: bool = False  # PyTorch: NHWC memory layout
    seed: int = 0

    def __post_init__(self) -> None:
        _choice("framework", self.framework, FRAMEWORKS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("device", self.device, DEVICES)
        _whole("image size", self.image_size, 32, MAX_IMAGE_SIZE)
        _whole("number of classes", self.num_classes, 2, MAX_NUM_CLASSES)
        _whole("seed", self.seed, 0, MAX_SEED)
        if self.precision == "fp16" and self.device == "cpu":
            raise UsageError("fp16 needs a GPU; use --precision bf16 or fp32 on the CPU")


@dataclass(frozen=True)
class OptimizerConfig:
    """SGD with momentum, as the original suite trained ResNet-50."""

    momentum: float = 0.9
    base_learning_rate: float = 0.1  # per 256 images; scaled linearly with the global batch
    weight_decay: float = 1e-4
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        _check("momentum", float_problem(self.momentum, 0.0, 1.0, below=True))
        _check("learning rate", float_problem(self.base_learning_rate, 0.0, above=True))
        _check("weight decay", float_problem(self.weight_decay, 0.0))
        _check("label smoothing", float_problem(self.label_smoothing, 0.0, 1.0, below=True))

    def learning_rate(self, global_batch: int) -> float:
        return self.base_learning_rate * global_batch / 256


@dataclass(frozen=True)
class ProfileConfig:
    """Which profiler covers which iterations: exactly [start_iteration, start_iteration + iterations)."""

    tool: str
    start_iteration: int = 1  # iterations before it run unprofiled (cuDNN autotuning, allocator warm-up)
    iterations: int = 5
    trace_dir: str | None = None  # torch / tf: where the framework profiler writes its trace

    def __post_init__(self) -> None:
        _choice("profiler", self.tool, PROFILERS)
        _whole("start iteration", self.start_iteration, 0)
        _whole("profiled iterations", self.iterations)

    @property
    def stop_iteration(self) -> int:
        """The first iteration after the window."""
        return self.start_iteration + self.iterations


@dataclass(frozen=True)
class BenchConfig:
    """One throughput measurement: a model configuration at one batch size."""

    model: ModelConfig
    batch_size: int
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    warmup_steps: int = 10
    steps: int = 50
    data: str | None = None  # None: synthetic batches generated on the device
    sync_every_step: bool = False
    repeats: int = 1  # timed windows of ``steps`` steps each, back to back after one warm-up: a spread of images/s
    profile: ProfileConfig | None = None  # set: run the profiler's window instead of a timed measurement

    def __post_init__(self) -> None:
        _whole("batch size", self.batch_size, 1, MAX_BATCH_SIZE)
        _whole("warm-up steps", self.warmup_steps, 0)
        _whole("timed steps", self.steps)
        _whole("repeats", self.repeats)

    @property
    def data_label(self) -> str:
        return "synthetic" if self.data is None else self.data


@dataclass(frozen=True)
class TrainConfig:
    """End-to-end training with the original suite's defaults (90 epochs, global batch 384)."""

    model: ModelConfig
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(label_smoothing=0.1))
    epochs: int = 90
    batch_size: int = 384  # global: split evenly over the GPUs
    warmup_epochs: float = 5.0
    decay_epochs: tuple[int, ...] = (30, 60, 80)  # learning rate x decay_factor at each
    decay_factor: float = 0.1
    data: str | None = None  # None: a fixed synthetic data set (see trainbench.data.synthetic)
    synthetic_train_examples: int = 1281  # one thousandth of ImageNet's training set
    synthetic_eval_examples: int = 50
    steps_per_epoch: int | None = None  # None: one pass over the training set
    eval_steps: int | None = None  # None: one pass over the evaluation set
    output: str = "train_data"
    resume: bool = False
    log_every: int = 100

    def __post_init__(self) -> None:
        _whole("epochs", self.epochs)
        _whole("batch size", self.batch_size, 1, MAX_BATCH_SIZE)
        _whole("progress interval", self.log_every)
        _whole("synthetic training examples", self.synthetic_train_examples)
        _whole("synthetic evaluation examples", self.synthetic_eval_examples)
        if self.steps_per_epoch is not None:
            _whole("steps per epoch", self.steps_per_epoch)
        if self.eval_steps is not None:
            _whole("evaluation steps", self.eval_steps)
        _check("warm-up epochs", float_problem(self.warmup_epochs, 0.0, MAX_COUNT))
        for epoch in self.decay_epochs:
            _whole("decay epoch", epoch, 0)
        if list(self.decay_epochs) != sorted(set(self.decay_epochs)):
            raise UsageError(f"decay epochs must be increasing, got {self.decay_epochs}")


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def bench_config_from_dict(raw: dict[str, Any]) -> BenchConfig:
    raw = dict(raw)
    raw["model"] = ModelConfig(**raw["model"])
    raw["optimizer"] = OptimizerConfig(**raw["optimizer"])
    if raw.get("profile") is not None:
        raw["profile"] = ProfileConfig(**raw["profile"])
    return BenchConfig(**raw)


def save_json(config: Any, path: Path) -> None:
    path.write_text(json.dumps(to_dict(config), indent=2, sort_keys=True))
