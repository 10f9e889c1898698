"""What a workload brings to an engine: its builder's protocol, the batch it makes, and how the engine finds it.

Framework-free (typed with Any): the descriptors name the builder modules, which import their framework only when
an engine loads them, in a worker.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from trainbench.config import ModelConfig

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
