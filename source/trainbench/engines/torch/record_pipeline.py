"""PyTorch input for the converted text and detection folders (``record_schemas``: bert, gpt2, translation, coco).

Shards are read by the suite's own TFRecord reader (no TensorFlow), split by file between ranks and then DataLoader
workers, through a shuffle buffer, as ``torch_pipeline`` reads ImageNet; each record is decoded by
``record_decode`` and made into one example in the worker; the DataLoader collates examples into a dict of
tensors of fixed shapes, which the workload's builder turns into its batch (``batch_from_features``).

- bert: the record's features as they are (``seq_len`` tokens, ``max_predictions_per_seq`` masked positions).
- gpt2: the block of ``seq_len + 1`` ids.
- translation: ``inputs`` and ``targets`` padded with PAD_ID to the run's ``seq_len``; a pair with a side longer
  than that is left out, as the legacy Transformer pipeline's ``_filter_max_length`` does.
- coco: the image decoded by Pillow in the worker; its longer side resized to the run's ``image_size`` keeping
  the aspect ratio and the rest padded, bottom and right (as torchvision's and tf-models-official's RetinaNet
  references do); the padding is the ImageNet mean colour, which the detector's own normalisation makes 0, as
  both references pad after normalising. Pixels are float32 in [0, 1]: torchvision's detector normalises with the
  ImageNet mean and standard deviation itself (``GeneralizedRCNNTransform``), so they are not normalised twice.
  Training flips half the images left-right (both references' only default augmentation). Boxes are scaled to
  pixels of the resized image; crowd boxes are dropped (tf-models-official's ``skip_crowd_during_training``),
  as are boxes without area (torchvision's reference keeps x2 > x1, y2 > y1 only) and then images with no box
  left (torchvision's ``_coco_remove_images_without_annotations``). Boxes are cut at ``MAX_INSTANCES`` (the TF
  reference's ``max_num_instances``) and padded to it by repeating the image's boxes in turn: a repeated box
  with its label changes no anchor's match and so neither loss, while every batch has one shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader

from trainbench.data.preprocess_params import MEAN_RGB
from trainbench.data.record_decode import Features, check_settings, decode_record
from trainbench.data.record_schemas import PAD_ID, RecordKind
from trainbench.data.source import DataSource, record_format
from trainbench.data.tfrecord_reader import DataError
from trainbench.engines.torch.image_pipeline import ShardedRecords, decode, loader_over

MAX_INSTANCES = 100  # tf-models-official's RetinaNet parser: max_num_instances
Example = dict[str, Any]  # numpy arrays and tensors, collated into a dict of tensors
Prepare = Callable[[Features, str, np.random.Generator], Example | None]  # None: the record is left out


# --- one example per record ---------------------------------------------------------------------------------------


def bert_example(features: Features, name: str, rng: np.random.Generator) -> Example:
    return features


def gpt2_example(features: Features, name: str, rng: np.random.Generator) -> Example:
    return {"input_ids": features["input_ids"]}


def padded(ids: np.ndarray, length: int) -> np.ndarray:
    out = np.full(length, PAD_ID, dtype=np.int64)
    out[:len(ids)] = ids
    return out


def translation_example(seq_len: int, features: Features, name: str, rng: np.random.Generator) -> Example | None:
    """The pair padded to ``seq_len``; None for a pair with a side longer than that."""
    inputs, targets = features["inputs"], features["targets"]
    if max(len(inputs), len(targets)) > seq_len:
        return None
    return {"inputs": padded(inputs, seq_len), "targets": padded(targets, seq_len)}


def letterbox(image: Image.Image, size: int, flip: bool = False) -> tuple[torch.Tensor, float, float]:
    """The image with its longer side resized to ``size``, at the top left of a ``size`` x ``size`` square of the
    mean colour; float32 CHW in [0, 1]. Returns it and the x and y scale from original to new pixels."""
    width, height = image.size
    scale = size / max(width, height)
    new_width, new_height = max(1, round(width * scale)), max(1, round(height * scale))
    resized = image.resize((new_width, new_height), Image.Resampling.BILINEAR)
    if flip:
        resized = resized.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    canvas = Image.new("RGB", (size, size), tuple(round(255 * mean) for mean in MEAN_RGB))
    canvas.paste(resized, (0, 0))
    pixels = torch.from_numpy(np.asarray(canvas, dtype=np.uint8).copy()).permute(2, 0, 1)
    return pixels.float().div_(255), new_width / width, new_height / height


def coco_boxes(features: Features, width: int, height: int, x_scale: float, y_scale: float,
               flip: bool) -> tuple[np.ndarray, np.ndarray]:
    """(boxes x1 y1 x2 y2 in pixels of the resized image, labels) of the non-crowd boxes with an area."""
    keep = features["image/object/is_crowd"] == 0
    x1 = features["image/object/bbox/xmin"][keep] * width * x_scale
    x2 = features["image/object/bbox/xmax"][keep] * width * x_scale
    y1 = features["image/object/bbox/ymin"][keep] * height * y_scale
    y2 = features["image/object/bbox/ymax"][keep] * height * y_scale
    if flip:
        new_width = round(width * x_scale)
        x1, x2 = new_width - x2, new_width - x1
    boxes = np.stack([x1, y1, x2, y2], axis=1).astype(np.float32)
    labels = features["image/object/class/label"][keep]
    real = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    return boxes[real], labels[real]


def repeated(values: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` rows, cycling through ``values`` again when it has fewer."""
    return values[np.arange(count) % len(values)]


def coco_example(image_size: int, train: bool, features: Features, name: str,
                 rng: np.random.Generator) -> Example | None:
    image = decode(features["image/encoded"][0], name)
    flip = train and bool(rng.integers(2))
    pixels, x_scale, y_scale = letterbox(image, image_size, flip)
    boxes, labels = coco_boxes(features, image.width, image.height, x_scale, y_scale, flip)
    if not len(boxes):
        return None
    boxes, labels = boxes[:MAX_INSTANCES], labels[:MAX_INSTANCES]
    return {"image": pixels, "boxes": repeated(boxes, MAX_INSTANCES), "labels": repeated(labels, MAX_INSTANCES),
            "num_boxes": len(boxes)}


def _bert_preparer(seq_len: int, image_size: int, train: bool) -> Prepare:
    return bert_example


def _gpt2_preparer(seq_len: int, image_size: int, train: bool) -> Prepare:
    return gpt2_example


def _translation_preparer(seq_len: int, image_size: int, train: bool) -> Prepare:
    return partial(translation_example, seq_len)


def _coco_preparer(seq_len: int, image_size: int, train: bool) -> Prepare:
    return partial(coco_example, image_size, train)


# Each kind's example maker for the run's (seq_len, image_size, train); ImageNet's records are image_pipeline's.
_PREPARERS: dict[RecordKind, Callable[[int, int, bool], Prepare]] = {
    "bert": _bert_preparer, "gpt2": _gpt2_preparer, "translation": _translation_preparer, "coco": _coco_preparer}


def preparer(kind: RecordKind, *, seq_len: int, image_size: int, train: bool) -> Prepare:
    """The function making one example of a decoded record of ``kind`` (picklable: it goes to the workers)."""
    if kind not in _PREPARERS:
        raise DataError(f"no PyTorch record pipeline for {kind} records")
    return _PREPARERS[kind](seq_len, image_size, train)


# --- the dataset and its loader -----------------------------------------------------------------------------------


class TFRecordExamples(ShardedRecords):
    """Examples of one record kind from TFRecord shards (``torch_pipeline.ShardedRecords``'s split and shuffle)."""

    def __init__(self, files: Sequence[Path], kind: RecordKind, settings: Mapping[str, int], prepare: Prepare, *,
                 shuffle: bool, repeat: bool, seed: int = 0, rank: int = 0, world: int = 1) -> None:
        super().__init__(files, shuffle=shuffle, repeat=repeat, seed=seed, rank=rank, world=world)
        self._kind, self._settings, self._prepare = kind, dict(settings), prepare

    def _example(self, payload: bytes, name: str, rng: np.random.Generator) -> Example | None:
        return self._prepare(decode_record(payload, self._kind, self._settings, name), name, rng)


def make_loader(source: DataSource, batch_size: int, *, seq_len: int, image_size: int, train: bool, seed: int = 0,
                workers: int | None = None, pin_memory: bool = False, rank: int = 0, world: int = 1) -> DataLoader:
    """Training: endless shuffled full batches; evaluation: one ordered pass with a partial last batch. The record
    kind and its settings are the folder's manifest's (``source.record_format``)."""
    found = record_format(source)
    check_settings(found.kind, found.settings)
    prepare = preparer(found.kind, seq_len=seq_len, image_size=image_size, train=train)
    dataset = TFRecordExamples(source.train if train else source.evaluation, found.kind, found.settings, prepare,
                               shuffle=train, repeat=train, seed=seed, rank=rank, world=world)
    return loader_over(dataset, batch_size, train=train, shuffle_sampler=False, seed=seed, workers=workers,
                       pin_memory=pin_memory)


def samples(batch: Mapping[str, torch.Tensor]) -> int:
    """Examples in a collated batch."""
    return len(next(iter(batch.values())))
