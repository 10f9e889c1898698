"""The standard ResNet-50 ImageNet preprocessing parameters, shared by the TensorFlow and PyTorch pipelines.

Defined once so that both frameworks train and evaluate on identically prepared images (see ``tf_pipeline`` and
``torch_pipeline`` for the two implementations).
"""

from __future__ import annotations

# Training: a random crop covering 8-100 % of the image with an aspect ratio (width / height) in 3/4..4/3, resized
# to the input size and randomly flipped left-right (Inception-style crop, as tf-models-official and torchvision).
CROP_AREA_RANGE: tuple[float, float] = (0.08, 1.0)
CROP_ASPECT_RANGE: tuple[float, float] = (3 / 4, 4 / 3)
# TensorFlow samples the crop around the record's bounding boxes: at least this fraction of one box is kept, and
# after this many failed attempts it falls back to the evaluation centre crop.
MIN_OBJECT_COVERED = 0.1
CROP_MAX_ATTEMPTS = 10

# Evaluation: the shorter side resized to image_size * 256 / 224, then a centre crop of image_size.
RESIZE_RATIO = 256 / 224

# Per-channel RGB mean and standard deviation of ImageNet, on pixel values scaled to [0, 1].
MEAN_RGB: tuple[float, float, float] = (0.485, 0.456, 0.406)
STD_RGB: tuple[float, float, float] = (0.229, 0.224, 0.225)

# Records held for shuffling (all workers together): about 1 GB of ImageNet JPEGs, as tf-models-official uses.
SHUFFLE_BUFFER = 10_000


def resize_size(image_size: int) -> int:
    """The shorter side before the evaluation centre crop: 256 for 224."""
    return round(image_size * RESIZE_RATIO)
