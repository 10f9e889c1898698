"""The interface every framework engine implements, and the rules both engines share.

The benchmark harness (``trainbench.bench``) only sees ``Engine`` and ``StepRunner``; it never imports a framework.
The functions below are framework-free on purpose, so a step count or what weight decay covers is decided by one
rule whichever framework runs (the device rules: ``engines.devices``; the builders' protocol: ``engines.builders``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from trainbench.config import BenchConfig, TrainConfig
from trainbench.frameworks import Capabilities
from trainbench.training.trainer import Trainer

# Complete checkpoints kept in a run's checkpoint folder: the newest ones, older ones deleted after each save.
CHECKPOINTS_KEPT = 3
# Adam's and AdamW's epsilon in both engines: torch's default (tf_keras' own, 1e-7, would be other arithmetic).
ADAM_EPSILON = 1e-8


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
    # Floating-point operations of one training step per sample (forward and backward; not the update), counted
    # from the model outside every window; None when it could not be counted (the reason in flops_note).
    train_flops_per_sample: float | None
    flops_note: str  # how train_flops_per_sample was counted (FlopCounterMode, TF profiler, analytic), or why not
    # The same count with what recomputation adds (--activation-checkpointing full): the FLOPs the hardware runs.
    hardware_flops_per_sample: float | None
    parameters_held: int  # trainable parameters this process holds: its shards under FSDP, else ``parameters``
    # How the step runs, as the engine set it (result fields of group STEP): matmul_precision, optimizer,
    # attention_kernel, image_layout, host_syncs_per_step, activation_checkpointing, shard.
    step_record: dict[str, str | int | None]

    def step(self) -> None:
        """Run one training step: forward, loss, backward, optimizer update. May return before the device is done."""

    def sync(self) -> None:
        """Block until the device has finished all work queued so far."""

    def take_losses(self) -> list[float]:
        """The losses of the steps run since the last call, in order, as host numbers (this synchronises: call it
        outside every window). A captured step (CUDA graph) keeps only its last loss."""

    def loss_scale(self) -> float | None:
        """fp16's dynamic loss scale now (it drops when an update is skipped); None without one."""

    def reset_peak_memory(self) -> None:
        """Start the device allocator's peak afresh (nothing to do on the CPU)."""

    def peak_memory(self) -> tuple[int | None, str]:
        """The device allocator's peak since ``reset_peak_memory`` (bytes, the highest over this process's GPUs)
        and what it reads; (None, "") on the CPU, where the harness reads the process's resident set instead."""

    def memory(self) -> MemoryBreakdown:
        """What the step holds, measured now (after the windows: the gradients and optimizer state exist)."""


@dataclass(frozen=True)
class MemoryBreakdown:
    """The memory of one training step by what holds it, in bytes (result fields of group MEMORY). None: the
    framework cannot tell, with the reason in ``note``."""

    parameters: int
    gradients: int | None
    optimizer: int | None  # everything the optimizer holds: per-parameter state and step counters
    optimizer_state: int | None  # the per-parameter state alone (momentum, Adam's moments)
    activations: int | None
    note: str = ""

    def values(self) -> dict[str, Any]:
        return {"memory_parameters_bytes": self.parameters, "memory_gradients_bytes": self.gradients,
                "memory_optimizer_bytes": self.optimizer, "optimizer_state_bytes": self.optimizer_state,
                "memory_activations_bytes": self.activations, "memory_note": self.note}


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


# --- rules shared by the engines ---------------------------------------------------------------------------------


def is_decayed(name: str, shape: tuple[int, ...]) -> bool:
    """Whether weight decay covers a parameter, in both engines and under both optimizers: weight matrices,
    embeddings and convolution kernels (rank 2 and up), never biases or normalisation scales. BERT's AdamW
    (exclude_from_weight_decay: LayerNorm, bias) and tf-models' kernel regularisers leave the latter out;
    torchvision's ResNet recipe decays them too, but one rule keeps a cross-framework comparison the same
    arithmetic. The name is asked too because TensorFlow's attention keeps its biases per head, of rank 2
    (``.../query/bias:0``, shape [heads, head size]); torch's (``...query.bias``) are of rank 1."""
    leaf = re.split(r"[/.]", name.split(":")[0])[-1]
    return len(shape) >= 2 and leaf != "bias"


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
