"""tf.data over the text and detection TFRecords (``record_schemas``: bert, gpt2, translation, coco).

Every kind is read the same way as ImageNet's shards (``tf_pipeline``): the shards interleaved, shard order and
records shuffled per pass, parsed with ``tf.io.parse_single_example`` against feature specs built from
``record_schemas.SCHEMAS`` and the folder's settings (``data.source.record_format``), mapped with parallel calls,
batched with ``drop_remainder`` (static shapes, even splits over replicas), prefetched. A batch is a dict of
features, which the workload's builder (``batch_from_features``) turns into its model's (inputs, targets).

- ``bert``: the records as written (int32 ids, float32 masked-LM weights, scalar next-sentence labels).
- ``gpt2``: the ``block_len`` ids of each block.
- ``translation``: the legacy Transformer pipeline's ``static_batch`` mode (``official.legacy.transformer.
  data_pipeline``): pairs with a sentence longer than the run's ``seq_len`` are dropped, both sentences padded with
  ``PAD_ID`` to exactly ``seq_len``. Its default (bucketing by length, batches of a token budget) would give a
  new shape per bucket: a retrace per shape and a batch size that is not the run's.
- ``coco``: as ``official.vision.dataloaders.retinanet_input.Parser`` trains (no augmentation: scale range 1,
  no flip): crowd boxes skipped, the image normalised by the ImageNet mean and standard deviation, its longer side
  resized (bilinear) to ``image_size`` keeping its aspect, padded with zeros at the bottom and right to
  ``image_size`` square; the boxes scaled to pixels of that image, clipped to it, the empty ones dropped. Batches
  pad the boxes to the batch's most (class -1 marks padding); anchors are labelled from them per batch by the
  builder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf

from trainbench.data.preprocess_params import MEAN_RGB, SHUFFLE_BUFFER, STD_RGB
from trainbench.data.record_schemas import PAD_ID, SCHEMAS, RecordKind
from trainbench.data.source import RecordFormat
from trainbench.engines.tf.image_pipeline import _finish, _records, naming_corrupt_shard
from trainbench.errors import UsageError

__all__ = ["PADDING_CLASS", "feature_spec", "naming_corrupt_shard", "training_dataset"]

AUTOTUNE = tf.data.AUTOTUNE
PADDING_CLASS = -1  # the class of a padding box in a coco batch (tf-models pads its groundtruths with -1 too)
_DTYPES = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}
_BOX_KEYS = ("ymin", "xmin", "ymax", "xmax")  # tf-models' box order
# The features each kind's pipeline reads (the coco records hold more: file names, ids, areas, class names).
_COCO_READ = ("image/encoded", *(f"image/object/bbox/{key}" for key in _BOX_KEYS), "image/object/class/label",
              "image/object/is_crowd")

Features = dict[str, tf.Tensor]


def feature_spec(kind: RecordKind, settings: dict[str, int], names: Sequence[str] | None = None
                 ) -> dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature]:
    """``parse_single_example`` specs of the schema's features (``names``: only these): a fixed length from the
    settings ([] for length 1: a scalar), else variable length (a sparse tensor)."""
    spec: dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature] = {}
    for name, feature in SCHEMAS[kind].items():
        if names is not None and name not in names:
            continue
        try:
            size = feature.size(settings)
        except KeyError as missing:
            raise UsageError(f"the {kind} records' manifest names no {missing} setting (rewrite the folder with "
                             "its converter)") from None
        dtype = _DTYPES[feature.type]
        spec[name] = (tf.io.VarLenFeature(dtype) if size is None
                      else tf.io.FixedLenFeature([] if size == 1 else [size], dtype))
    return spec


def _parser(kind: RecordKind, settings: dict[str, int], names: Sequence[str] | None = None
            ) -> Callable[[tf.Tensor], Features]:
    spec = feature_spec(kind, settings, names)

    def parse(serialized: tf.Tensor) -> Features:
        features = tf.io.parse_single_example(serialized, spec)
        return {name: tf.sparse.to_dense(value) if isinstance(value, tf.SparseTensor) else value
                for name, value in features.items()}

    return parse


def _int32(features: Features) -> Features:
    """int64 ids as int32, the models' id type (tf-models' pre-training loader casts them too)."""
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value for name, value in features.items()}


# --- coco -------------------------------------------------------------------------------------------------------


def _normalize(image: tf.Tensor) -> tf.Tensor:
    """preprocess_ops.normalize_image: (pixels - mean * 255) / (std * 255), float32."""
    return (tf.cast(image, tf.float32) - tf.constant(MEAN_RGB) * 255) / (tf.constant(STD_RGB) * 255)


def detection_example(features: Features, image_size: int) -> Features:
    """One coco record as RetinaNet trains on it: {"image": float32 [size, size, 3], "boxes": float32 [n, 4] in
    pixels of that image (ymin, xmin, ymax, xmax), "classes": int32 [n]} (crowd and empty boxes left out)."""
    image = _normalize(tf.io.decode_image(features["image/encoded"], channels=3, expand_animations=False))
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    # preprocess_ops.resize_and_crop_image with scale range 1: the longer side to image_size, rounded.
    scale = tf.minimum(image_size / shape[0], image_size / shape[1])
    scaled = tf.round(shape * scale)
    image = tf.image.resize(image, tf.cast(scaled, tf.int32), method=tf.image.ResizeMethod.BILINEAR)
    image = tf.image.pad_to_bounding_box(image, 0, 0, image_size, image_size)
    # Normalised corners to pixels of the resized image (its scale per axis, as resize_and_crop_boxes), clipped.
    corners = tf.stack([features[f"image/object/bbox/{key}"] for key in _BOX_KEYS], axis=1)
    extent = tf.tile(scaled, [2])  # height, width, height, width
    boxes = tf.clip_by_value(corners * extent, 0.0, extent)
    classes = tf.cast(features["image/object/class/label"], tf.int32)
    kept = tf.logical_and(tf.equal(features["image/object/is_crowd"], 0),  # skip_crowd_during_training
                          tf.logical_and(boxes[:, 2] > boxes[:, 0], boxes[:, 3] > boxes[:, 1]))  # non-empty
    return {"image": tf.ensure_shape(image, [image_size, image_size, 3]),
            "boxes": tf.boolean_mask(boxes, kept), "classes": tf.boolean_mask(classes, kept)}


# --- datasets ---------------------------------------------------------------------------------------------------


def _check_bert(settings: dict[str, int], folder: Path, seq_len: int | None, image_size: int | None,
                num_classes: int | None) -> None:
    if seq_len is not None and settings.get("seq_len", seq_len) != seq_len:
        raise UsageError(f"{folder}: its BERT records hold {settings['seq_len']} tokens per sequence, not {seq_len}: "
                         f"run with --seq-len {settings['seq_len']}")


def _check_gpt2(settings: dict[str, int], folder: Path, seq_len: int | None, image_size: int | None,
                num_classes: int | None) -> None:
    if seq_len is not None and settings.get("block_len", seq_len + 1) != seq_len + 1:
        raise UsageError(f"{folder}: its GPT-2 blocks hold {settings['block_len']} tokens, not --seq-len + 1 = "
                         f"{seq_len + 1}: run with --seq-len {settings['block_len'] - 1}")


def _check_coco(settings: dict[str, int], folder: Path, seq_len: int | None, image_size: int | None,
                num_classes: int | None) -> None:
    if image_size is None:
        raise ValueError("coco records need the run's image size")
    largest = settings.get("num_classes")
    if num_classes is not None and largest is not None and largest >= num_classes:
        raise UsageError(f"{folder}: its category ids go up to {largest}, which needs --num-classes "
                         f"{largest + 1} or more (class 0 is the background)")


def _nothing_to_check(settings: dict[str, int], folder: Path, seq_len: int | None, image_size: int | None,
                      num_classes: int | None) -> None:
    """Translation: any --seq-len reads the pairs (the longer ones are left out)."""


def _translation_length(fmt: RecordFormat, seq_len: int | None) -> int:
    length = fmt.settings.get("max_length", 0) if seq_len is None else seq_len
    if not length:
        raise ValueError("translation records need the run's seq_len")
    return int(length)


def _ids(fmt: RecordFormat, image_size: int | None) -> Callable[[tf.Tensor], Features]:
    """Every feature as written, int64 ids as int32."""
    parse = _parser(fmt.kind, fmt.settings)

    def example(serialized: tf.Tensor) -> Features:
        return _int32(parse(serialized))

    return example


def _detection(fmt: RecordFormat, image_size: int | None) -> Callable[[tf.Tensor], Features]:
    """The features RetinaNet reads, made into its image and boxes (``detection_example``)."""
    parse = _parser(fmt.kind, fmt.settings, _COCO_READ)
    size = int(image_size or 0)

    def example(serialized: tf.Tensor) -> Features:
        return detection_example(parse(serialized), size)

    return example


def _every(examples: tf.data.Dataset, fmt: RecordFormat, seq_len: int | None) -> tf.data.Dataset:
    return examples


def _within_length(examples: tf.data.Dataset, fmt: RecordFormat, seq_len: int | None) -> tf.data.Dataset:
    """Pairs with both sides within the run's length (the legacy Transformer's _filter_max_length)."""
    length = _translation_length(fmt, seq_len)
    return examples.filter(lambda pair: tf.logical_and(tf.size(pair["inputs"]) <= length,
                                                      tf.size(pair["targets"]) <= length))


def _full_batches(examples: tf.data.Dataset, fmt: RecordFormat, batch_size: int, seq_len: int | None
                  ) -> tf.data.Dataset:
    return examples.batch(batch_size, drop_remainder=True)


def _padded_pairs(examples: tf.data.Dataset, fmt: RecordFormat, batch_size: int, seq_len: int | None
                  ) -> tf.data.Dataset:
    length = _translation_length(fmt, seq_len)
    return examples.padded_batch(batch_size, {"inputs": [length], "targets": [length]},
                                 padding_values=PAD_ID, drop_remainder=True)


def _padded_boxes(examples: tf.data.Dataset, fmt: RecordFormat, batch_size: int, seq_len: int | None
                  ) -> tf.data.Dataset:
    return examples.padded_batch(batch_size, padding_values={
        "image": 0.0, "boxes": 0.0, "classes": PADDING_CLASS}, drop_remainder=True)


@dataclass(frozen=True)
class _Reading:
    """How tf.data reads one record kind (see the module's docstring): what the run must agree on with the records,
    each record's example, the examples a batch may hold, and how they are batched."""

    example: Callable[[RecordFormat, int | None], Callable[[tf.Tensor], Features]]  # (format, image_size)
    check: Callable[[dict[str, int], Path, int | None, int | None, int | None], None] = _nothing_to_check
    kept: Callable[[tf.data.Dataset, RecordFormat, int | None], tf.data.Dataset] = _every
    batched: Callable[[tf.data.Dataset, RecordFormat, int, int | None], tf.data.Dataset] = _full_batches


# The kinds read here; ImageNet's records are tf_pipeline's.
_READINGS: dict[RecordKind, _Reading] = {
    "bert": _Reading(_ids, check=_check_bert),
    "gpt2": _Reading(_ids, check=_check_gpt2),
    "translation": _Reading(_ids, kept=_within_length, batched=_padded_pairs),
    "coco": _Reading(_detection, check=_check_coco, batched=_padded_boxes),
}


def training_dataset(files: Sequence[Path], fmt: RecordFormat, batch_size: int, seed: int, *,
                     seq_len: int | None = None, image_size: int | None = None, num_classes: int | None = None,
                     threads: int | None = None) -> tf.data.Dataset:
    """Endless shuffled batches of feature dicts (see the module's docstring for each kind), full batches only.

    ``seq_len``: the run's tokens per sequence (bert and gpt2: checked against the records; translation: the
    filter and padding length, the records' ``max_length`` when None); ``image_size`` (coco): the square side;
    ``num_classes`` (coco): the model's classes, checked against the records' largest category id.
    """
    if fmt.kind not in _READINGS:
        raise ValueError(f"no tf.data record pipeline for {fmt.kind} records (ImageNet's are tf_pipeline's)")
    reading = _READINGS[fmt.kind]
    # What the run must agree on with the records, each refused in one line naming the folder.
    reading.check(fmt.settings, Path(files[0]).parent if files else Path("?"), seq_len, image_size, num_classes)
    example = reading.example(fmt, image_size)
    records = _records(files, seed).shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    examples = reading.kept(records.map(example, num_parallel_calls=AUTOTUNE, deterministic=False), fmt, seq_len)
    # Repeated after the filter: tf.data ends the repetition of a pass that yields nothing (every pair longer than
    # --seq-len), where repeating the records before filtering them would spin forever without a batch.
    return _finish(reading.batched(examples.repeat(), fmt, batch_size, seq_len), threads)


def mapped(dataset: tf.data.Dataset, function: Callable[[Features], Any]) -> tf.data.Dataset:
    """The batches made into a model's (inputs, targets) in the pipeline's own threads, prefetched again."""
    return dataset.map(function, num_parallel_calls=AUTOTUNE, deterministic=False).prefetch(AUTOTUNE)
