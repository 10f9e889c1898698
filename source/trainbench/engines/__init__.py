"""Training engines, one per framework, behind one interface (``base``): ``torch/`` and ``tf/`` hold everything
that imports a framework (engine, builders, input pipelines); the modules here are framework-free (what the
harness resolves from a framework's record: launchers, input pipelines by name; the shared rules).

Frameworks are imported only when their engine is loaded: TensorFlow alone takes seconds to import.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainbench.config import ModelConfig
from trainbench.engines.base import Engine

_MODULES = {"tf": "trainbench.engines.tf.engine", "torch": "trainbench.engines.torch.engine"}
# Frameworks that count a network without allocating it (PyTorch's meta device): the module whose count() does.
_COUNTS_WITHOUT_MEMORY = {"torch": "trainbench.engines.torch.meta_counts"}


def load_engine(framework: str) -> Engine:
    module = importlib.import_module(_MODULES[framework])
    return module.ENGINE


def counts_without_memory(model: ModelConfig) -> Any | None:
    """The network's trainable parameters and training FLOPs per sample, counted without allocating it (a
    ``Counts``: parameters, train_flops_per_sample, note), or None where the framework cannot (TensorFlow has no
    meta device: building an 8B network for real would take minutes and its weights' memory)."""
    module = _COUNTS_WITHOUT_MEMORY.get(model.framework)
    return None if module is None else importlib.import_module(module).count(model)
