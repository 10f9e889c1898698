"""The PyTorch builders of the registered workloads: one module per workload defining ``BUILDER``, a class that
satisfies ``TorchBuilder``, named by the descriptor's ``builders["torch"]`` and imported only by the torch engine,
so a descriptor never loads torch. The engine makes one builder per run (``builder_of``): nothing a builder keeps
outlives its run.

A builder brings what is about the network: the module at the descriptor's dims, its batches (synthetic, from the
learnable token set, from converted records), the loss and what evaluation reads. The engine keeps precision
(autocast, GradScaler), torch.compile, CUDA graphs, DDP and synchronisation.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.builders import builder_class

Batch = Any  # (inputs, targets): tensors, or tuples and dicts of them, of fixed shapes


class TorchBuilder(Protocol):
    """What a workload brings to the torch engine; mypy checks every builder module's ``BUILDER`` against it."""

    def build(self, model: ModelConfig) -> nn.Module:
        """The network, from model.seed, at model.size (dims from model.spec.dims(model.size)) and model.params()."""

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """One batch of random inputs and targets of fixed shapes, made on the device outside every window."""

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """Forward pass and the training criterion over the batch (a scalar); the engine adds autocast and the
        update."""

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inference on an evaluation batch of B examples: (the training criterion per example [B], scores [N, C]
        of the N predictions the batch holds, their true classes [N]), as TensorFlow's builders answer. The scores
        rank the classes (logits or probabilities) for top-k."""

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        """A training batch from int64 sequences [B, seq_len] of the learnable token set (``learnable_sequences``);
        ``examples`` are their indices in the set, which seed whatever else is random about a row (BERT's masked
        positions), so an example is the same row every time it is drawn."""

    def batch_from_features(self, features: dict[str, torch.Tensor], model: ModelConfig,
                            device: torch.device | str) -> Batch:
        """``synthetic_batch``'s structure from the record pipeline's collated dict of tensors (on the host)."""

    def blocks(self, network: nn.Module) -> list[nn.ModuleList]:
        """The network's repeated blocks (a transformer's layers), each list in order: what activation checkpointing
        recomputes and FSDP shards one by one (``engines.torch.parallel``); [] for a network without such blocks."""


class Builder:
    """The parts a workload may lack, refused in one line: a workload without a learnable token set or without
    converted records never has them asked for (its descriptor says so), so reaching one is a programming error.
    ``BLOCKS``: the paths of the network's lists of repeated blocks (``blocks``)."""

    BLOCKS: tuple[str, ...] = ()

    def blocks(self, network: nn.Module) -> list[nn.ModuleList]:
        return [cast(nn.ModuleList, network.get_submodule(path)) for path in self.BLOCKS]

    def _lacks(self, what: str) -> TypeError:
        return TypeError(f"{type(self).__name__} has no {what}")

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise self._lacks("evaluation outputs (the workload does not train end to end)")

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        raise self._lacks("batches from the learnable token set")

    def batch_from_features(self, features: dict[str, torch.Tensor], model: ModelConfig,
                            device: torch.device | str) -> Batch:
        raise self._lacks("batches from converted records (its --data is read by the image pipelines)")


class ImageClassifier(Builder):
    """An image classifier: (images NCHW, labels) batches, a network returning logits, label-smoothed
    cross-entropy. A subclass brings ``build`` and ``synthetic_batch``."""

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        images, labels = batch
        return classification_loss(network(images), labels, smoothing)

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per image: the training criterion (label smoothing included, so the two losses compare), the float32
        logits, the label."""
        images, labels = batch
        logits = network(images).float()
        return classification_loss(logits, labels, smoothing, reduction="none"), logits, labels


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float,
                        reduction: str = "mean") -> torch.Tensor:
    return F.cross_entropy(logits, labels, label_smoothing=smoothing, reduction=reduction)


def per_example(losses: torch.Tensor, labels: torch.Tensor, ignored: int) -> torch.Tensor:
    """Token losses [B, L] (0 where ignored) averaged over each row's counted tokens: one loss per example."""
    counted = (labels != ignored).sum(dim=1).clamp(min=1)
    return losses.sum(dim=1) / counted


def builder_of(model: ModelConfig) -> TorchBuilder:
    """A new builder of the model's workload, for one run."""
    made: TorchBuilder = builder_class(model)()
    return made


def generator(device: torch.device | str, seed: int) -> torch.Generator | None:
    """A generator on the device seeded with ``seed``; None on the meta device, which has none (shapes only:
    parameter and FLOP counts of the full sizes without allocating them)."""
    if torch.device(device).type == "meta":
        return None
    return torch.Generator(device=device).manual_seed(seed)
