"""The GPU loader (``--loader gpu``) run on the CPU: its decoding and augmentation are device-agnostic, so the same
code is checked here against the CPU loader's output; on a GPU only the device changes (benchmarks/gpu_speed.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.conftest import run_cli
from tests.tfrecord_support import CLASSES, jpeg_bytes, write_image_folder
from trainbench.data.source import open_source
from trainbench.data.tfrecord_reader import DataError
from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
from trainbench.engines.torch import image_pipeline as torch_pipeline
from trainbench.engines.torch.gpu_image_pipeline import Box, eval_box

SIZE = 64


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real TFRecords from the suite's own generator and converter: 4 classes, 12 JPEGs each, up to 160x120."""
    root = tmp_path_factory.mktemp("gpu-loader")
    for args in (["synth", "--output", str(root / "tree"), "--classes", "4", "--train-per-class", "12",
                  "--val-per-class", "4", "--size", "160x120", "--workers", "1"],
                 ["convert", str(root / "tree"), "--output", str(root / "shards"), "--train-shards", "2",
                  "--validation-shards", "1", "--workers", "1"]):
        done = run_cli("data", *args)
        assert done.returncode == 0, done.stderr
    return root / "shards"


def all_batches(loader_kind: str, folder: Path, train: bool, count: int, batch: int = 8) -> list[torch.Tensor]:
    source = open_source(folder)
    if loader_kind == "gpu":
        loader = gpu_pipeline.make_loader(source, batch, train=train, workers=0)
        batches = gpu_pipeline.batches(loader, SIZE, "cpu", train=train, endless=train)
    else:
        batches = torch_pipeline.batches(torch_pipeline.make_loader(source, batch, SIZE, train=train, workers=0),
                                         endless=train)
    taken = [next(batches) for _ in range(count)]
    batches.close()
    return taken


def test_training_batches_have_the_cpu_loaders_statistics(shards: Path) -> None:
    """Same records, same crop law: per-channel mean and spread of many augmented images agree."""
    torch.manual_seed(0)
    gpu = torch.cat([images for images, _ in all_batches("gpu", shards, True, 6)])
    cpu = torch.cat([images for images, _ in all_batches("cpu", shards, True, 6)])
    assert gpu.shape == cpu.shape == (48, 3, SIZE, SIZE) and gpu.dtype == torch.float32
    gpu_mean, cpu_mean = gpu.mean(dim=(0, 2, 3)), cpu.mean(dim=(0, 2, 3))
    assert torch.allclose(gpu_mean, cpu_mean, atol=0.15), (gpu_mean, cpu_mean)
    ratio = gpu.std(dim=(0, 2, 3)) / cpu.std(dim=(0, 2, 3))
    assert ((ratio > 0.85) & (ratio < 1.15)).all(), ratio


def test_evaluation_batches_are_the_cpu_loaders_images(shards: Path) -> None:
    """No randomness in evaluation: the same images, labels in the same order, pixels close (the two resize
    paths differ by interpolation only)."""
    gpu, cpu = all_batches("gpu", shards, False, 2), all_batches("cpu", shards, False, 2)
    for (gpu_images, gpu_labels), (cpu_images, cpu_labels) in zip(gpu, cpu, strict=True):
        assert torch.equal(gpu_labels, cpu_labels)
        assert (gpu_images - cpu_images).abs().mean() < 0.1
        per_image = torch.corrcoef(torch.stack([gpu_images.flatten(), cpu_images.flatten()]))[0, 1]
        assert per_image > 0.98


def test_random_crops_and_flips_vary_and_stay_in_range(shards: Path) -> None:
    torch.manual_seed(1)
    first, second = (images for images, _ in all_batches("gpu", shards, True, 2))
    assert not torch.equal(first, second)
    low = (0 - max(gpu_pipeline.MEAN_RGB)) / min(gpu_pipeline.STD_RGB)
    high = (1 - min(gpu_pipeline.MEAN_RGB)) / min(gpu_pipeline.STD_RGB)
    assert low - 0.01 <= float(first.min()) and float(first.max()) <= high + 0.01


def test_an_image_folder_with_pngs_gives_full_batches(tmp_path: Path) -> None:
    """A PNG is decoded by Pillow in the worker and travels as pixels; the JPEGs stay encoded."""
    write_image_folder(tmp_path, per_class=3)
    labels = torch.cat([labels for _, labels in all_batches("gpu", tmp_path, True, 3, batch=4)])
    assert set(labels.tolist()) <= set(range(CLASSES)) and len(labels) == 12


def test_batches_keep_channels_last_when_asked(shards: Path) -> None:
    loader = gpu_pipeline.make_loader(open_source(shards), 4, train=True, workers=0)
    batches = gpu_pipeline.batches(loader, SIZE, "cpu", train=True, channels_last=True, endless=True)
    images, _ = next(batches)
    batches.close()
    assert images.is_contiguous(memory_format=torch.channels_last)


def test_an_undecodable_image_is_a_data_error_naming_it(tmp_path: Path) -> None:
    """Bytes that start as a JPEG but are not one: the batched decode fails, the image-by-image retry names it."""
    good = jpeg_bytes(40, 30, 0)
    batch = gpu_pipeline.collate_encoded([(gpu_pipeline.encoded_image(good, "good.JPEG"), 0),
                                          (gpu_pipeline.encoded_image(good[:3] + b"\0" * 200, "bad.JPEG"), 1)])
    with pytest.raises(DataError, match=r"bad\.JPEG: not a decodable image"):
        gpu_pipeline.decode_batch(batch, "cpu")


def test_a_worker_error_reaches_the_consumer_and_the_thread_ends(tmp_path: Path) -> None:
    write_image_folder(tmp_path, per_class=2, evaluation=False)
    (next((tmp_path / "train").iterdir()) / "broken.JPEG").write_bytes(b"\xff\xd8\xff" + b"\0" * 100)
    loader = gpu_pipeline.make_loader(open_source(tmp_path), 2 * CLASSES + 1, train=False, workers=0)
    batches = gpu_pipeline.batches(loader, SIZE, "cpu", train=False)
    with pytest.raises(DataError, match=r"broken\.JPEG"):
        next(batches)
    batches.close()
    assert not batches._thread.is_alive()


def test_close_stops_a_producer_waiting_on_a_full_queue(shards: Path) -> None:
    loader = gpu_pipeline.make_loader(open_source(shards), 4, train=True, workers=0)
    batches = gpu_pipeline.batches(loader, SIZE, "cpu", train=True, endless=True)
    next(batches)
    batches.close()
    assert not batches._thread.is_alive()


@pytest.mark.parametrize(("height", "width", "expected"), [
    (300, 400, Box(19, 69, 262, 262)),  # 256 px shorter side then 224 centre: 224 / 256 of the shorter side
    (256, 256, Box(16, 16, 224, 224)),
    (100, 1000, Box(6, 456, 88, 88)),
])
def test_evaluation_box_is_what_resize_then_centre_crop_keeps(height: int, width: int, expected: Box) -> None:
    assert eval_box(height, width, 224) == expected


def test_non_jpeg_bytes_are_decoded_in_the_worker() -> None:
    out = io.BytesIO()
    Image.fromarray(np.full((5, 7, 3), 200, np.uint8)).save(out, "PNG")
    image = gpu_pipeline.encoded_image(out.getvalue(), "x.png")
    assert (image.height, image.width) == (5, 7) and len(image.payload) == 3 * 5 * 7
    assert gpu_pipeline.encoded_image(jpeg_bytes(8, 8, 0), "x.JPEG").height == 0


def test_worker_processes_hand_over_one_buffer_per_batch(shards: Path) -> None:
    """With DataLoader worker processes the encoded batch crosses the process boundary whole (one tensor of bytes,
    its sizes and names), and every image arrives."""
    loader = gpu_pipeline.make_loader(open_source(shards), 6, train=True, workers=2)
    batch = next(iter(loader))
    assert isinstance(batch, gpu_pipeline.EncodedBatch)
    assert batch.data.dtype == torch.uint8 and sum(batch.sizes) == len(batch.data) == batch.data.numel()
    assert len(batch.names) == len(batch.shapes) == len(batch.labels) == 6
    assert all(name.startswith(str(shards)) and " record " in name for name in batch.names)
    batches = gpu_pipeline.batches(loader, SIZE, "cpu", train=True, endless=True)
    images, labels = next(batches)
    batches.close()
    assert images.shape == (6, 3, SIZE, SIZE) and set(labels.tolist()) <= {0, 1, 2, 3}
