"""PyTorch input decoded and augmented on the GPU (``--loader gpu``): the same data, the same preprocessing.

DataLoader workers only read: each hands over its images still encoded (JPEG bytes; an image in another format is
decoded by Pillow there, as the CPU loader would) with their labels, packed end to end in one buffer per batch (one
shared-memory tensor crosses the process boundary, not one per image). A thread of the training process then
decodes the batch's JPEGs with nvJPEG (``torchvision.io.decode_jpeg(device="cuda")``, batched) and prepares them
on its own CUDA stream, a batch or two ahead of the training step, with ``preprocess_params``'s parameters:

- training: a random crop drawn by torchvision's own ``RandomResizedCrop.get_params`` (the CPU loader's crop, the
  same area and aspect ranges), resized to ``image_size`` (bilinear, antialiased), flipped left-right with
  probability one half;
- evaluation: the centre square that the CPU loader's resize-then-crop keeps (``resize_size``), resized once;
- then the ImageNet mean and standard deviation; float32 NCHW (channels-last if asked), labels int64.

Every function takes the device, so the decoding and augmentation run, and are tested, on the CPU as well.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Subset

from trainbench.data.preprocess_params import CROP_AREA_RANGE, CROP_ASPECT_RANGE, MEAN_RGB, STD_RGB, resize_size
from trainbench.data.source import DataSource
from trainbench.data.tfrecord_reader import DataError
from trainbench.engines.torch import image_pipeline as torch_pipeline

_JPEG_START = b"\xff\xd8\xff"
# torchvision 0.29 deprecates its decoders for TorchCodec's; 0.29's are still the batched nvJPEG path. Filtered once
# here: warnings.catch_warnings() in the input thread would swap the process's filters under the main thread.
warnings.filterwarnings("ignore", category=DeprecationWarning, module="torchvision.io.image")
PREFETCH_BATCHES = 2  # batches prepared ahead of the training step: one in use, one being made


# --- in the DataLoader workers: read, keep encoded -------------------------------------------------------------


class EncodedImage(NamedTuple):
    """One image as read: JPEG bytes (height = width = 0), or RGB pixels (C, H, W) decoded already."""

    payload: torch.Tensor  # uint8, one dimension
    height: int
    width: int
    name: str  # the file, or the shard and record: what an error names


def encoded_image(data: bytes, name: str) -> EncodedImage:
    """JPEG bytes as they are; anything else decoded here by Pillow (the CPU loader's decoder)."""
    if data.startswith(_JPEG_START):
        return EncodedImage(torch.frombuffer(bytearray(data), dtype=torch.uint8), 0, 0, name)
    pixels = torch.from_numpy(_rgb_array(torch_pipeline.decode(data, name))).permute(2, 0, 1)
    return EncodedImage(pixels.reshape(-1).clone(), pixels.shape[1], pixels.shape[2], name)


def _rgb_array(image: Image.Image) -> np.ndarray:
    return np.array(image, dtype=np.uint8)  # a copy: torch wants writable memory


def read_encoded(path: str) -> EncodedImage:
    """An image file of an image-folder tree, for ImageFolder's ``loader``."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror})") from None
    return encoded_image(data, path)


@dataclass
class EncodedBatch:
    """A batch as it leaves the workers: every payload end to end in ``data``."""

    data: torch.Tensor  # uint8
    sizes: list[int]  # each payload's length in bytes
    shapes: list[tuple[int, int]]  # (0, 0): JPEG to decode; else the pixels' height and width
    labels: torch.Tensor  # int64
    names: list[str]

    def pin_memory(self) -> EncodedBatch:
        """Called by the DataLoader's pinning thread: page-locked bytes copy to the GPU asynchronously."""
        return EncodedBatch(self.data.pin_memory(), self.sizes, self.shapes, self.labels.pin_memory(), self.names)

    def payloads(self) -> list[torch.Tensor]:
        return list(self.data.split(self.sizes))


def collate_encoded(examples: Sequence[tuple[EncodedImage, int]]) -> EncodedBatch:
    images = [image for image, _ in examples]
    return EncodedBatch(torch.cat([image.payload for image in images]), [len(image.payload) for image in images],
                        [(image.height, image.width) for image in images],
                        torch.tensor([label for _, label in examples], dtype=torch.int64),
                        [image.name for image in images])


def make_loader(source: DataSource, batch_size: int, *, train: bool, seed: int = 0, workers: int | None = None,
                pin_memory: bool = False, rank: int = 0, world: int = 1) -> DataLoader:
    """The CPU loader's files, order and batching (``torch_pipeline.make_loader``), with encoded images."""
    if source.is_image_folder:
        tree = torchvision.datasets.ImageFolder(str(source.train[0] if train else source.evaluation[0]),
                                                loader=read_encoded)
        dataset: Dataset = Subset(tree, range(rank, len(tree), world)) if world > 1 else tree
    else:
        dataset = torch_pipeline.TFRecordImages(source.train if train else source.evaluation, encoded_image,
                                                shuffle=train, repeat=train, seed=seed, rank=rank, world=world)
    return torch_pipeline.loader_over(dataset, batch_size, train=train, shuffle_sampler=source.is_image_folder
                                      and train, seed=seed, workers=workers, pin_memory=pin_memory,
                                      collate_fn=collate_encoded)


# --- in the training process: decode and augment on the device --------------------------------------------------


class Box(NamedTuple):
    top: int
    left: int
    height: int
    width: int


def train_box(height: int, width: int) -> Box:
    """torchvision's RandomResizedCrop draw (torch's global generator), on an image of this size."""
    shape_only = torch.empty(0, height, width)  # get_params reads the size alone
    return Box(*torchvision.transforms.RandomResizedCrop.get_params(
        shape_only, list(CROP_AREA_RANGE), list(CROP_ASPECT_RANGE)))


def eval_box(height: int, width: int, image_size: int) -> Box:
    """The part of the image that resizing the shorter side to ``resize_size`` and a centre crop keep."""
    side = min(height, width) * image_size / resize_size(image_size)
    box_height, box_width = min(height, round(side)), min(width, round(side))
    return Box(round((height - box_height) / 2), round((width - box_width) / 2), box_height, box_width)


def decode_batch(batch: EncodedBatch, device: str) -> list[torch.Tensor]:
    """Each image as uint8 RGB (3, H, W) on ``device``: the JPEGs in one batched nvJPEG call on a GPU."""
    payloads = batch.payloads()
    jpeg_at = [i for i, shape in enumerate(batch.shapes) if shape == (0, 0)]
    images: list[torch.Tensor | None] = [None] * len(payloads)
    for i, shape in enumerate(batch.shapes):
        if shape != (0, 0):
            images[i] = payloads[i].view(3, *shape).to(device, non_blocking=True)
    if jpeg_at:
        for i, image in zip(jpeg_at, _decode_jpegs([payloads[i] for i in jpeg_at],
                                                   [batch.names[i] for i in jpeg_at], device), strict=True):
            images[i] = image
    return images  # type: ignore[return-value]  # every position is filled above


def _decode_jpegs(payloads: list[torch.Tensor], names: list[str], device: str) -> list[torch.Tensor]:
    """Batched first; when the batch fails, one by one, so the error names the image, and an image nvJPEG
    refuses (a JPEG kind it lacks) is decoded by Pillow instead."""
    try:
        return list(torchvision.io.decode_jpeg(payloads, mode=torchvision.io.ImageReadMode.RGB, device=device))
    except RuntimeError:
        return [_decode_one(payload, name, device) for payload, name in zip(payloads, names, strict=True)]


def _decode_one(payload: torch.Tensor, name: str, device: str) -> torch.Tensor:
    try:
        return torchvision.io.decode_jpeg(payload, mode=torchvision.io.ImageReadMode.RGB, device=device)
    except RuntimeError:
        pixels = torch.from_numpy(_rgb_array(torch_pipeline.decode(bytes(payload.numpy()), name)))  # DataError names it
        return pixels.permute(2, 0, 1).contiguous().to(device)


class Augment:
    """Decoded images to a normalised batch: crop boxes drawn on the host, pixels moved on the device."""

    def __init__(self, image_size: int, train: bool, device: str, channels_last: bool = False) -> None:
        self._size, self._train, self._device = image_size, train, device
        self._layout = torch.channels_last if channels_last else torch.contiguous_format
        self._mean = torch.tensor(MEAN_RGB, device=device).view(1, 3, 1, 1) * 255
        self._std = torch.tensor(STD_RGB, device=device).view(1, 3, 1, 1) * 255

    def box(self, height: int, width: int) -> Box:
        return train_box(height, width) if self._train else eval_box(height, width, self._size)

    def __call__(self, images: list[torch.Tensor], labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flips = (torch.rand(len(images)) < 0.5).tolist() if self._train else [False] * len(images)
        crops = [self._crop(image, flip) for image, flip in zip(images, flips, strict=True)]
        batch = torch.cat(crops).sub_(self._mean).div_(self._std)
        return (batch.contiguous(memory_format=self._layout),
                labels.to(self._device, non_blocking=True))

    def _crop(self, image: torch.Tensor, flip: bool) -> torch.Tensor:
        top, left, height, width = self.box(image.shape[1], image.shape[2])
        region = image[None, :, top:top + height, left:left + width].float()
        crop = F.interpolate(region, size=(self._size, self._size), mode="bilinear", antialias=True,
                             align_corners=False)
        return crop.flip(-1) if flip else crop


# --- batches ahead of the step ----------------------------------------------------------------------------------


_END = object()


class GpuBatches:
    """(images, labels) on the device, prepared by a thread on a stream of its own ``PREFETCH_BATCHES`` ahead;
    ``close`` stops the thread and the loader's workers."""

    def __init__(self, loader: DataLoader, augment: Augment, device: str, endless: bool) -> None:
        self._loader, self._augment, self._device, self._endless = loader, augment, device, endless
        self._cuda = torch.device(device).type == "cuda"
        self._stream = torch.cuda.Stream(device) if self._cuda else None
        if self._stream is not None:  # the augmentation's mean and std were made on the caller's stream
            self._stream.wait_stream(torch.cuda.current_stream(device))
        self._ready: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH_BATCHES)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="gpu-input", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        try:
            with torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext():
                done = None
                for batch in torch_pipeline.loader_batches(self._loader, self._endless):
                    if done is not None:
                        # nvJPEG writes on a stream of its own, which never waits for this one: the previous
                        # batch's crops must be done reading its decoded images before their memory is reused.
                        done.synchronize()
                    images, labels = self._augment(decode_batch(batch, self._device), batch.labels)
                    done = torch.cuda.Event() if self._cuda else None
                    if done is not None:
                        done.record(self._stream)
                    if not self._put((images, labels, done)):
                        return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, who raises it in its own thread
            self._put(error)
            return
        self._put(_END)

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        item = self._ready.get()
        if item is _END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        images, labels, done = item
        if done is not None:  # the step's stream waits for the batch, and the allocator knows who uses it
            stream = torch.cuda.current_stream(self._device)
            stream.wait_event(done)
            images.record_stream(stream)
            labels.record_stream(stream)
        return images, labels

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def batches(loader: DataLoader, image_size: int, device: str, *, train: bool, channels_last: bool = False,
            endless: bool = False) -> GpuBatches:
    """The GPU loader's batches over ``loader`` (made by ``make_loader``)."""
    return GpuBatches(loader, Augment(image_size, train, device, channels_last), device, endless)


def sample_batch(data: list[bytes], image_size: int, device: str, train: bool = True) -> torch.Tensor:
    """Encoded images (bytes) to one augmented batch, without loader or thread: for checks and tests."""
    batch = collate_encoded([(encoded_image(item, f"image {i}"), 0) for i, item in enumerate(data)])
    return Augment(image_size, train, device)(decode_batch(batch, device), batch.labels)[0]
