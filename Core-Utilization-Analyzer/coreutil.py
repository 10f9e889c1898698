#!/usr/bin/env python3
"""Average FMA, FP16, Tensor Core and SFU utilization of ncu/nvprof CSV profiles; see README.md beside it.

A thin script over ``trainbench.analysis``: it also runs from a plain checkout, without installing the suite.
"""

import sys
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # not installed: use the checkout this script belongs to
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

try:
    from trainbench.cli.coreutil_cmd import main
except ImportError as error:  # e.g. pandas missing from this Python: say so in one line
    print(f"trainbench: coreutil: cannot start with {sys.executable}: {error}", file=sys.stderr)
    raise SystemExit(2) from None

raise SystemExit(main())
