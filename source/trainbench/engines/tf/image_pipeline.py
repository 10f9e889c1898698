"""tf.data input over TFRecord shards, with the standard ResNet-50 ImageNet preprocessing.

Training, as tf-models-official's ImageNet input and the reference TPU ResNet: a crop window sampled by
``tf.image.sample_distorted_bounding_box`` around the record's bounding boxes (area, aspect and attempts from
``preprocess_params``; the whole image when a record has none), decoded with ``decode_and_crop_jpeg`` (only the
window is decoded), falling back to the evaluation centre crop when no window fitted; resized to the input size,
flipped left-right at random. Evaluation: the shorter side resized to ``image_size * 256 / 224``, the centre
``image_size`` square cropped (the same integer arithmetic as torchvision's Resize and CenterCrop). Both normalised
by the ImageNet mean and standard deviation; labels shifted from 1..N to 0..N-1.

tf-models-official's own functions are not reused: ``official.vision.ops.preprocess_ops.random_crop_image_v2``
ignores the record's boxes, and the legacy ``preprocessing`` module uses other crop ranges and prints on every
resize.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import tensorflow as tf

from trainbench.data.preprocess_params import (
    CROP_AREA_RANGE,
    CROP_ASPECT_RANGE,
    CROP_MAX_ATTEMPTS,
    MEAN_RGB,
    MIN_OBJECT_COVERED,
    RESIZE_RATIO,
    SHUFFLE_BUFFER,
    STD_RGB,
    resize_size,
)
from trainbench.data.tfrecord_reader import DataError, find_corruption

AUTOTUNE = tf.data.AUTOTUNE
_READ_BUFFER = 8 << 20  # bytes read ahead per shard
_BOX_KEYS = ("ymin", "xmin", "ymax", "xmax")  # the order sample_distorted_bounding_box expects
_FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    **{f"image/object/bbox/{key}": tf.io.VarLenFeature(tf.float32) for key in _BOX_KEYS},
}


def parse_record(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """JPEG bytes, bounding boxes [1, boxes, 4] (ymin, xmin, ymax, xmax) and the 0-based int32 label."""
    features = tf.io.parse_single_example(serialized, _FEATURES)
    corners = [tf.sparse.to_dense(features[f"image/object/bbox/{key}"]) for key in _BOX_KEYS]
    boxes = tf.expand_dims(tf.stack(corners, axis=1), 0)
    label = tf.cast(features["image/class/label"] - 1, tf.int32)
    return features["image/encoded"], boxes, label


def _normalize(image: tf.Tensor) -> tf.Tensor:
    return (tf.cast(image, tf.float32) - tf.constant(MEAN_RGB) * 255) / (tf.constant(STD_RGB) * 255)


def _center_window(shape: tf.Tensor) -> tf.Tensor:
    """The centre square of side shorter side * 224/256: the training fallback, as the reference TPU ResNet."""
    side = tf.cast(tf.cast(tf.minimum(shape[0], shape[1]), tf.float32) / RESIZE_RATIO, tf.int32)
    return tf.stack([(shape[0] - side + 1) // 2, (shape[1] - side + 1) // 2, side, side])


def _random_window(image_bytes: tf.Tensor, boxes: tf.Tensor) -> tf.Tensor:
    shape = tf.image.extract_jpeg_shape(image_bytes)
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape, bounding_boxes=boxes, min_object_covered=MIN_OBJECT_COVERED, aspect_ratio_range=CROP_ASPECT_RANGE,
        area_range=CROP_AREA_RANGE, max_attempts=CROP_MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True,
    )
    # The whole image comes back when no window met the constraints within the attempts.
    failed = tf.reduce_all(tf.equal(size[:2], shape[:2]))
    return tf.where(failed, _center_window(shape), tf.stack([begin[0], begin[1], size[0], size[1]]))


def preprocess_train(image_bytes: tf.Tensor, boxes: tf.Tensor, image_size: int) -> tf.Tensor:
    """Random crop around the boxes, resize, random flip, normalise: float32 [image_size, image_size, 3]."""
    crop = tf.image.decode_and_crop_jpeg(image_bytes, _random_window(image_bytes, boxes), channels=3)
    # Antialiased bilinear, as torchvision's RandomResizedCrop on tensors: both pipelines see the same pixels.
    image = tf.image.resize(crop, [image_size, image_size], antialias=True)
    return _normalize(tf.image.random_flip_left_right(image))


def preprocess_eval(image_bytes: tf.Tensor, image_size: int) -> tf.Tensor:
    """Shorter side to image_size*256/224, centre crop image_size, normalise (deterministic)."""
    image = tf.io.decode_jpeg(image_bytes, channels=3)
    shape = tf.cast(tf.shape(image)[:2], tf.float64)
    resized_shape = tf.cast(resize_size(image_size) * shape / tf.reduce_min(shape), tf.int32)  # floor, as int()
    image = tf.image.resize(image, resized_shape, antialias=True)
    top, left = tf.unstack(tf.cast(tf.round(tf.cast(resized_shape - image_size, tf.float32) / 2), tf.int32))
    return _normalize(tf.slice(image, [top, left, 0], [image_size, image_size, 3]))  # a static shape


# --- datasets -------------------------------------------------------------------------------------------------


def _records(files: Sequence[Path], seed: int | None) -> tf.data.Dataset:
    """Serialized records, read from several shards at once; shard order shuffled per pass when seeded."""
    names = tf.data.Dataset.from_tensor_slices([str(path) for path in files])
    if seed is not None:
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return names.interleave(
        lambda name: tf.data.TFRecordDataset(name, buffer_size=_READ_BUFFER),
        num_parallel_calls=AUTOTUNE, deterministic=seed is None,
    )


def _finish(dataset: tf.data.Dataset, threads: int | None) -> tf.data.Dataset:
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        dataset = dataset.with_options(options)
    return dataset.prefetch(AUTOTUNE)


def training_dataset(
    files: Sequence[Path], batch_size: int, image_size: int, seed: int, threads: int | None = None
) -> tf.data.Dataset:
    """Endless shuffled batches (images float32 NHWC, labels int32), full batches only (static shapes)."""

    def example(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image_bytes, boxes, label = parse_record(serialized)
        return preprocess_train(image_bytes, boxes, image_size), label

    records = _records(files, seed).shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = records.map(example, num_parallel_calls=AUTOTUNE, deterministic=False)
    return _finish(dataset.batch(batch_size, drop_remainder=True), threads)


def evaluation_dataset(
    files: Sequence[Path], batch_size: int, image_size: int, count: int, threads: int | None = None
) -> tf.data.Dataset:
    """Endless passes over the ``count`` records as (images, labels, valid) batches, in file order.

    Each pass is padded with masked-out zero examples to whole batches: every replica then gets a full, static
    batch (an empty one would be rejected by the CPU convolution, a partial one would cost another trace).
    """

    def example(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        image_bytes, _, label = parse_record(serialized)
        return preprocess_eval(image_bytes, image_size), label, tf.constant(True)

    padding = tf.data.Dataset.from_tensors(
        (tf.zeros([image_size, image_size, 3]), tf.constant(0, tf.int32), tf.constant(False))
    ).repeat(-count % batch_size)
    dataset = _records(files, None).map(example, num_parallel_calls=AUTOTUNE).concatenate(padding)
    return _finish(dataset.batch(batch_size, drop_remainder=True).repeat(), threads)


@contextlib.contextmanager
def naming_corrupt_shard(files: Sequence[Path]) -> Iterator[None]:
    """TensorFlow reports a corrupt or truncated record without its file: find the file and say it. An endless
    pipeline that ends made no batch at all (every record left out, or fewer than a batch): say that, naming the
    folder, rather than TensorFlow's "End of sequence"."""
    folder = Path(files[0]).parent if files else "?"
    try:
        yield
    except tf.errors.DataLossError as error:
        found = find_corruption(files)
        raise found or DataError(f"corrupt TFRecord data in {folder}: {error.message}") from None
    except (tf.errors.OutOfRangeError, StopIteration):  # in a compiled step, or in the distributed iterator
        raise DataError(f"{folder}: no training batch could be formed from its records (every record left out, "
                        "e.g. each translation pair longer than --seq-len, or fewer records than a batch)") from None
