"""The TensorFlow input pipeline, and the pure-Python TFRecord reader checked against TensorFlow's own parser.

TensorFlow and PyTorch must not be imported into one process, so nothing here imports torch.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf

from tests.tfrecord_support import CLASSES, IMAGE_SIZE, SPLITS, flip_byte, plan, shard_name, truncate, write_shards
from trainbench.config import ModelConfig, TrainConfig
from trainbench.data.crc32c import crc32c, masked_crc32c
from trainbench.data.source import count_examples, num_classes, open_source
from trainbench.data.tfrecord_reader import DataError, count_records, parse_example, read_records
from trainbench.engines.tf import image_pipeline as tf_pipeline
from trainbench.engines.tf.engine import ENGINE


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tf-shards")
    write_shards(folder)
    return folder


@pytest.fixture
def damaged(shards: Path, tmp_path: Path) -> Path:
    """A private copy of the shards, for tests that break one."""
    folder = tmp_path / "shards"
    shutil.copytree(shards, folder)
    return folder


def tf_features(payload: bytes) -> dict[str, list]:
    """TensorFlow's own decoding of a serialised Example, as plain lists."""
    example = tf.train.Example.FromString(payload)
    decoded = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        decoded[name] = list(getattr(feature, kind).value) if kind else []
    return decoded


# --- the pure-Python reader against TensorFlow ----------------------------------------------------------------


def test_crc32c_known_values() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(b"") == 0
    data = bytes(range(256)) * 40  # long enough for the vectorised path
    assert crc32c(data) == crc32c(memoryview(data)) != crc32c(data[:-1] + b"\x00")
    assert masked_crc32c(b"") == 0xA282EAD8


def test_reader_returns_tensorflows_records_and_fields(shards: Path) -> None:
    expected = plan()
    for split, (_, count) in SPLITS.items():
        for shard in range(count):
            path = shards / shard_name(split, shard)
            ours = list(read_records(path))
            theirs = [record.numpy() for record in tf.data.TFRecordDataset(str(path))]
            assert ours == theirs and count_records(path) == len(theirs)
            wanted = [record for record in expected if (record.split, record.shard) == (split, shard)]
            for payload, record in zip(ours, wanted, strict=True):
                fields = parse_example(payload)
                reference = tf_features(payload)
                assert fields.keys() == reference.keys()
                for name, values in reference.items():
                    assert fields[name] == pytest.approx(values) if "bbox/x" in name or "bbox/y" in name else (
                        fields[name] == values), name
                assert fields["image/class/label"] == [record.label]
                assert (fields["image/width"], fields["image/height"]) == ([record.width], [record.height])
                assert fields["image/class/synset"] == [record.synset.encode()]
                assert len(fields["image/object/bbox/xmin"]) == len(record.boxes)


def test_parse_example_reads_unpacked_and_negative_values() -> None:
    """proto2-style unpacked repeated fields and negative int64s, which TensorFlow's writer never produces."""

    def field(number: int, wire: int, content: bytes) -> bytes:
        key = bytes([number << 3 | wire])
        return key + (bytes([len(content)]) + content if wire == 2 else content)

    minus_two = bytes([0xFE] + [0xFF] * 8 + [0x01])  # the ten-byte varint of -2 as an int64
    int64_list = field(1, 0, b"\x05") + field(1, 0, minus_two)
    float_list = field(1, 5, struct.pack("<f", 1.5)) + field(1, 5, struct.pack("<f", -2.0))
    entries = [(b"ints", field(3, 2, int64_list)), (b"floats", field(2, 2, float_list)), (b"empty", b"")]
    features = b"".join(field(1, 2, field(1, 2, key) + field(2, 2, value)) for key, value in entries)
    payload = field(1, 2, features)
    assert parse_example(payload) == {"ints": [5, -2], "floats": [1.5, -2.0], "empty": []}
    assert tf_features(payload) == parse_example(payload)
    with pytest.raises(ValueError, match="malformed"):
        parse_example(payload[:-3])


def test_truncated_shard_names_the_file_and_offset(damaged: Path) -> None:
    path = damaged / shard_name("train", 1)
    truncate(path)
    with pytest.raises(DataError, match=rf"{path}: truncated record at byte \d+"):
        list(read_records(path))
    with pytest.raises(DataError, match=str(path)):
        count_records(path)


def test_corrupt_payload_and_length_are_caught_by_their_checksums(damaged: Path) -> None:
    payload_hit, length_hit = damaged / shard_name("train", 0), damaged / shard_name("validation", 0)
    flip_byte(payload_hit, 100)  # inside the first record's payload
    flip_byte(length_hit, 0)  # the first record's length
    with pytest.raises(DataError, match=rf"{payload_hit}: corrupt record at byte 0 \(data checksum mismatch\)"):
        list(read_records(payload_hit))
    count_records(payload_hit)  # the headers alone are intact
    with pytest.raises(DataError, match=rf"{length_hit}: corrupt record at byte 0 \(length checksum mismatch\)"):
        count_records(length_hit)


def test_source_counts_records_and_classes_with_and_without_a_manifest(shards: Path, damaged: Path) -> None:
    source = open_source(shards)
    assert (count_examples(source, True), count_examples(source, False), num_classes(source)) == (16, 6, CLASSES)
    size = (damaged / "train-00000-of-00002").stat().st_size
    (damaged / "manifest.json").write_text(
        json.dumps({"num_classes": 7, "shards": {"train-00000-of-00002": {"records": 100, "bytes": size}}}))
    source = open_source(damaged)
    assert (count_examples(source, True), num_classes(source)) == (108, 7)  # listed shard 100, other scanned 8


# --- tf.data pipeline -------------------------------------------------------------------------------------------


def test_training_batches_shapes_dtypes_and_labels(shards: Path) -> None:
    dataset = tf_pipeline.training_dataset(open_source(shards).train, 4, IMAGE_SIZE, seed=0)
    labels = []
    for images, batch_labels in dataset.take(6):  # 24 images: more than one pass over 16
        assert images.shape == (4, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == tf.float32
        assert batch_labels.dtype == tf.int32
        assert np.all(np.isfinite(images.numpy())) and -3 < float(tf.reduce_mean(images)) < 3
        labels.extend(batch_labels.numpy().tolist())
    assert set(labels) == set(range(CLASSES))


def test_evaluation_is_deterministic_complete_and_padded(shards: Path) -> None:
    dataset = tf_pipeline.evaluation_dataset(open_source(shards).evaluation, 4, IMAGE_SIZE, count=6)
    first = [[tensor.numpy() for tensor in batch] for batch in dataset.take(2)]
    second = [[tensor.numpy() for tensor in batch] for batch in dataset.take(2)]
    for a, b in zip(first, second, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    images, labels, valid = (np.concatenate(parts) for parts in zip(*first, strict=True))
    assert images.shape == (8, IMAGE_SIZE, IMAGE_SIZE, 3)
    assert valid.tolist() == [True] * 6 + [False] * 2  # one pass of 6, padded to whole batches
    assert sorted(labels[valid].tolist()) == sorted(record.label - 1 for record in plan()
                                                     if record.split == "validation")


def test_eval_preprocessing_resizes_the_shorter_side_then_crops_the_centre() -> None:
    """A 60x30 image, dark but for its middle third: resized to 74x37 (shorter side 32 * 256 / 224), its 32 px
    centre crop (columns 21..52) is bright in the middle and dark at its edges."""
    pixels = np.zeros((30, 60, 3), np.uint8)
    pixels[:, 20:40] = 200
    encoded = tf.io.encode_jpeg(pixels, quality=100)
    image = tf_pipeline.preprocess_eval(encoded, 32).numpy()
    assert image.shape == (32, 32, 3)
    expected = (200 / 255 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(image[:, 12:20].mean(axis=(0, 1)), expected, atol=0.1)
    assert image[:, 0].mean() < expected.mean() - 1  # the crop reaches into the dark thirds at its sides


def test_corrupt_shard_in_the_pipeline_is_named(damaged: Path) -> None:
    path = damaged / shard_name("train", 1)
    truncate(path, drop=200)
    files = open_source(damaged).train
    dataset = tf_pipeline.training_dataset(files, 4, IMAGE_SIZE, seed=0)
    with pytest.raises(DataError, match=rf"{path}: truncated record"), tf_pipeline.naming_corrupt_shard(files):
        for _ in dataset.take(50):
            pass


@pytest.mark.slow
def test_trainer_trains_on_train_shards_and_evaluates_on_validation_shards(shards: Path) -> None:
    model = ModelConfig(framework="tf", image_size=IMAGE_SIZE, num_classes=CLASSES, device="cpu")
    trainer = ENGINE.make_trainer(TrainConfig(model=model, data=str(shards), batch_size=4, epochs=1))
    assert (trainer.steps_per_epoch, trainer.eval_steps) == (4, 2)  # 16 and 6 records, batch 4
    trainer.train_step(0.01)
    assert np.isfinite(trainer.mean_loss())
    result = trainer.evaluate()
    assert result["examples"] == 6 and 0 <= result["top1"] <= result["top5"] == 1.0  # top-5 of 3 classes
