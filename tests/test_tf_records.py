"""TensorFlow's pipelines over the text and detection records (engines/tf/record_pipeline.py) and the builders'
batch_from_features: the records' values in the batches (translation filtered and padded, coco boxes scaled to the
resized image), each builder's loss on a real batch (the command line end to end:
tests/test_workloads_e2e.py, on converted data)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from tests.record_fixtures import write_records
from trainbench.data.source import open_source, record_format
from trainbench.data.tfrecord_reader import parse_example, read_records
from trainbench.errors import UsageError

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # as the engine: the official models must reach tf_keras
tf = pytest.importorskip("tensorflow")
from trainbench.config import ModelConfig  # noqa: E402
from trainbench.engines.input_batches import tf_batches, tf_training_dataset  # noqa: E402
from trainbench.engines.tf import record_pipeline as tf_records  # noqa: E402
from trainbench.engines.tf.workloads import builder_of  # noqa: E402


def records_of(folder: Path) -> list[dict[str, list]]:
    return [parse_example(payload) for path in sorted(folder.glob("train-*")) for payload in read_records(path)]


def first_batches(folder: Path, count: int, batch_size: int, **run: int) -> list[dict[str, np.ndarray]]:
    source = open_source(folder)
    dataset = tf_records.training_dataset(source.train, record_format(source), batch_size, seed=0, **run)
    return [{name: value.numpy() for name, value in batch.items()} for batch in dataset.take(count)]


def test_text_records_keep_their_values_and_translation_pairs_are_filtered_and_padded(tmp_path: Path) -> None:
    bert = write_records(tmp_path / "bert", "bert", records=8)
    [batch] = first_batches(bert, 1, 4, seq_len=32)
    assert batch["input_ids"].shape == (4, 32) and batch["input_ids"].dtype == np.int32
    assert batch["masked_lm_positions"].shape == (4, 5) and batch["masked_lm_weights"].dtype == np.float32
    assert batch["next_sentence_labels"].shape == (4,)
    written = {tuple(record["input_ids"]): record for record in records_of(bert)}
    for row in range(4):
        record = written[tuple(batch["input_ids"][row])]  # every row is a record, its features kept together
        assert batch["masked_lm_ids"][row].tolist() == record["masked_lm_ids"]
        assert batch["next_sentence_labels"][row] == record["next_sentence_labels"][0]
    with pytest.raises(UsageError, match="--seq-len 32"):
        first_batches(bert, 1, 4, seq_len=64)

    translation = write_records(tmp_path / "translation", "translation", records=24)
    pairs = [(record["inputs"], record["targets"]) for record in records_of(translation)]
    fitting = {(tuple(inputs), tuple(targets)) for inputs, targets in pairs if max(len(inputs), len(targets)) <= 8}
    assert 0 < len(fitting) < len(pairs)  # some pairs are too long for seq_len 8
    seen = set()
    for batch in first_batches(translation, 3 * len(pairs), 1, seq_len=8):
        assert batch["inputs"].shape == batch["targets"].shape == (1, 8)
        inputs, targets = batch["inputs"][0].tolist(), batch["targets"][0].tolist()
        seen.add((tuple(inputs[:inputs.index(1) + 1]), tuple(targets[:targets.index(1) + 1])))  # up to EOS_ID
        assert not any(inputs[inputs.index(1) + 1:]) and not any(targets[targets.index(1) + 1:])  # PAD_ID after
    assert seen == fitting


def test_coco_images_are_resized_padded_and_normalised_with_the_boxes_scaled(tmp_path: Path) -> None:
    from official.vision.ops import preprocess_ops

    folder = write_records(tmp_path / "coco", "coco", records=1, shards=1)
    [record] = records_of(folder)
    [batch] = first_batches(folder, 1, 1, image_size=128)
    height, width = record["image/height"][0], record["image/width"][0]
    scale = min(128 / height, 128 / width)
    scaled = (round(height * scale), round(width * scale))
    corners = np.stack([record[f"image/object/bbox/{key}"] for key in ("ymin", "xmin", "ymax", "xmax")], axis=1)
    expected = corners * np.array([*scaled, *scaled])
    np.testing.assert_allclose(batch["boxes"][0], expected, rtol=1e-5)
    assert batch["classes"][0].tolist() == record["image/object/class/label"]
    # The pixels of tf-models-official's RetinaNet parser (normalise, resize keeping the aspect, pad).
    image = preprocess_ops.normalize_image(tf.io.decode_jpeg(record["image/encoded"][0], channels=3))
    reference, _ = preprocess_ops.resize_and_crop_image(image, [128, 128], padded_size=[128, 128])
    np.testing.assert_allclose(batch["image"][0], reference.numpy(), atol=1e-4)
    assert batch["image"].shape == (1, 128, 128, 3) and not batch["image"][0, scaled[0]:].any()  # zero padding


@pytest.mark.slow  # builds and steps each tiny network: seconds
@pytest.mark.parametrize(("workload", "kind", "params"), [
    ("bert", "bert", {}), ("transformer", "translation", {}), ("retinanet", "coco", {"num_classes": 6})])
def test_batch_from_features_gives_the_synthetic_structure_and_the_loss_accepts_it(
        tmp_path: Path, workload: str, kind: str, params: dict[str, int]) -> None:
    model = ModelConfig(framework="tf", workload=workload, size="tiny", device="cpu", **params)
    builder = builder_of(model)
    network = builder.build(model)
    source = open_source(write_records(tmp_path / kind, kind, records=6))
    batch = next(iter(tf_training_dataset(source, model, 2)))
    synthetic = builder.synthetic_batch(model, 2, "/cpu:0", 0)
    tf.nest.assert_same_structure(batch, synthetic, check_types=False)
    for real, made in zip(tf.nest.flatten(batch), tf.nest.flatten(synthetic), strict=True):
        assert (real.shape, real.dtype) == (made.shape, made.dtype)
    loss = float(builder.loss(network, batch, 0.0))
    assert math.isfinite(loss) and loss > 0
    if workload == "retinanet":  # the records' boxes matched anchors: some positive anchors
        _, labels = batch
        assert any(int(tf.reduce_sum(tf.cast(targets > 0, tf.int32))) for targets in labels["cls_targets"].values())


def test_tf_batches_names_a_corrupt_shard_and_refuses_another_workloads_records(tmp_path: Path) -> None:
    from trainbench.config import TrainConfig
    from trainbench.engines.tf.engine import ENGINE

    folder = write_records(tmp_path / "bert", "bert", records=8, shards=1)
    bert = ModelConfig(framework="tf", workload="bert", size="tiny", device="cpu")
    with pytest.raises(UsageError, match="--workload bert trains end to end on its learnable synthetic set only"):
        ENGINE.make_trainer(TrainConfig(bert, data=str(folder), batch_size=2, epochs=1, decay_epochs=()))
    [shard] = folder.glob("train-*")
    shard.write_bytes(shard.read_bytes()[:-20])
    with pytest.raises(UsageError, match=shard.name):
        next(tf_batches(open_source(folder), 2, 224, 0, None, "cpu"))
    model = ModelConfig(framework="tf", workload="transformer", size="tiny", device="cpu")
    with pytest.raises(UsageError, match="holds bert records; --workload transformer reads translation"):
        tf_training_dataset(open_source(folder), model, 2)
