"""Training engines, one per framework, behind one interface (``base``): ``torch/`` and ``tf/`` hold everything
that imports a framework (engine, builders, input pipelines); the modules here are framework-free (what the
harness resolves from a framework's record: launchers, input pipelines by name; the shared rules).

Frameworks are imported only when their engine is loaded: TensorFlow alone takes seconds to import.
"""

from __future__ import annotations

import importlib

from trainbench.engines.base import Engine

_MODULES = {"tf": "trainbench.engines.tf.engine", "torch": "trainbench.engines.torch.engine"}


def load_engine(framework: str) -> Engine:
    module = importlib.import_module(_MODULES[framework])
    return module.ENGINE
