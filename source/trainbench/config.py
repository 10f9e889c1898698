"""Typed configurations for the jobs, instead of loose flag dictionaries.

A configuration is validated once, when it is built, so engines and workers can trust it.
"""

from __future__ import annotations

import dataclasses
import json
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


def _positive(name: str, value: int, minimum: int = 1) -> int:
    if value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value}")
    return value


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """Parse ``"4,16"`` or ``"1 2 4"`` into positive batch sizes, in the order given."""
    sizes: list[int] = []
    for token in text.replace(",", " ").split():
        try:
            size = int(token)
        except ValueError:
            raise UsageError(f"batch size {token!r} is not a whole number") from None
        sizes.append(_positive("batch size", size))
    if not sizes:
        raise UsageError("no batch sizes given")
    return tuple(sizes)


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
        _positive("image size", self.image_size, 32)
        _positive("number of classes", self.num_classes, 2)
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
        if not 0.0 <= self.momentum < 1.0:
            raise UsageError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.base_learning_rate <= 0:
            raise UsageError(f"learning rate must be positive, got {self.base_learning_rate}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise UsageError(f"label smoothing must be in [0, 1), got {self.label_smoothing}")

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
        _positive("start iteration", self.start_iteration, 0)
        _positive("profiled iterations", self.iterations)

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
        _positive("batch size", self.batch_size)
        _positive("warm-up steps", self.warmup_steps, 0)
        _positive("timed steps", self.steps)
        _positive("repeats", self.repeats)

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
        _positive("epochs", self.epochs)
        _positive("batch size", self.batch_size)
        _positive("progress interval", self.log_every)
        _positive("synthetic training examples", self.synthetic_train_examples)
        _positive("synthetic evaluation examples", self.synthetic_eval_examples)
        if self.steps_per_epoch is not None:
            _positive("steps per epoch", self.steps_per_epoch)
        if self.eval_steps is not None:
            _positive("evaluation steps", self.eval_steps)
        if self.warmup_epochs < 0:
            raise UsageError(f"warm-up epochs must not be negative, got {self.warmup_epochs}")
        if list(self.decay_epochs) != sorted(self.decay_epochs):
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
