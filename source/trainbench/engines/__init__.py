"""Training engines, one per framework, behind one interface (see ``base``).

Frameworks are imported only when their engine is loaded: TensorFlow alone takes seconds to import.
"""

from __future__ import annotations

import importlib

from trainbench.engines.base import Engine

_MODULES = {"tf": "trainbench.engines.tf.engine", "torch": "trainbench.engines.torch.engine"}


def load_engine(framework: str) -> Engine:
    module = importlib.import_module(_MODULES[framework])
    return module.ENGINE
