"""``trainbench data synth-coco``: a small COCO-format detection set of real JPEG files, for demos and tests.

Layout, as COCO ships it: ``<output>/train2017/<id:012d>.jpg`` and ``<output>/annotations/instances_train2017.json``
with COCO 2017's 80 categories (their real ids, 1..90 with gaps, and names). Each image is made the way
``synth_tree`` makes ImageNet's (a smooth random background, grain, quality 95, so the files have realistic sizes)
with one to four objects: ellipses whose boxes ``[x, y, width, height]`` are the annotations, with the ellipse's
area, a random category and, now and then, ``iscrowd`` 1. Content depends only on the seed and the image number.

With ``odd_cases``, entries the converter must list as skipped or clipped are added (``ODD_CASES``: what each is
and what the converter does with it), with a PNG and a grayscale JPEG it must store as they are.
"""

from __future__ import annotations

import io
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from PIL import Image, ImageDraw

from trainbench.data.parallel import WorkerDied, counter, default_workers, run_parallel
from trainbench.data.progress import Progress
from trainbench.data.synth_tree import GRAIN, QUALITY
from trainbench.errors import UsageError, os_reason

IMAGE_FOLDER = "train2017"
ANNOTATIONS = "annotations/instances_train2017.json"
_CHUNK = 64  # images per worker task

# COCO 2017's detection categories: id -> name (the ids 12, 26, 29, 30, 45, 66, 68, 69, 71 and 83 are unused).
COCO_CATEGORIES: dict[int, str] = dict(enumerate((
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "", "backpack", "umbrella", "", "", "handbag", "tie", "suitcase",
    "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard",
    "surfboard", "tennis racket", "bottle", "", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana",
    "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "", "dining table", "", "", "toilet", "", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush"), start=1))
COCO_CATEGORIES = {key: name for key, name in COCO_CATEGORIES.items() if name}

# What the odd entries are (the key names the file or the annotation) and what ``data coco`` does with them.
ODD_CASES: dict[str, str] = {
    "odd_png.png": "stored (a PNG, format png)",
    "odd_grayscale.jpg": "stored (a 1-channel JPEG)",
    "odd_not_an_image.jpg": "skipped: not an image",
    "odd_missing.jpg": "skipped: listed, no file",
    "odd_wrong_size.jpg": "skipped: the JSON's width and height are not the file's",
    "annotation 900001": "skipped: names image id 999999, not listed",
    "annotation 900002": "clipped: box partly outside its image",
    "annotation 900003": "skipped: box wholly outside its image",
    "annotation 900004": "skipped: box with no area",
    "annotation 900005": "skipped: unknown category id 12",
}
_ODD_IMAGE_ID = 900_000  # the odd images' ids start here, the ordinary ones at 1


@dataclass(frozen=True)
class CocoSynthOptions:
    output: Path
    images: int
    size: tuple[int, int] = (640, 480)  # width, height around which the sizes vary (COCO's usual 640 px side)
    seed: int = 0
    odd_cases: bool = False
    workers: int = field(default_factory=default_workers)


@dataclass(frozen=True)
class CocoSynthSummary:
    output: Path
    annotations: Path
    images: int  # files written
    boxes: int  # annotations in the JSON
    bytes: int  # of the image files
    seconds: float


def synth_coco(options: CocoSynthOptions, stream: TextIO | None = None) -> CocoSynthSummary:
    """Write the set (refusing a folder that already holds one) and return what was written."""
    start = time.perf_counter()
    folder, annotations = options.output / IMAGE_FOLDER, options.output / ANNOTATIONS
    if folder.exists() or annotations.exists():
        raise UsageError(f"{options.output}: already holds a COCO set; synth-coco writes a new one (choose another "
                         "--output)")
    for path in (folder, annotations.parent):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"{path}: cannot create the folder ({os_reason(error)})") from None
    chunks = [(options, tuple(range(first, min(first + _CHUNK, options.images))))
              for first in range(0, options.images, _CHUNK)]
    done = counter()
    try:
        with Progress("synth-coco", options.images, done, stream):
            parts = list(run_parallel(_write_chunk, chunks, options.workers, _init_worker, (done,)))
    except WorkerDied as death:
        raise UsageError(f"{options.output}: {death}; the set is incomplete: remove it and run again") from None
    parts.sort(key=lambda part: part[0][0]["id"] if part[0] else 0)  # completion order -> image order
    images = [image for part in parts for image in part[0]]
    objects = [item for part in parts for item in part[1]]
    size = sum(part[2] for part in parts)
    if options.odd_cases:
        odd_images, odd_objects, odd_size = _odd_cases(folder, np.random.default_rng((options.seed, 9)))
        images, objects, size = images + odd_images, objects + odd_objects, size + odd_size
    for number, item in enumerate(objects, start=1):
        item.setdefault("id", number)
    _store(annotations, json.dumps(_content(images, objects), indent=1).encode())
    files = sum(1 for _ in folder.iterdir())
    return CocoSynthSummary(options.output, annotations, files, len(objects), size, time.perf_counter() - start)


def _content(images: list[dict], objects: list[dict]) -> dict[str, Any]:
    return {"info": {"description": "trainbench synth-coco: generated images in the COCO 2017 format"},
            "licenses": [], "images": images, "annotations": objects,
            "categories": [{"supercategory": "synthetic", "id": key, "name": name}
                           for key, name in COCO_CATEGORIES.items()]}


def _store(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as error:
        raise UsageError(f"{path.parent}: cannot write {path.name} ({os_reason(error)})") from None


# --- in the worker processes -------------------------------------------------------------------------------

_done = None


def _init_worker(done: object) -> None:
    global _done
    _done = done


def _write_chunk(task: tuple[CocoSynthOptions, tuple[int, ...]]) -> tuple[list[dict], list[dict], int]:
    """Images of a range of numbers: their JSON entries, their annotations and the bytes written."""
    options, numbers = task
    images, objects, size = [], [], 0
    for number in numbers:
        rng = np.random.default_rng((options.seed, 1, number))
        image, boxes = _image(rng, options.size)
        image_id = number + 1
        name = f"{image_id:012d}.jpg"
        size += _save(options.output / IMAGE_FOLDER / name, image)
        images.append({"id": image_id, "file_name": name, "width": image.width, "height": image.height})
        ids = list(COCO_CATEGORIES)
        for box in boxes:
            objects.append(_annotation(image_id, box, ids[int(rng.integers(len(ids)))], int(rng.random() < 0.1)))
        with _done.get_lock():  # type: ignore[attr-defined]
            _done.value += 1  # type: ignore[attr-defined]
    return images, objects, size


def _annotation(image_id: int, box: list[float], category: int, crowd: int = 0) -> dict[str, Any]:
    """An annotation as COCO writes it; the area is the ellipse's, as COCO's is the segmentation's."""
    return {"image_id": image_id, "category_id": category, "iscrowd": crowd, "bbox": box,
            "area": round(math.pi / 4 * box[2] * box[3], 2), "segmentation": []}


def _image(rng: np.random.Generator, base: tuple[int, int]) -> tuple[Image.Image, list[list[float]]]:
    """A photo-like RGB image with one to four ellipses, and their boxes [x, y, width, height] in pixels."""
    width, height = (max(16, int(side * rng.uniform(0.8, 1.0))) for side in base)
    if rng.random() < 1 / 3:
        width, height = height, width
    corners = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    image = Image.fromarray(corners).resize((width, height), Image.Resampling.BICUBIC)
    draw, boxes = ImageDraw.Draw(image), []
    for _ in range(int(rng.integers(1, 5))):
        box_w, box_h = (round(float(rng.uniform(0.1, 0.5)) * side, 2) for side in (width, height))
        x, y = round(float(rng.uniform(0, width - box_w)), 2), round(float(rng.uniform(0, height - box_h)), 2)
        draw.ellipse((x, y, x + box_w, y + box_h), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        boxes.append([x, y, box_w, box_h])
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(-GRAIN, GRAIN + 1, (height, width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)), boxes


def _save(path: Path, image: Image.Image, kind: str = "JPEG") -> int:
    out = io.BytesIO()
    image.save(out, kind, **({"quality": QUALITY} if kind == "JPEG" else {}))
    _store(path, out.getvalue())
    return len(out.getvalue())


def _odd_cases(folder: Path, rng: np.random.Generator) -> tuple[list[dict], list[dict], int]:
    """The odd files and entries of ODD_CASES: (image entries, annotations, bytes written)."""
    image, boxes = _image(rng, (96, 72))
    size = _save(folder / "odd_png.png", image, "PNG") + _save(folder / "odd_grayscale.jpg", image.convert("L"))
    size += _save(folder / "odd_wrong_size.jpg", image)
    not_an_image = b"<html><body>404 Not Found</body></html>\n"
    _store(folder / "odd_not_an_image.jpg", not_an_image)
    names = ("odd_png.png", "odd_grayscale.jpg", "odd_not_an_image.jpg", "odd_missing.jpg", "odd_wrong_size.jpg")
    images: list[dict[str, Any]] = [
        {"id": _ODD_IMAGE_ID + number, "file_name": name, "width": image.width, "height": image.height}
        for number, name in enumerate(names)]
    images[-1]["width"] += 1  # odd_wrong_size.jpg: one pixel wider in the JSON than in the file
    first, person = _ODD_IMAGE_ID, 1
    objects = [_annotation(first + number, boxes[0], person) for number in range(len(names))]
    width = image.width
    odd = [(999_999, [1.0, 1.0, 10.0, 10.0], person), (first, [width - 10.0, 5.0, 30.0, 20.0], person),
           (first, [width + 5.0, 5.0, 10.0, 10.0], person), (first, [3.0, 3.0, 0.0, 12.0], person),
           (first + 1, [2.0, 2.0, 10.0, 10.0], 12)]
    objects += [{**_annotation(image_id, box, category), "id": 900_001 + number}
                for number, (image_id, box, category) in enumerate(odd)]
    return images, objects, size + len(not_an_image)
