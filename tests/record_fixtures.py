"""Small TFRecord folders of every record kind, written straight from ``record_schemas`` for pipeline tests.

The converters' own tests convert real text and images; the pipelines' tests need valid records of a known shape
without running a converter, so this writes random but valid ones (token ids inside the vocabulary, masked
positions inside the real tokens, boxes inside their image) with the manifest header a converter writes.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

from PIL import Image

from trainbench.data.record_schemas import EOS_ID, RecordKind
from trainbench.data.shards import MANIFEST, shard_name
from trainbench.data.tfrecord_writer import bytes_feature, encode_example, float_feature, int64_feature, write_shard

FIRST_WORD_ID = 5  # below it: the special tokens


def _bert(rng: random.Random, settings: dict[str, int]) -> bytes:
    seq_len, predictions, vocab = settings["seq_len"], settings["max_predictions_per_seq"], settings["vocab_size"]
    used = rng.randint(seq_len // 2, seq_len)
    ids = [rng.randrange(FIRST_WORD_ID, vocab) for _ in range(used)] + [0] * (seq_len - used)
    split = rng.randint(1, used - 1)
    segments = [0] * split + [1] * (used - split) + [0] * (seq_len - used)
    masked = sorted(rng.sample(range(1, used), min(predictions, max(1, used * 15 // 100))))
    pad = predictions - len(masked)
    return encode_example({
        "input_ids": int64_feature(ids),
        "input_mask": int64_feature([1] * used + [0] * (seq_len - used)),
        "segment_ids": int64_feature(segments),
        "masked_lm_positions": int64_feature(masked + [0] * pad),
        "masked_lm_ids": int64_feature([rng.randrange(FIRST_WORD_ID, vocab) for _ in masked] + [0] * pad),
        "masked_lm_weights": float_feature([1.0] * len(masked) + [0.0] * pad),
        "next_sentence_labels": int64_feature([rng.randint(0, 1)]),
    })


def _gpt2(rng: random.Random, settings: dict[str, int]) -> bytes:
    return encode_example({"input_ids": int64_feature(
        [rng.randrange(0, settings["vocab_size"]) for _ in range(settings["block_len"])])})


def _sentence(rng: random.Random, settings: dict[str, int]) -> list[int]:
    length = rng.randint(2, settings["max_length"])
    return [rng.randrange(FIRST_WORD_ID, settings["vocab_size"]) for _ in range(length - 1)] + [EOS_ID]


def _translation(rng: random.Random, settings: dict[str, int]) -> bytes:
    return encode_example({"inputs": int64_feature(_sentence(rng, settings)),
                           "targets": int64_feature(_sentence(rng, settings))})


def _coco(rng: random.Random, settings: dict[str, int], index: int = 0) -> bytes:
    width, height = rng.randint(48, 96), rng.randint(48, 96)
    image = Image.new("RGB", (width, height), tuple(rng.randrange(256) for _ in range(3)))
    encoded = io.BytesIO()
    image.save(encoded, "JPEG", quality=90)
    boxes = []
    for _ in range(rng.randint(1, 3)):
        x0, y0 = rng.uniform(0, 0.7), rng.uniform(0, 0.7)
        boxes.append((x0, y0, rng.uniform(x0 + 0.1, 1.0), rng.uniform(y0 + 0.1, 1.0)))
    labels = [rng.randint(1, settings["num_classes"]) for _ in boxes]
    return encode_example({
        "image/encoded": bytes_feature([encoded.getvalue()]),
        "image/format": bytes_feature([b"jpeg"]),
        "image/height": int64_feature([height]),
        "image/width": int64_feature([width]),
        "image/filename": bytes_feature([f"{index:012d}.jpg".encode()]),
        "image/source_id": bytes_feature([str(index).encode()]),
        "image/key/sha256": bytes_feature([b"0" * 64]),
        "image/object/bbox/xmin": float_feature([box[0] for box in boxes]),
        "image/object/bbox/ymin": float_feature([box[1] for box in boxes]),
        "image/object/bbox/xmax": float_feature([box[2] for box in boxes]),
        "image/object/bbox/ymax": float_feature([box[3] for box in boxes]),
        "image/object/class/text": bytes_feature([f"class{label}".encode() for label in labels]),
        "image/object/class/label": int64_feature(labels),
        "image/object/is_crowd": int64_feature([0] * len(boxes)),
        "image/object/area": float_feature([(b[2] - b[0]) * width * (b[3] - b[1]) * height for b in boxes]),
    })


_RECORDS = {"bert": _bert, "gpt2": _gpt2, "translation": _translation, "coco": _coco}

# Settings of tiny folders that the workloads' --size tiny models read (vocabulary 512, their default lengths).
TINY_SETTINGS: dict[str, dict[str, int]] = {
    "bert": {"seq_len": 32, "max_predictions_per_seq": 5, "vocab_size": 512},
    "gpt2": {"seq_len": 32, "block_len": 33, "vocab_size": 512},
    "translation": {"max_length": 16, "vocab_size": 512},
    "coco": {"num_classes": 5},
}


def write_records(folder: Path, kind: RecordKind, records: int = 16, shards: int = 2,
                  settings: dict[str, int] | None = None, seed: int = 0, splits: tuple[str, ...] = ("train",)
                  ) -> Path:
    """``shards`` shards per split of ``records`` random records in all, with a manifest naming kind and settings."""
    settings = dict(TINY_SETTINGS[kind] if settings is None else settings)
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for split in splits:
        for index in range(shards):
            count = records // shards + (index < records % shards)
            name = shard_name(split, index, shards)
            written = write_shard(folder / name, [
                _coco(rng, settings, index * 1000 + n) if kind == "coco" else _RECORDS[kind](rng, settings)
                for n in range(count)])
            entries[name] = {"split": split, "records": written.records, "bytes": written.bytes,
                             "sha256": written.sha256, "converted": 0, "skipped": []}
    manifest = {"format": "trainbench-tfrecords/2", "kind": kind, "settings": settings, "shards": entries}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder
