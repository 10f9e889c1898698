"""TensorFlow builders of the workloads (workloads/<name>.py names each module in ``builders["tf"]``).

Each module defines ``BUILDER``: engines/base.WorkloadBuilder (build, synthetic_batch, loss) plus ``decayed``, the
variables the engine's weight-decay penalty covers. tf_engine imports a builder only in a worker, inside its
strategy scope and precision policy; the builder knows the network, the engine the step machinery.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

# As in tf_engine: the official model code must reach tf_keras (Keras 2), not Keras 3, so this is set before
# TensorFlow is first imported by any builder module.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

from trainbench.engines.base import WorkloadBuilder


class TfWorkloadBuilder(WorkloadBuilder, Protocol):
    """What tf_engine needs beyond the shared protocol: the weight-decayed variables."""

    def decayed(self, network: Any) -> list[Any]:
        """The variables the engine adds ``weight_decay * ||w||^2 / 2`` for (never batch or layer norm)."""


def matrices(network: Any) -> list[Any]:
    """Weight matrices and convolution kernels (rank >= 2): biases and normalisation scales are left out, as in
    BERT's AdamW (exclude_from_weight_decay: LayerNorm, bias) and the official vision models' kernel regularisers."""
    return [variable for variable in network.trainable_variables if len(variable.shape) >= 2]
