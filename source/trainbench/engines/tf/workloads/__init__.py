"""TensorFlow builders of the workloads (workloads/<name>.py names each module in ``builders["tf"]``).

Each module defines ``BUILDER``, a class that satisfies ``TfBuilder`` (mypy checks it); the engine makes one per
run (``builder_of``), inside its strategy scope and precision policy, so nothing a builder keeps (RetinaNet's task
per network) outlives its run. The builder knows the network, the engine the step machinery (and what weight decay
covers: ``engines.base.is_decayed``).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np

# As in engines/tf/engine.py: the official model code must reach tf_keras (Keras 2), not Keras 3, so this is set before
# TensorFlow is first imported by any builder module.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

from trainbench.config import ModelConfig
from trainbench.engines.builders import builder_class

Batch = tuple[Any, Any]  # (inputs, targets): tensors or dicts of tensors of fixed shapes


class TfBuilder(Protocol):
    """What a workload brings to the TensorFlow engine (typed with Any: TensorFlow ships no type hints)."""

    def build(self, model: ModelConfig) -> Any:
        """The Keras network, from model.seed, at model.size (dims from model.spec.dims(model.size))."""

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        """One batch of random inputs and targets of fixed shapes, made on the device outside every window."""

    def loss(self, network: Any, batch: Batch, smoothing: float) -> Any:
        """Forward pass (training=True) and the training criterion over the batch; the engine adds the tape."""

    def eval_outputs(self, network: Any, batch: Batch, smoothing: float) -> tuple[Any, Any, Any]:
        """Inference on an evaluation batch of B examples: (the training criterion per example [B], float32 scores
        [N, C] of the N predictions the batch holds, their true classes [N]), as torch's builders answer. The
        scores rank the classes (logits or probabilities) for top-k."""

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: Any, examples: np.ndarray) -> Batch:
        """``synthetic_batch``'s format built from these sequences (int64 [B, seq_len], no token 0) instead of random
        ids, on the device; ``examples`` are their indices in the learnable set, which seed whatever else is random
        about a row (BERT's masked positions), so an example is the same row in any batch (as torch's builders)."""

    def batch_from_features(self, features: dict[str, Any], model: ModelConfig) -> Batch:
        """``synthetic_batch``'s structure from a batch of parsed records (``record_pipeline.training_dataset``);
        called inside the tf.data pipeline (graph mode), so TensorFlow ops only."""


class Builder:
    """The parts a workload may lack, refused in one line: a workload without a learnable token set or without
    converted records never has them asked for (its descriptor says so), so reaching one is a programming error."""

    def _lacks(self, what: str) -> TypeError:
        return TypeError(f"{type(self).__name__} has no {what}")

    def eval_outputs(self, network: Any, batch: Batch, smoothing: float) -> tuple[Any, Any, Any]:
        raise self._lacks("evaluation outputs (the workload does not train end to end)")

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: Any, examples: np.ndarray) -> Batch:
        raise self._lacks("batches from the learnable token set")

    def batch_from_features(self, features: dict[str, Any], model: ModelConfig) -> Batch:
        raise self._lacks("batches from converted records (its --data is read by the image pipelines)")


def builder_of(model: ModelConfig) -> TfBuilder:
    """A new builder of the model's workload, for one run."""
    made: TfBuilder = builder_class(model)()
    return made
