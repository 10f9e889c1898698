"""Tiny data sets for the pipeline tests: TFRecord shards in the standard ImageNet schema, and image-folder trees.

The shards are written by TensorFlow itself (``tf.io.TFRecordWriter`` and ``tf.train.Example``), following the
converter's schema (issue 3, point 2) exactly, so the pure-Python reader is checked against the real format.
TensorFlow and torch must not share a process: torch-side tests get the shards from a subprocess
(``python -m tests.tfrecord_support DIR``, see ``shards_in_subprocess``). What was written is described by
``plan()``, which needs neither framework.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
CLASSES = 3
SPLITS = {"train": (16, 2), "validation": (6, 2)}  # records, shards
IMAGE_SIZE = 32  # the pipelines' output size in the tests


@dataclass(frozen=True)
class Record:
    split: str
    shard: int
    index: int  # within the split
    width: int
    height: int
    label: int  # 1..CLASSES, as stored
    boxes: tuple[tuple[float, float, float, float], ...]  # (xmin, ymin, xmax, ymax), normalised

    @property
    def synset(self) -> str:
        return f"n{self.label:08d}"

    @property
    def text(self) -> str:
        return f"class number {self.label}"

    @property
    def filename(self) -> str:
        return f"{self.synset}_{self.split}_{self.index}.JPEG"


def jpeg_bytes(width: int, height: int, seed: int) -> bytes:
    """A deterministic RGB JPEG: a colour gradient with noise, so it does not compress to nothing."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    pixels = ramp + rng.normal(0, 40, (height, width, 3)) + rng.uniform(0, 120, 3)
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB").save(out, "JPEG", quality=90)
    return out.getvalue()


def _boxes(index: int) -> tuple[tuple[float, float, float, float], ...]:
    """Every other record has one box, every fifth two, the rest none (the whole image is then sampled)."""
    if index % 5 == 0:
        return ((0.1, 0.2, 0.6, 0.9), (0.3, 0.1, 0.95, 0.7))
    return ((0.2, 0.1, 0.9, 0.8),) if index % 2 else ()


def plan() -> list[Record]:
    records = []
    for split, (count, shards) in SPLITS.items():
        for index in range(count):
            width, height = (40, 30) if index % 3 else (30, 40)  # landscape and portrait
            records.append(Record(split, index * shards // count, index, width, height, index % CLASSES + 1,
                                  _boxes(index)))
    return records


def shard_name(split: str, shard: int) -> str:
    return f"{split}-{shard:05d}-of-{SPLITS[split][1]:05d}"


def record_seed(record: Record) -> int:
    return (0 if record.split == "train" else 1000) + record.index


def example(record: Record):  # -> tf.train.Example
    import tensorflow as tf

    def ints(*values: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def floats(values: list[float]) -> tf.train.Feature:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    def strings(value: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    boxes = np.array(record.boxes, dtype=np.float32).reshape(-1, 4)
    feature = {
        "image/encoded": strings(jpeg_bytes(record.width, record.height, record_seed(record))),
        "image/height": ints(record.height),
        "image/width": ints(record.width),
        "image/colorspace": strings(b"RGB"),
        "image/channels": ints(3),
        "image/format": strings(b"JPEG"),
        "image/filename": strings(record.filename.encode()),
        "image/class/label": ints(record.label),
        "image/class/synset": strings(record.synset.encode()),
        "image/class/text": strings(record.text.encode()),
        **{f"image/object/bbox/{key}": floats(boxes[:, column].tolist())
           for column, key in enumerate(("xmin", "ymin", "xmax", "ymax"))},
        "image/object/bbox/label": ints(*[record.label] * len(boxes)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_shards(folder: Path, manifest: bool = False) -> list[Record]:
    """Write every shard of ``plan()`` into ``folder`` (with TensorFlow); a converter-style manifest if asked."""
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    records = plan()
    for split, (_, shards) in SPLITS.items():
        for shard in range(shards):
            with tf.io.TFRecordWriter(str(folder / shard_name(split, shard))) as writer:
                for record in records:
                    if (record.split, record.shard) == (split, shard):
                        writer.write(example(record).SerializeToString())
    if manifest:
        write_manifest(folder, records)
    return records


def write_manifest(folder: Path, records: list[Record]) -> None:
    """The converter's manifest layout: a header with num_classes, and records and bytes per shard."""
    shards = {}
    for split, (_, count) in SPLITS.items():
        for shard in range(count):
            name = shard_name(split, shard)
            shards[name] = {"split": split, "records": sum(1 for r in records if (r.split, r.shard) == (split, shard)),
                            "bytes": (folder / name).stat().st_size}
    (folder / "manifest.json").write_text(json.dumps({"num_classes": CLASSES, "shards": shards}))


def shards_in_subprocess(folder: Path) -> list[Record]:
    """``write_shards`` in a fresh process, for tests that have torch imported."""
    if not any(folder.glob("train-*")):
        command = [sys.executable, "-m", "tests.tfrecord_support", str(folder)]
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
        subprocess.run(command, cwd=REPO, check=True, capture_output=True, env={**os.environ, **env}, timeout=300)
    return plan()


def write_image_folder(root: Path, per_class: int = 3, evaluation: bool = True) -> None:
    """``root/train/<class>/<image>`` (and ``root/val/...``), JPEG and PNG files of varied sizes."""
    for split in ("train", "val") if evaluation else ("train",):
        for label in range(CLASSES):
            folder = root / split / f"n{label:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(per_class):
                data = jpeg_bytes(40 + index, 30, label * 100 + index)
                if index == 1:  # a PNG among the JPEGs: decoded by content
                    out = io.BytesIO()
                    Image.open(io.BytesIO(data)).save(out, "PNG")
                    data = out.getvalue()
                (folder / f"image_{index}.{'png' if index == 1 else 'JPEG'}").write_bytes(data)


def truncate(path: Path, drop: int = 10) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-drop])


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


if __name__ == "__main__":
    write_shards(Path(sys.argv[1]), manifest="--manifest" in sys.argv)
