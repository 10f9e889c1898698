"""A workload's trainable parameters and training FLOPs per sample, counted on the meta device: the network built,
fed a synthetic batch and stepped with shapes only, no weight or activation allocated, so an 8B model counts on a
laptop in seconds. The counts are the runners' own (``_Runner.parameters`` and ``train_flops_per_sample``): the
same builder, the same unique trainable parameters (tied weights once), the same ``flops.train_flops_per_sample``
over the builder's loss and its backward pass.

A builder whose step reads a value on the host (torchvision's RetinaNet loss: ``Tensor.item()``) cannot be stepped
on the meta device: its FLOPs are None, and ``note`` says why (the runners record them on a real device).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import builder_of, flops

META = torch.device("meta")
# Per-sample FLOPs do not depend on the batch (the runners count at theirs): one sample is the least to shape.
BATCH = 1
# What a builder or an operation on meta tensors may raise (a data-dependent read, an op with no meta kernel).
_META_ERRORS = (RuntimeError, NotImplementedError, TypeError, ValueError)


@dataclass(frozen=True)
class Counts:
    parameters: int | None  # unique trainable parameters (tied weights once); None: the network cannot be built
    train_flops_per_sample: float | None  # forward and backward of the loss, per sample; None: not countable here
    note: str  # how they were counted, or why not


def trainable_parameters(network: nn.Module) -> int:
    """Unique trainable parameters, as the runners count them (``parameters()`` yields a tied tensor once)."""
    return sum(parameter.numel() for parameter in network.parameters() if parameter.requires_grad)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def count(model: ModelConfig) -> Counts:
    """The parameters and training FLOPs per sample of ``model``'s torch network at its size and settings."""
    builder = builder_of(model)
    try:
        # Seeded as the engine builds (some initialisers draw); the caller's random state is left as it was.
        with torch.random.fork_rng(devices=[]), META:
            torch.manual_seed(model.seed)
            network = builder.build(model)
    except _META_ERRORS as error:
        return Counts(None, None, f"cannot be built on the meta device: {_first_line(error)}")
    network.train()  # dropout and batch norm as in a training step (an HF model built from a config already is)
    parameters = trainable_parameters(network)
    try:
        batch = builder.synthetic_batch(model, BATCH, META, model.seed)
    except _META_ERRORS as error:
        return Counts(parameters, None, f"no synthetic batch on the meta device: {_first_line(error)}")
    # No autocast: meta has none, and a product's FLOPs do not depend on its precision.
    counted, how = flops.train_flops_per_sample(builder, network, batch, BATCH, model.spec.optimizer.label_smoothing,
                                                contextlib.nullcontext)
    if counted is None:
        how += " (the runners count it on a real device)"
    return Counts(parameters, counted, f"on the meta device: {how}")
