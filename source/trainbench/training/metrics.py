"""Top-k accuracy from logits, framework-free (engines hand over numpy arrays)."""

from __future__ import annotations

import numpy as np


def top_k_correct(logits: np.ndarray, labels: np.ndarray, k: int) -> int:
    """How many rows of ``logits`` have their label among the k largest scores."""
    k = min(k, logits.shape[1])
    top = np.argpartition(-logits, k - 1, axis=1)[:, :k]
    return int((top == labels.reshape(-1, 1)).any(axis=1).sum())
