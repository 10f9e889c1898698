"""Whether the timed steps trained: a window that timed steps on a non-finite loss, or steps whose update fp16's
loss scaler skipped (a skipped update is cheaper than a real one), timed something else than training, so its batch
size fails as ``diverged`` (``results.failure.DivergedError``) with the first such step named."""

from __future__ import annotations

import math
from collections.abc import Sequence

from trainbench.results.failure import DivergedError


def check_trained(losses: Sequence[float], steps: int, scale_before: float | None, scale_after: float | None) -> None:
    """Raise DivergedError when a timed loss is not finite, or the loss scale dropped across the windows (the scaler
    halves it at every skipped update). ``losses``: every timed step's, in order, ``steps`` a window (a captured
    step's: only the last one, read at the end)."""
    for index, loss in enumerate(losses):
        if not math.isfinite(loss):
            where = (f"timed step {index % steps + 1} of window {index // steps + 1}" if len(losses) > 1
                     else "the last timed step")
            raise DivergedError(f"the loss was {loss} at {where}: the windows timed a diverged run")
    if scale_before is not None and scale_after is not None and scale_after < scale_before:
        raise DivergedError(f"fp16's loss scale fell from {scale_before:g} to {scale_after:g} during the windows: "
                            "the scaler skipped updates there (try --precision bf16, or more --warmup)")
