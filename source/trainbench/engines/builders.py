"""How an engine finds a workload's builder: the module its descriptor names, imported in the worker.

Framework-free: the descriptors name the builder modules, which import their framework only when an engine loads
them. Each framework types its builders with its own protocol (``engines.torch.workloads.TorchBuilder``,
``engines.tf.workloads.TfBuilder``) and makes one per run.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainbench.config import ModelConfig


def builder_class(model: ModelConfig) -> Any:
    """The ``BUILDER`` class of the workload's builder module for the model's framework (descriptors import no
    framework: the module is imported here, in the worker)."""
    return importlib.import_module(model.spec.builders[model.framework]).BUILDER
