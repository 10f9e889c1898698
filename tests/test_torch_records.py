"""The PyTorch pipelines of the converted records (bert, gpt2, translation, coco): decoding one record by its
schema, DataLoaders over fixture shards, the builders' batches from them, and the command line's refusals (the
runs end to end: tests/test_workloads_e2e.py, on converted data)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.conftest import assert_one_line_error, run_cli
from tests.record_fixtures import TINY_SETTINGS, write_records
from trainbench.config import ModelConfig
from trainbench.data.preprocess_params import MEAN_RGB
from trainbench.data.record_decode import decode_record
from trainbench.data.record_schemas import EOS_ID, PAD_ID, SCHEMAS, RecordKind
from trainbench.data.shards import shard_name
from trainbench.data.source import open_source
from trainbench.data.tfrecord_reader import DataError, read_records
from trainbench.data.tfrecord_writer import (
    bytes_feature,
    encode_example,
    float_feature,
    int64_feature,
    write_shard,
)
from trainbench.engines.torch import record_pipeline as torch_records
from trainbench.engines.torch.workloads import builder_of
from trainbench.errors import UsageError

KINDS: tuple[RecordKind, ...] = ("bert", "gpt2", "translation", "coco")
WORKLOAD_OF = {"bert": "bert", "gpt2": "gpt2", "translation": "transformer", "coco": "retinanet"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("records")
    return {kind: write_records(root / kind, kind, records=8, shards=2) for kind in KINDS}


def first_payload(folder: Path) -> tuple[Path, bytes]:
    path = folder / shard_name("train", 0, 2)
    return path, next(read_records(path))


# --- record_decode --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_decodes_to_arrays_of_its_schema(folders: dict[str, Path], kind: RecordKind) -> None:
    _, payload = first_payload(folders[kind])
    settings = TINY_SETTINGS[kind]
    features = decode_record(payload, kind, settings, "x")
    assert set(features) == set(SCHEMAS[kind])
    for key, feature in SCHEMAS[kind].items():
        expected = {"int64": np.int64, "float": np.float32, "bytes": object}[feature.type]
        assert features[key].dtype == expected and features[key].ndim == 1, key
        if (size := feature.size(settings)) is not None:
            assert len(features[key]) == size, key
    if kind == "translation":
        assert features["inputs"][-1] == EOS_ID and features["targets"][-1] == EOS_ID
    if kind == "coco":
        assert Image.open(io.BytesIO(features["image/encoded"][0])).format == "JPEG"


def test_a_record_of_another_length_or_kind_is_a_data_error_naming_it(folders: dict[str, Path]) -> None:
    path, payload = first_payload(folders["bert"])
    with pytest.raises(DataError, match=r"record 0: feature 'input_ids' has 32 values, the folder's records 64"):
        decode_record(payload, "bert", {**TINY_SETTINGS["bert"], "seq_len": 64}, f"{path} record 0")
    with pytest.raises(DataError, match=r"not a translation record \(it has no feature 'inputs'\)"):
        decode_record(payload, "translation", TINY_SETTINGS["translation"], "r")
    with pytest.raises(DataError, match="'masked_lm_weights' holds values that are not float"):
        decode_record(encode_example({**{key: int64_feature([0]) for key in SCHEMAS["bert"]}}), "bert",
                      {"seq_len": 1, "max_predictions_per_seq": 1, "vocab_size": 9}, "r")


# --- the loaders ----------------------------------------------------------------------------------------------


def loader_batches(folder: Path, batch_size: int, workers: int, seq_len: int = 0, image_size: int = 64,
                   train: bool = False) -> list[dict[str, torch.Tensor]]:
    loader = torch_records.make_loader(open_source(folder), batch_size, seq_len=seq_len, image_size=image_size,
                                       train=train, workers=workers)
    return [next(iter(loader))] if train else list(loader)  # training batches never end: its first one


@pytest.mark.parametrize("workers", [0, 2])
def test_text_loaders_yield_fixed_shapes_of_the_records_values(folders: dict[str, Path], workers: int) -> None:
    bert = loader_batches(folders["bert"], 4, workers)
    assert len(bert) == 2 and bert[0]["input_ids"].shape == (4, 32) and bert[0]["input_ids"].dtype == torch.int64
    assert bert[0]["masked_lm_positions"].shape == (4, 5) and bert[0]["masked_lm_weights"].dtype == torch.float32
    # evaluation order: the shards in turn, each in file order (workers interleave theirs)
    rows = {tuple(row.tolist()) for batch in bert for row in batch["input_ids"]}
    expected = {tuple(decode_record(p, "bert", TINY_SETTINGS["bert"], "r")["input_ids"].tolist())
                for shard in sorted(folders["bert"].glob("train-*")) for p in read_records(shard)}
    assert rows == expected
    [gpt2, _] = loader_batches(folders["gpt2"], 4, workers)
    assert gpt2["input_ids"].shape == (4, 33)
    pairs = loader_batches(folders["translation"], 8, workers, seq_len=16)
    assert sum(len(batch["inputs"]) for batch in pairs) == 8 and pairs[0]["targets"].shape[1] == 16


def test_translation_pairs_are_padded_and_the_longer_ones_left_out(folders: dict[str, Path]) -> None:
    records = [decode_record(p, "translation", TINY_SETTINGS["translation"], "r")
               for shard in sorted(folders["translation"].glob("train-*")) for p in read_records(shard)]
    fitting = [r for r in records if max(len(r["inputs"]), len(r["targets"])) <= 8]
    assert 0 < len(fitting) < len(records)  # the fixture's lengths straddle 8
    batches = loader_batches(folders["translation"], 1, 0, seq_len=8)
    assert len(batches) == len(fitting)
    for batch, record in zip(batches, fitting, strict=True):
        inputs = batch["inputs"][0].tolist()
        assert inputs[:len(record["inputs"])] == record["inputs"].tolist()
        assert set(inputs[len(record["inputs"]):]) <= {PAD_ID} and len(inputs) == 8


def coco_record(folder: Path, width: int, height: int, boxes: list[tuple[float, float, float, float]],
                crowd: list[int]) -> Path:
    """One image of one colour with the given normalised boxes (xmin, ymin, xmax, ymax), labels 1, 2, ..."""
    encoded = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(encoded, "PNG")
    labels = list(range(1, len(boxes) + 1))
    payload = encode_example({
        "image/encoded": bytes_feature([encoded.getvalue()]), "image/format": bytes_feature([b"png"]),
        "image/height": int64_feature([height]), "image/width": int64_feature([width]),
        "image/filename": bytes_feature([b"a.png"]), "image/source_id": bytes_feature([b"1"]),
        "image/key/sha256": bytes_feature([b"0" * 64]),
        **{f"image/object/bbox/{name}": float_feature([box[i] for box in boxes])
           for i, name in enumerate(("xmin", "ymin", "xmax", "ymax"))},
        "image/object/class/text": bytes_feature([b"c"] * len(boxes)),
        "image/object/class/label": int64_feature(labels), "image/object/is_crowd": int64_feature(crowd),
        "image/object/area": float_feature([1.0] * len(boxes)),
    })
    folder.mkdir()
    write_shard(folder / shard_name("train", 0, 1), [payload])
    (folder / "manifest.json").write_text(json.dumps({"kind": "coco", "settings": {"num_classes": 3}}))
    return folder


def test_coco_images_are_letterboxed_and_their_boxes_scaled(tmp_path: Path) -> None:
    """200 x 100 to 64: scale 0.32, the image in the top 32 rows, the rest the mean colour; the crowd box and the
    box without area are dropped, the real one repeated to the fixed count."""
    folder = coco_record(tmp_path / "coco", 200, 100, [(0.1, 0.2, 0.5, 0.6), (0.0, 0.0, 1.0, 1.0),
                                                       (0.3, 0.3, 0.3, 0.4)], crowd=[0, 1, 0])
    [batch] = loader_batches(folder, 1, 0, image_size=64)
    image = batch["image"][0]
    assert image.shape == (3, 64, 64) and image.dtype == torch.float32
    assert image[0, :32].mean() == pytest.approx(200 / 255, abs=0.02)
    assert torch.allclose(image[:, 40:, :], torch.tensor(MEAN_RGB).view(3, 1, 1), atol=1 / 255)
    assert int(batch["num_boxes"][0]) == 1
    assert batch["boxes"].shape == (1, torch_records.MAX_INSTANCES, 4)
    assert batch["boxes"][0, 0].tolist() == pytest.approx([6.4, 6.4, 32.0, 19.2], abs=1e-4)
    assert (batch["boxes"][0] == batch["boxes"][0, 0]).all() and (batch["labels"][0] == 1).all()


def test_a_coco_image_without_a_usable_box_is_left_out(tmp_path: Path) -> None:
    folder = coco_record(tmp_path / "coco", 50, 50, [(0.1, 0.1, 0.5, 0.5)], crowd=[1])
    assert loader_batches(folder, 1, 0) == []


# --- the builders' batches ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_batch_from_features_matches_the_synthetic_batch_and_trains(folders: dict[str, Path],
                                                                  kind: RecordKind) -> None:
    model = ModelConfig(framework="torch", workload=WORKLOAD_OF[kind], size="tiny", device="cpu",
                        num_classes=6 if kind == "coco" else None)
    [features, *_] = loader_batches(folders[kind], 2, 0, seq_len=model.params().get("seq_len", 0),
                                    image_size=model.params().get("image_size", 0), train=True)
    builder = builder_of(model)
    batch = builder.batch_from_features(features, model, "cpu")
    synthetic = builder.synthetic_batch(model, 2, "cpu", 0)
    assert structure(batch) == structure(synthetic)
    torch.manual_seed(0)
    network = builder.build(model)
    loss = builder.loss(network, batch, 0.0)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()


def structure(batch: object) -> object:
    """The nesting, keys, dtypes and ranks of a batch (not its sizes: a record's counts may differ)."""
    if isinstance(batch, torch.Tensor):
        return (batch.dtype, batch.ndim)
    if isinstance(batch, dict):
        return {key: structure(value) for key, value in batch.items()}
    return tuple(structure(item) for item in batch)  # type: ignore[attr-defined]


def test_the_records_labels_are_what_the_losses_count(folders: dict[str, Path]) -> None:
    """bert: padding slots (weight 0) ignored; transformer: the decoder reads PAD_ID then the target, padding
    ignored; gpt2: the block's first seq_len ids."""
    bert = ModelConfig(framework="torch", workload="bert", size="tiny", device="cpu")
    [features, *_] = loader_batches(folders["bert"], 4, 0)
    inputs, targets = builder_of(bert).batch_from_features(features, bert, "cpu")
    assert torch.equal(inputs["masked_positions"], features["masked_lm_positions"])
    assert torch.equal(targets["masked_ids"] == -100, features["masked_lm_weights"] == 0)
    transformer = ModelConfig(framework="torch", workload="transformer", size="tiny", device="cpu")
    [pairs, *_] = loader_batches(folders["translation"], 4, 0, seq_len=16)
    (source, target_in), target_out = builder_of(transformer).batch_from_features(pairs, transformer, "cpu")
    assert torch.equal(source, pairs["inputs"]) and (target_in[:, 0] == PAD_ID).all()
    assert torch.equal(target_in[:, 1:], pairs["targets"][:, :-1])
    assert torch.equal(target_out == -100, pairs["targets"] == PAD_ID)
    gpt2 = ModelConfig(framework="torch", workload="gpt2", size="tiny", device="cpu")
    [blocks, *_] = loader_batches(folders["gpt2"], 4, 0)
    ids, labels = builder_of(gpt2).batch_from_features(blocks, gpt2, "cpu")
    assert torch.equal(ids, blocks["input_ids"][:, :32]) and torch.equal(labels, ids)


def test_a_kind_without_a_pipeline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no PyTorch record pipeline for imagenet"):
        torch_records.preparer("imagenet", seq_len=0, image_size=0, train=False)


# --- the command line -----------------------------------------------------------------------------------------


def refused(*args: str) -> object:
    return run_cli("throughput", "--device", "cpu", "--size", "tiny", "--framework", "torch", "--batch-sizes", "1",
                   *args)


@pytest.mark.slow  # a real process that loads torch: seconds
def test_a_folder_the_workload_cannot_read_is_refused_in_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    bert, gpt2, coco = str(folders["bert"]), str(folders["gpt2"]), str(folders["coco"])
    assert_one_line_error(refused("--workload", "gpt2", "--data", bert), "holds bert records", "reads gpt2",
                          "data text --workload gpt2")
    assert_one_line_error(refused("--workload", "bert", "--data", bert, "--seq-len", "16"), "--seq-len 16",
                          "32 tokens")
    assert_one_line_error(refused("--workload", "retinanet", "--data", coco, "--num-classes", "5"),
                          "--num-classes 5 is too few", "--num-classes 6")
    large = write_records(tmp_path / "large", "gpt2", records=2, shards=1,
                          settings={"seq_len": 32, "block_len": 33, "vocab_size": 1000})
    assert_one_line_error(refused("--workload", "gpt2", "--data", str(large)), "1000 tokens",
                          "--vocab-size 512", "--size full")
    assert_one_line_error(refused("--workload", "retinanet", "--data", coco, "--loader", "gpu"), "--loader cpu")
    train = run_cli("train", "--workload", "gpt2", "--data", gpt2, "--device", "cpu", "--size", "tiny", "--framework",
                    "torch", "--output", str(tmp_path / "t"))
    assert_one_line_error(train, "train --data", "drop --data")
