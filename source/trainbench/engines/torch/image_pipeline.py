"""PyTorch input: the TFRecord shards (read without TensorFlow) or an image-folder tree, in DataLoader workers.

The preprocessing is the TensorFlow pipeline's (parameters from ``preprocess_params``) in torchvision transforms:
training ``RandomResizedCrop`` (same area and aspect ranges; it samples over the whole image, as torchvision does,
where TensorFlow samples around the record's boxes) and a random flip; evaluation ``Resize`` of the shorter side
to ``image_size * 256 / 224`` and ``CenterCrop``; then the ImageNet mean and standard deviation. Images are
decoded by Pillow, as torchvision's ImageNet reference does (``torchvision.io``'s decoders are deprecated since
torchvision 0.29); labels are 0-based int64.

TFRecord shards are split between ranks and DataLoader workers by file, each reading its own shards in turn
through a shuffle buffer (so a worker without a shard of its own idles: use at least as many shards as workers);
an image-folder tree is torchvision's ``ImageFolder`` with a shuffling sampler.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision
from PIL import Image, UnidentifiedImageError
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset, get_worker_info
from torchvision.transforms import v2

from trainbench.data import parallel
from trainbench.data.preprocess_params import (
    CROP_AREA_RANGE,
    CROP_ASPECT_RANGE,
    MEAN_RGB,
    SHUFFLE_BUFFER,
    STD_RGB,
    resize_size,
)
from trainbench.data.source import DataSource
from trainbench.data.tfrecord_reader import DataError, parse_example, read_records

Transform = Callable[[Image.Image], torch.Tensor]
Prepare = Callable[[bytes, str], Any]  # encoded image and its name -> what the dataset yields for it


# --- preprocessing ----------------------------------------------------------------------------------------------


def _normalized() -> list[v2.Transform]:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN_RGB, STD_RGB)]


def train_transform(image_size: int) -> Transform:
    crop = v2.RandomResizedCrop(image_size, scale=CROP_AREA_RANGE, ratio=CROP_ASPECT_RANGE, antialias=True)
    return v2.Compose([crop, v2.RandomHorizontalFlip(), *_normalized()])


def eval_transform(image_size: int) -> Transform:
    return v2.Compose([v2.Resize(resize_size(image_size), antialias=True), v2.CenterCrop(image_size), *_normalized()])


def decode(data: bytes, name: str) -> Image.Image:
    """Encoded image bytes to an RGB image; an undecodable image is a DataError naming ``name``."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")  # decodes now: a truncated file fails here, not in a transform
    except UnidentifiedImageError:
        raise DataError(f"{name}: not a decodable image (no image format Pillow knows)") from None
    except (OSError, ValueError, SyntaxError) as error:  # truncated or damaged image data
        raise DataError(f"{name}: not a decodable image ({error})") from None


def decoded(transform: Transform, data: bytes, name: str) -> torch.Tensor:
    """The CPU loader's image: decoded by Pillow, then transformed."""
    return transform(decode(data, name))


def decode_record(payload: bytes, name: str) -> tuple[bytes, int]:
    """The encoded image and 0-based label of one serialised Example in the standard ImageNet schema."""
    try:
        features = parse_example(payload)
        image, label = features["image/encoded"][0], features["image/class/label"][0]
    except (ValueError, KeyError, IndexError) as error:
        raise DataError(f"{name}: not an ImageNet tf.train.Example ({type(error).__name__}: {error})") from None
    if not isinstance(image, bytes) or not isinstance(label, int):
        raise DataError(f"{name}: image/encoded or image/class/label of the wrong type")
    return image, label - 1


# --- datasets ---------------------------------------------------------------------------------------------------


def _shuffled(items: Iterator[tuple[Path, int, bytes]], size: int,
              rng: np.random.Generator) -> Iterator[tuple[Path, int, bytes]]:
    """A shuffle buffer, as tf.data's: each item leaves at a random time among the next ``size``."""
    buffer: list[tuple[Path, int, bytes]] = []
    for item in items:
        buffer.append(item)
        if len(buffer) >= size:
            index = int(rng.integers(len(buffer)))
            buffer[index], buffer[-1] = buffer[-1], buffer[index]
            yield buffer.pop()
    rng.shuffle(buffer)  # numpy shuffles any mutable sequence in place
    yield from buffer


class ShardedRecords(IterableDataset):
    """Records of TFRecord shards, split by file between ranks and then DataLoader workers (a worker without a shard
    of its own idles: use at least as many shards as workers), shuffled through a buffer when training; a subclass
    makes each record's example (``_example``; None leaves the record out)."""

    def __init__(self, files: Sequence[Path], *, shuffle: bool, repeat: bool, seed: int = 0, rank: int = 0,
                 world: int = 1) -> None:
        self._files = [Path(path) for path in files][rank::world]
        self._shuffle, self._repeat, self._seed, self._rank = shuffle, repeat, seed, rank
        self._passes = 0  # counted in each worker's copy: a persistent worker reshuffles every pass

    def _records(self, files: Sequence[Path]) -> Iterator[tuple[Path, int, bytes]]:
        for path in files:
            for index, payload in enumerate(read_records(path)):
                yield path, index, payload

    def _example(self, payload: bytes, name: str, rng: np.random.Generator) -> Any:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        worker = get_worker_info()
        worker_id, workers = (worker.id, worker.num_workers) if worker else (0, 1)
        files = self._files[worker_id::workers]
        while files:
            rng = np.random.default_rng((self._seed, self._rank, worker_id, self._passes))
            self._passes += 1
            order = [files[i] for i in rng.permutation(len(files))] if self._shuffle else files
            records = self._records(order)
            if self._shuffle:
                records = _shuffled(records, max(1, SHUFFLE_BUFFER // workers), rng)
            made = False
            for path, index, payload in records:
                example = self._example(payload, f"{path} record {index}", rng)
                if example is not None:
                    made = True
                    yield example
            if not self._repeat or not made:  # a pass that made no example makes none the next: end, never spin
                return


class TFRecordImages(ShardedRecords):
    """(image, label) examples of ImageNet shards; ``prepare`` makes the image of its encoded bytes (decoded and
    transformed, or kept encoded for the GPU)."""

    def __init__(self, files: Sequence[Path], prepare: Prepare, *, shuffle: bool, repeat: bool, seed: int = 0,
                 rank: int = 0, world: int = 1) -> None:
        super().__init__(files, shuffle=shuffle, repeat=repeat, seed=seed, rank=rank, world=world)
        self._prepare = prepare

    def _example(self, payload: bytes, name: str, rng: np.random.Generator) -> tuple[Any, int]:
        image_bytes, label = decode_record(payload, name)
        return self._prepare(image_bytes, name), label


def _read_image(path: str) -> Image.Image:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror})") from None
    return decode(data, path)


def image_folder(root: Path, transform: Transform) -> torchvision.datasets.ImageFolder:
    try:
        return torchvision.datasets.ImageFolder(str(root), transform=transform, loader=_read_image)
    except FileNotFoundError as error:  # a class folder without images
        raise DataError(f"{root}: {error}") from None


# --- loaders and batches ----------------------------------------------------------------------------------------


# Batches each worker prepares ahead (DataLoader's prefetch_factor, its default 2), while the workers are few; more
# workers than this ahead in all get one each: every prefetched batch sits in shared memory and, on a GPU, is pinned.
PREFETCH_PER_WORKER = 2
PREFETCH_AHEAD = 16


def default_workers() -> int:
    """The cores this process may use, shared with the other processes of its launch on this node (torchrun's
    LOCAL_WORLD_SIZE): each rank's pipeline gets its share rather than all of them, so 8 ranks do not start 8 x
    all-cores workers. The input pipeline competes with nothing else on a GPU machine."""
    sharing = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return max(1, len(os.sched_getaffinity(0)) // sharing)


def prefetch_factor(workers: int) -> int | None:
    """DataLoader's batches ahead per worker: 2 while few workers, 1 once that would exceed PREFETCH_AHEAD."""
    if workers == 0:
        return None  # no workers, nothing ahead (DataLoader refuses a factor then)
    return PREFETCH_PER_WORKER if workers * PREFETCH_PER_WORKER <= PREFETCH_AHEAD else 1


def make_loader(source: DataSource, batch_size: int, image_size: int, *, train: bool, seed: int = 0,
                workers: int | None = None, pin_memory: bool = False, rank: int = 0, world: int = 1) -> DataLoader:
    """Training: endless shuffled full batches; evaluation: one ordered pass with a partial last batch."""
    transform = train_transform(image_size) if train else eval_transform(image_size)
    paths = source.train if train else source.evaluation
    if source.is_image_folder:
        tree = image_folder(paths[0], transform)
        dataset: Dataset = Subset(tree, range(rank, len(tree), world)) if world > 1 else tree
    else:
        dataset = TFRecordImages(paths, partial(decoded, transform), shuffle=train, repeat=train, seed=seed,
                                 rank=rank, world=world)
    return loader_over(dataset, batch_size, train=train, shuffle_sampler=source.is_image_folder and train,
                       seed=seed, workers=workers, pin_memory=pin_memory)


def loader_over(dataset: Dataset, batch_size: int, *, train: bool, shuffle_sampler: bool, seed: int,
                workers: int | None, pin_memory: bool, collate_fn: Callable[..., Any] | None = None) -> DataLoader:
    """Both loaders' DataLoader: all cores unless told, persistent workers, full batches for training."""
    workers = default_workers() if workers is None else workers
    # Forked workers of a process that has loaded TensorFlow hang (its threads' locks are copied held): a fork
    # server's then, with torch and the dataset's module imported once for all of them (parallel.context). A
    # training process never loads TensorFlow; a test process may.
    imports = (__name__, type(dataset).__module__)
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle_sampler, drop_last=train, num_workers=workers,
        pin_memory=pin_memory, persistent_workers=workers > 0, prefetch_factor=prefetch_factor(workers),
        generator=torch.Generator().manual_seed(seed),
        collate_fn=collate_fn, multiprocessing_context=parallel.context(imports) if workers > 0 else None,
    )


def _original_message(error: BaseException) -> str:
    """A DataLoader worker's error arrives as 'Caught X in DataLoader worker ...' plus the worker's traceback,
    whose last line is the original 'module.X: message'."""
    text = str(error)
    if not text.startswith("Caught "):
        return text
    last = [line for line in text.splitlines() if line.strip()][-1]
    return last.split(": ", 1)[1] if ": " in last else last


def _from_workers(loader: DataLoader) -> Iterator[Any]:
    try:
        yield from loader
    except DataError as error:
        raise DataError(_original_message(error)) from None


def loader_batches(loader: DataLoader, endless: bool = False) -> Iterator[Any]:
    """The loader's batches as collated; ``endless``: pass after pass."""
    while True:
        empty = True
        for batch in _from_workers(loader):
            empty = False
            yield batch
        if not endless:
            return
        if empty:  # else the loop would spin forever
            files = getattr(loader.dataset, "_files", None)
            where = f"{Path(files[0]).parent}: " if files else ""
            raise DataError(f"{where}no training batch of {loader.batch_size} samples could be formed from the data "
                            "(every record left out, or fewer records than a batch)")


def batches(loader: DataLoader, device: str = "cpu", channels_last: bool = False,
            endless: bool = False) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The loader's (images NCHW float32, labels int64) on ``device``; ``endless``: pass after pass."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    for images, labels in loader_batches(loader, endless):
        yield (images.to(device, non_blocking=loader.pin_memory, memory_format=layout),
               labels.to(device, non_blocking=loader.pin_memory))
