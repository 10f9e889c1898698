"""TensorFlow builders of the workloads (workloads/<name>.py names each module in ``builders["tf"]``).

Each module defines ``BUILDER``: engines/builders.WorkloadBuilder (build, synthetic_batch, loss) plus ``eval_outputs``,
what the trainer's evaluation reads (the engine decides what weight decay covers: ``engines.base.is_decayed``). The
sequence workloads' builders also make training batches from learnable token sequences (``batch_from_tokens``),
and those of BERT, the Transformer and RetinaNet from their converted records (``batch_from_features``).
tf_engine imports a builder only in a worker, inside its strategy scope and precision policy; the builder knows the
network, the engine the step machinery.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np

# As in tf_engine: the official model code must reach tf_keras (Keras 2), not Keras 3, so this is set before
# TensorFlow is first imported by any builder module.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

from trainbench.config import ModelConfig
from trainbench.engines.builders import Batch, WorkloadBuilder


class TfWorkloadBuilder(WorkloadBuilder, Protocol):
    """What tf_engine needs beyond the shared protocol: what its evaluation reads."""

    def eval_outputs(self, network: Any, batch: Batch, smoothing: float) -> tuple[Any, Any, Any]:
        """Inference on an evaluation batch of B examples: (the training criterion per example [B], float32 scores
        [B*k, C] of the k predictions each example holds, their true classes [B*k]). The mean of the first over a
        batch is ``loss``'s, without dropout; the scores rank the classes (logits or probabilities) for top-k."""


class TfSequenceBuilder(TfWorkloadBuilder, Protocol):
    """A sequence workload's builder: trainable on learnable token sequences (``data.synthetic``)."""

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: Any, examples: np.ndarray) -> Batch:
        """``synthetic_batch``'s format built from these sequences (int64 [B, seq_len], no token 0) instead of random
        ids, on the device; ``examples`` are their indices in the learnable set, which seed whatever else is random
        about a row (BERT's masked positions), so an example is the same row in any batch (as torch's builders)."""


class TfRecordBuilder(TfWorkloadBuilder, Protocol):
    """A workload's builder that trains on its converted records (``--data``; ResNet-50's ImageNet aside)."""

    def batch_from_features(self, features: dict[str, Any], model: ModelConfig) -> Batch:
        """``synthetic_batch``'s structure from a batch of parsed records (``record_pipeline.training_dataset``);
        called inside the tf.data pipeline (graph mode), so TensorFlow ops only."""
