"""Synthetic data, identical for both frameworks.

Two kinds: a single random batch reused every step (what throughput benchmarks call "synthetic": it takes the
input pipeline out of the measurement), and a small fixed data set with learnable labels for end-to-end training
runs without ImageNet (each class has its own mean colour, so accuracy visibly rises when training works).
"""

from __future__ import annotations

import numpy as np


def random_batch(batch_size: int, image_size: int, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One NHWC float32 batch of normalised noise and int64 labels in [0, num_classes)."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch_size, image_size, image_size, 3), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=batch_size, dtype=np.int64)
    return images, labels


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
