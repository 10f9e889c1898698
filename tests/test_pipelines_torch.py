"""The PyTorch input pipeline over TFRecord shards (written by TensorFlow in a subprocess) and image-folder trees.

Nothing here imports TensorFlow: torch must never share a process with it.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.tfrecord_support import (
    CLASSES,
    IMAGE_SIZE,
    flip_byte,
    jpeg_bytes,
    plan,
    record_seed,
    shard_name,
    shards_in_subprocess,
    truncate,
    write_image_folder,
)
from trainbench.config import BenchConfig, ModelConfig
from trainbench.data.source import count_examples, num_classes, open_source
from trainbench.data.tfrecord_reader import DataError, read_records
from trainbench.engines.torch import image_pipeline as torch_pipeline
from trainbench.engines.torch.engine import ENGINE
from trainbench.errors import UsageError


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.getbasetemp() / "torch-shards"
    shards_in_subprocess(folder)
    return folder


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    write_image_folder(root)
    return root


def loader(folder: Path, train: bool, workers: int = 0, batch: int = 4) -> torch.utils.data.DataLoader:
    return torch_pipeline.make_loader(open_source(folder), batch, IMAGE_SIZE, train=train, workers=workers)


def take(batches: Iterator[tuple[torch.Tensor, torch.Tensor]], count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [next(batches) for _ in range(count)]


@pytest.mark.slow
def test_records_decode_to_the_images_and_labels_written(shards: Path) -> None:
    """The torch side's decoding of each record: the very JPEG bytes TensorFlow wrote, its size and label."""
    for record in plan():
        path = shards / shard_name(record.split, record.shard)
        position = [r.index for r in plan() if (r.split, r.shard) == (record.split, record.shard)].index(record.index)
        payload = list(read_records(path))[position]
        image_bytes, label = torch_pipeline.decode_record(payload, str(path))
        assert image_bytes == jpeg_bytes(record.width, record.height, record_seed(record))
        assert label == record.label - 1
        assert torch_pipeline.decode(image_bytes, str(path)).size == (record.width, record.height)


@pytest.mark.parametrize("workers", [0, 2])
def test_training_batches_shapes_dtypes_and_labels(shards: Path, workers: int) -> None:
    labels = []
    for images, batch_labels in take(torch_pipeline.batches(loader(shards, True, workers), endless=True), 6):
        assert images.shape == (4, 3, IMAGE_SIZE, IMAGE_SIZE) and images.dtype == torch.float32
        assert batch_labels.dtype == torch.int64
        assert torch.isfinite(images).all() and -3 < float(images.mean()) < 3
        labels.extend(batch_labels.tolist())
    assert set(labels) == set(range(CLASSES))  # 24 images: more than one pass over 16, all full batches


@pytest.mark.parametrize("workers", [0, 2])
def test_evaluation_is_one_deterministic_pass(shards: Path, workers: int) -> None:
    evaluation = loader(shards, False, workers)
    first = list(torch_pipeline.batches(evaluation))
    second = list(torch_pipeline.batches(evaluation))
    assert sum(len(labels) for _, labels in first) == 6  # every record once, the last batch partial
    assert Counter(label for _, labels in first for label in labels.tolist()) == {0: 2, 1: 2, 2: 2}
    for (images_a, labels_a), (images_b, labels_b) in zip(first, second, strict=True):
        assert torch.equal(images_a, images_b) and torch.equal(labels_a, labels_b)


def test_channels_last_batches(shards: Path) -> None:
    images, _ = next(torch_pipeline.batches(loader(shards, True), channels_last=True, endless=True))
    assert images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous()


def test_image_folder_tree(tree: Path) -> None:
    source = open_source(tree)
    assert source.train == (tree / "train",) and source.evaluation == (tree / "val",)
    assert (num_classes(source), count_examples(source, True), count_examples(source, False)) == (CLASSES, 9, 9)
    images, labels = next(torch_pipeline.batches(loader(tree, True, workers=2), endless=True))
    assert images.shape == (4, 3, IMAGE_SIZE, IMAGE_SIZE) and labels.dtype == torch.int64
    evaluation = [labels for _, labels in torch_pipeline.batches(loader(tree, False))]
    assert sorted(torch.cat(evaluation).tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_tree_without_train_folder_serves_both_splits(tmp_path: Path, tree: Path) -> None:
    shutil.copytree(tree / "train", tmp_path / "flat")
    source = open_source(tmp_path / "flat")
    assert source.train == source.evaluation == (tmp_path / "flat",)


def test_unreadable_image_in_a_tree_is_named(tmp_path: Path, tree: Path) -> None:
    shutil.copytree(tree, tmp_path / "tree")
    broken = tmp_path / "tree" / "val" / "n00000001" / "image_0.JPEG"
    broken.write_bytes(b"not a jpeg at all")
    with pytest.raises(DataError, match=f"{broken}: not a decodable image"):
        list(torch_pipeline.batches(loader(tmp_path / "tree", False, workers=1)))


@pytest.mark.slow  # DataLoader worker processes start (seconds)
@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_shard_in_a_worker_is_named(shards: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "shards"
    shutil.copytree(shards, folder)
    path = folder / shard_name("validation", 1)
    if damage == "truncate":
        truncate(path, 300)
        reason = "truncated record"
    else:
        flip_byte(path, 200)
        reason = "corrupt record at byte 0"
    with pytest.raises(DataError, match=f"^{path}: {reason}"):  # the worker's message, not its traceback
        list(torch_pipeline.batches(loader(folder, False, workers=2)))


@pytest.mark.slow
def test_runner_takes_each_step_from_the_pipeline(shards: Path) -> None:
    config = BenchConfig(model=ModelConfig(image_size=IMAGE_SIZE, num_classes=CLASSES, device="cpu"), batch_size=2,
                         data=str(shards))
    runner = ENGINE.make_runner(config)
    before = runner.network.fc.bias.detach().clone()
    runner.step()
    runner.step()
    runner.sync()
    assert not torch.equal(before, runner.network.fc.bias)


def test_missing_or_empty_data_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"{tmp_path / 'nothing'} does not exist"):
        open_source(tmp_path / "nothing")
    (tmp_path / "empty" / "train" / "n1").mkdir(parents=True)
    (tmp_path / "empty" / "notes.txt").write_text("no images")
    with pytest.raises(UsageError, match=f"{tmp_path / 'empty'} holds neither TFRecord shards"):
        open_source(tmp_path / "empty")
