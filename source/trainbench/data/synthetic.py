"""Synthetic data, identical for both frameworks.

Two kinds: a single random batch reused every step (what throughput benchmarks call "synthetic": it takes the
input pipeline out of the measurement), and a small fixed data set with learnable labels for end-to-end training
runs without ImageNet (each class has its own mean colour, so accuracy visibly rises when training works).
"""

from __future__ import annotations

import numpy as np


def learnable_examples(
    start: int, count: int, image_size: int, num_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Examples ``start .. start+count`` of a deterministic data set: class colour plus noise, NHWC float32.

    Each example depends only on (seed, index), so any slice can be regenerated without storing the set.
    """
    images = np.empty((count, image_size, image_size, 3), dtype=np.float32)
    labels = np.empty(count, dtype=np.int64)
    class_colours = np.random.default_rng(seed).uniform(-1.5, 1.5, size=(num_classes, 3)).astype(np.float32)
    for row, index in enumerate(range(start, start + count)):
        rng = np.random.default_rng((seed, index))
        label = int(rng.integers(num_classes))
        labels[row] = label
        images[row] = class_colours[label] + rng.standard_normal((image_size, image_size, 3), dtype=np.float32)
    return images, labels


# Strides of the learnable token sequences: few enough that a tiny model learns them in a few hundred steps.
TOKEN_STRIDES = (1, 2, 3)


def learnable_sequences(start: int, count: int, length: int, vocab: int, seed: int, first_token: int = 1
                        ) -> np.ndarray:
    """Sequences ``start .. start+count`` of a deterministic token set, int64 (count, length): each one counts up
    from a random token in steps of a random stride (``TOKEN_STRIDES``), wrapping within [first_token, vocab).

    Every token but the first follows from the one before it and the stride, so a language model's loss visibly
    falls when training works (next token: seen two; a masked token: from its neighbours); a translation target
    is learnable from its source (``translated``). Each sequence depends only on (seed, index), as
    ``learnable_examples``' images do."""
    span = vocab - first_token
    rows = np.empty((count, length), dtype=np.int64)
    for row, index in enumerate(range(start, start + count)):
        rng = np.random.default_rng((seed, index, length))
        origin, stride = int(rng.integers(span)), TOKEN_STRIDES[int(rng.integers(len(TOKEN_STRIDES)))]
        rows[row] = first_token + (origin + stride * np.arange(length)) % span
    return rows


def translated(source: np.ndarray, vocab: int, first_token: int = 1) -> np.ndarray:
    """The learnable translation of ``learnable_sequences``' rows: each token moved up by one in the vocabulary."""
    span = vocab - first_token
    return first_token + (source - first_token + 1) % span
