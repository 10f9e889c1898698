"""The interface every framework engine implements, and the rules both engines share.

The benchmark harness (``trainbench.bench``) only sees ``Engine`` and ``StepRunner``; it never imports a framework.
The functions below are framework-free on purpose: each engine passes in what its framework sees (its GPU count),
so a device, a step count or a refusal is decided by one rule whichever framework runs.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, NamedTuple, Protocol

from trainbench.config import (
    DEVICES,
    BenchConfig,
    Device,
    ModelConfig,
    Precision,
    TrainConfig,
    choice,
    problems,
    refuse,
)
from trainbench.engines.capabilities import Capabilities
from trainbench.errors import UsageError
from trainbench.telemetry.nvml import visible_gpu_count
from trainbench.training.trainer import Trainer

# Complete checkpoints kept in a run's checkpoint folder: the newest ones, older ones deleted after each save.
CHECKPOINTS_KEPT = 3


class StepRunner(Protocol):
    """A compiled training step over a fixed input source, ready to be timed."""

    # Samples one step trains on (images, sequences, sentence pairs), as each engine counts them today: TF all
    # replicas, torch this process (the sweep counts the world). What samples/s counts.
    samples_per_step: int
    tokens_per_step: int | None  # tokens in those samples (sequence workloads); None: the workload has none
    # Seconds spent compiling or capturing the step before any window (torch --compile, --cuda-graph); None when
    # the step is not prepared ahead (TensorFlow traces in the warm-up, which no window holds either).
    compile_s: float | None
    parameters: int  # trainable parameters of the network, counted from the built model
    # Floating-point operations of one training step per sample (forward, backward, update), counted from the
    # model outside every window; None when it could not be counted (the reason in flops_note).
    train_flops_per_sample: float | None
    flops_note: str  # how train_flops_per_sample was counted (FlopCounterMode, TF profiler, analytic), or why not

    def step(self) -> None:
        """Run one training step: forward, loss, backward, optimizer update. May return before the device is done."""

    def sync(self) -> None:
        """Block until the device has finished all work queued so far."""


Batch = tuple[Any, Any]  # (inputs, targets): tensors or dicts of tensors of fixed shapes


class WorkloadBuilder(Protocol):
    """What a workload brings to one engine (engines/<framework>_workloads/<name>.py defines BUILDER; the
    descriptor's ``builders`` names that module). The engine keeps precision, compile/XLA, CUDA graphs, DDP or
    strategies and synchronisation; the builder brings what is about the network. Typed with Any so that this
    module imports no framework."""

    def build(self, model: ModelConfig) -> Any:
        """The network, from model.seed, at model.size (dims from model.spec.dims(model.size)) and model.params()."""

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        """One batch of random inputs and targets of fixed shapes, made on the device outside every window."""

    def loss(self, network: Any, batch: Batch, smoothing: float) -> Any:
        """Forward pass and mean training loss over the batch; the engine adds autocast or tape and the update."""


def builder_of(model: ModelConfig) -> Any:
    """The workload's builder for the model's framework: the module its descriptor names, imported here, in the
    worker (descriptors import no framework). Each engine types it as its own builder protocol."""
    return importlib.import_module(model.spec.builders[model.framework]).BUILDER


class Engine(Protocol):
    name: str
    capabilities: Capabilities  # what the harness knows of this framework without importing it (its static record)

    def versions(self) -> dict[str, Any]:
        """Framework, CUDA and cuDNN versions and the devices the framework sees, for env.json."""

    def make_runner(self, config: BenchConfig) -> StepRunner:
        """Build the network, optimizer and input (synthetic, or the data folder's training split) for one batch
        size."""

    def make_trainer(self, config: TrainConfig) -> Trainer:
        """Build the network, optimizer and the training and evaluation input for end-to-end training."""


# --- rules shared by the engines (and the command line) ---------------------------------------------------------


def resolve_device(requested: str, gpu_count: int, seen_by: str) -> Device:
    """'auto' -> 'cuda' when ``seen_by`` (a framework, the driver) sees a GPU, else 'cpu'; 'cuda' without a GPU and
    an unknown name are UsageErrors."""
    device = choice("device", requested, DEVICES)
    if device == "auto":
        return "cuda" if gpu_count > 0 else "cpu"
    if device == "cuda" and gpu_count <= 0:
        raise UsageError(f"--device cuda: {seen_by} sees no GPU; use --device cpu or auto")
    return device


def resolve_device_here(requested: str) -> Device:
    """The device as the driver offers it on this machine (NVML, after CUDA_VISIBLE_DEVICES), before any framework
    loads: for the command line and for each run of a campaign (on the node it runs on)."""
    gpus = visible_gpu_count() if requested in ("auto", "cuda") else 0  # NVML only where the answer needs it
    return resolve_device(requested, gpus, "the driver (NVML, after CUDA_VISIBLE_DEVICES)")


def check_precision(precision: Precision, device: str) -> None:
    """config.problems' precision rule (fp16 needs a GPU) on the device 'auto' resolved to: ModelConfig judged an
    explicit --device cpu when it was built."""
    refuse(problems(ModelConfig(precision=precision), device=device))


def steps_for(examples: int, global_batch: int, given: int | None) -> int:
    """Steps per epoch or per evaluation: as given, else one pass over ``examples`` (the last batch may be short)."""
    return given or math.ceil(examples / global_batch)


class Span(NamedTuple):
    """Consecutive examples of the learnable synthetic set (``trainbench.data.synthetic.learnable_examples``)."""

    start: int
    size: int


def synthetic_split(config: TrainConfig) -> tuple[Span, Span]:
    """The training and the evaluation examples of the synthetic set. Evaluation takes the indices right after the
    training ones: the same seed, hence the same class colours, but never an example trained on."""
    train = Span(0, config.synthetic_train_examples)
    return train, Span(train.size, config.synthetic_eval_examples)
