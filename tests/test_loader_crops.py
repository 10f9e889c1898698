"""The training crop of all three loaders covers 8-100 % of the image's area with an aspect ratio (width / height)
in 3/4..4/3 (``preprocess_params``), as the reference ResNet-50 recipes train.

Each pixel of the test image says where it is (red = x, green = y), so a training image that comes out of a
loader's augmentation says which part of the source it shows: fitting a line through its red columns and green
rows gives the crop's left and right, top and bottom edges (a flip only reverses the red line). Many seeded draws
must then reach small crops as well as large ones, and none may fall outside the documented ranges.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from trainbench.data.preprocess_params import MEAN_RGB, STD_RGB
from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
from trainbench.engines.torch import image_pipeline as torch_pipeline

# TensorFlow after torch (imported above and by conftest), never the other way: see NOTES.md.
try:
    import tensorflow as tf

    from trainbench.engines.tf import image_pipeline as tf_pipeline
except ImportError:  # the TensorFlow extra is not installed: its loader's test is skipped
    tf = tf_pipeline = None  # type: ignore[assignment]

SIDE = 128  # the source image, square: red = x and green = y, each 0..127
OUT = 32  # the training image size
DRAWS = 100
# Source pixels an edge may be read off by: TensorFlow's JPEG decoder (its fast integer transform) shifts the red
# ramp by about one level; Pillow's rounding to whole levels by half of one.
POSITION_SLACK = 2.0
EDGE = 3  # output pixels left out of the line fit at each border, where the resize filter is cut off
# The documented ranges (as the reference recipes), written out: a changed constant in the source must fail here.
AREA_LOW, AREA_HIGH = 0.08, 1.0
ASPECT_LOW, ASPECT_HIGH = 3 / 4, 4 / 3


def position_image() -> Image.Image:
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    return Image.fromarray(np.stack([x, y, np.full_like(x, 128)], axis=-1).astype(np.uint8))


def jpeg() -> bytes:
    """Lossy, but at quality 100 without chroma subsampling a smooth ramp keeps its values within a level or two
    (TensorFlow's decoder wants a JPEG; all three loaders get the same bytes)."""
    out = io.BytesIO()
    position_image().save(out, "JPEG", quality=100, subsampling=0)
    return out.getvalue()


def _span(profile: np.ndarray) -> tuple[float, float]:
    """Start and length, in source pixels, of the stretch a ramp of position values covers over the output."""
    index = np.arange(OUT)
    slope, intercept = np.polyfit(index[EDGE:-EDGE], profile[EDGE:-EDGE], 1)
    # Output pixel j shows source position start + (j + 0.5) * length / OUT - 0.5: its edges are j = -0.5, OUT - 0.5.
    ends = sorted((slope * -0.5 + intercept + 0.5, slope * (OUT - 0.5) + intercept + 0.5))
    return ends[0], ends[1] - ends[0]


def crop_of(normalized_chw: np.ndarray) -> tuple[float, float, float, float]:
    """(left, top, width, height) in source pixels of the crop that a normalised (3, OUT, OUT) image shows."""
    pixels = normalized_chw * (np.array(STD_RGB) * 255)[:, None, None] + (np.array(MEAN_RGB) * 255)[:, None, None]
    left, width = _span(pixels[0].mean(axis=0))
    top, height = _span(pixels[1].mean(axis=1))
    return left, top, width, height


def assert_documented_crops(crops: list[tuple[float, float, float, float]]) -> None:
    """Inside the image, areas 8-100 % reaching both small and large crops, aspect ratios 3/4..4/3 reaching both
    ends' sides; tolerances cover rounding a crop to whole pixels and reading its edges back through a resize."""
    boxes = np.array(crops)
    left, top, width, height = boxes.T
    area = width * height / SIDE**2
    aspect = width / height
    assert (left > -POSITION_SLACK).all() and (top > -POSITION_SLACK).all(), boxes.min(axis=0)
    assert (left + width < SIDE + POSITION_SLACK).all() and (top + height < SIDE + POSITION_SLACK).all()
    assert area.min() >= AREA_LOW * 0.9 and area.max() <= AREA_HIGH * 1.03, (area.min(), area.max())
    assert area.min() < 0.15 and (area < 0.3).sum() >= DRAWS // 10, np.sort(area)[:10]
    assert area.max() > 0.7, np.sort(area)[-10:]
    assert aspect.min() >= ASPECT_LOW * 0.96 and aspect.max() <= ASPECT_HIGH * 1.04, (aspect.min(), aspect.max())
    assert aspect.min() < 0.85 and aspect.max() > 1.18, (aspect.min(), aspect.max())


def test_the_cpu_loaders_training_crops_span_the_documented_ranges() -> None:
    torch.manual_seed(0)
    transform, data = torch_pipeline.train_transform(OUT), jpeg()
    crops = [crop_of(torch_pipeline.decoded(transform, data, "ramp").numpy()) for _ in range(DRAWS)]
    assert_documented_crops(crops)


def test_the_gpu_loaders_training_crops_span_the_documented_ranges() -> None:
    """The GPU loader's decoding and augmentation, run on the CPU."""
    torch.manual_seed(0)
    batch = gpu_pipeline.sample_batch([jpeg()] * DRAWS, OUT, "cpu", train=True)
    assert_documented_crops([crop_of(image) for image in batch.numpy()])


@pytest.mark.skipif(tf is None, reason="the TensorFlow extra is not installed")
def test_the_tensorflow_loaders_training_crops_span_the_documented_ranges() -> None:
    """A record without bounding boxes: the crop is sampled over the whole image (some of TensorFlow's draws fall
    back to the evaluation centre crop, 77 % of the area here)."""
    tf.random.set_seed(0)
    records = tf.data.Dataset.from_tensors((tf.constant(jpeg()), tf.zeros([1, 0, 4]))).repeat(DRAWS)
    images = records.map(lambda data, boxes: tf_pipeline.preprocess_train(data, boxes, OUT)).batch(DRAWS)
    batch = next(iter(images)).numpy()
    assert_documented_crops([crop_of(image.transpose(2, 0, 1)) for image in batch])
