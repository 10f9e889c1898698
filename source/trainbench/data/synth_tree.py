"""``trainbench data synth``: a small ImageNet-layout tree of real JPEG files, for demos and tests without ImageNet.

Each image is a smooth random background with one object (an ellipse in its class's colour) and grain, encoded at
quality 95: about ImageNet's bytes per pixel, so that conversion and input pipelines see realistic file sizes
(widths and heights 80-100 % of ``--size``, a third of them portrait). The object's box goes into a PASCAL VOC
file under ``Annotation/``. Content depends only on the seed, the class and the index.

Layout: ``train/<synset>/<synset>_<k>.JPEG``, ``val/<synset>/ILSVRC2012_val_<n>.JPEG`` (or, with ``flat_val``,
``val/ILSVRC2012_val_<n>.JPEG`` plus ``LOC_val_solution.csv``, as Kaggle ships it), ``LOC_synset_mapping.txt``.
With ``odd_cases``, the first training class also gets the odd files of ``ODD_CASES``.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
from PIL import Image, ImageDraw

from trainbench.data.parallel import WorkerDied, counter, default_workers, run_parallel
from trainbench.data.progress import Progress
from trainbench.errors import UsageError, os_reason

QUALITY = 95
GRAIN = 36  # per-pixel noise amplitude: with quality 95, ImageNet's average of about 110 kB per image
SOLUTION_CSV = "LOC_val_solution.csv"
SYNSET_NAMES = "LOC_synset_mapping.txt"

# file name -> what the converter must do with it, judged by content (the names say what the content is)
ODD_CASES: dict[str, str] = {
    "odd_png_rgb.JPEG": "converted",
    "odd_png_rgba.JPEG": "converted",
    "odd_cmyk.JPEG": "converted",
    "odd_grayscale.JPEG": "converted",
    "odd_jpeg_named.png": "stored",
    "odd_truncated.JPEG": "skipped",
    "odd_empty.JPEG": "skipped",
    "odd_not_an_image.JPEG": "skipped",
}


@dataclass(frozen=True)
class SynthOptions:
    output: Path
    classes: int
    train_per_class: int
    val_per_class: int
    size: tuple[int, int] = (500, 375)  # width, height around which the sizes vary
    seed: int = 0
    odd_cases: bool = False
    flat_val: bool = False
    workers: int = field(default_factory=default_workers)


@dataclass(frozen=True)
class SynthSummary:
    output: Path
    images: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class _ClassTask:
    options: SynthOptions
    index: int  # 0-based class number
    val_numbers: tuple[int, ...]  # ILSVRC2012_val_<n> numbers of its validation images


def synset_id(index: int) -> str:
    return f"n{index + 1:08d}"


def synth(options: SynthOptions, stream: TextIO | None = None) -> SynthSummary:
    """Write the tree (refusing a folder that already holds one) and return what was written."""
    start = time.perf_counter()
    _check_output(options.output)
    numbers = np.random.default_rng((options.seed, 1)).permutation(options.classes * options.val_per_class) + 1
    tasks = [_ClassTask(options, index, tuple(int(n) for n in numbers[index::options.classes]))
             for index in range(options.classes)]
    done = counter()
    total = options.classes * (options.train_per_class + options.val_per_class) + len(ODD_CASES) * options.odd_cases
    try:
        with Progress("synth", total, done, stream):
            written = list(run_parallel(_write_class, tasks, options.workers, _init_worker, (done,)))
    except WorkerDied as death:
        raise UsageError(f"{options.output}: {death}; the tree is incomplete: remove it and run again") from None
    _write_text_files(options, tasks, [rows for _, rows in written])
    return SynthSummary(options.output, total, sum(size for size, _ in written), time.perf_counter() - start)


def _check_output(output: Path) -> None:
    for split in ("train", "val"):
        if os.path.lexists(output / split):  # a dangling link too: the workers could not create the folder
            raise UsageError(f"{output / split}: already exists; synth writes a new tree (choose another --output)")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{output}: cannot create the folder ({os_reason(error)})") from None


def _write_text_files(options: SynthOptions, tasks: list[_ClassTask], solutions: list[list[str]]) -> None:
    names = [f"{synset_id(task.index)} synthetic class {task.index + 1}\n" for task in tasks]
    _store(options.output / SYNSET_NAMES, "".join(names).encode())
    if options.flat_val:
        rows = sorted(row for rows in solutions for row in rows)
        _store(options.output / SOLUTION_CSV, ("ImageId,PredictionString\n" + "".join(rows)).encode())


# --- in the worker processes -------------------------------------------------------------------------------

_done = None


def _init_worker(done: object) -> None:
    global _done
    _done = done


def _write_class(task: _ClassTask) -> tuple[int, list[str]]:
    """One class's images (train, val, odd cases): total bytes written and its LOC_val_solution.csv rows."""
    options, synset = task.options, synset_id(task.index)
    colour = tuple(int(c) for c in np.random.default_rng((options.seed, 2, task.index)).integers(0, 256, 3))
    train, val = options.output / "train" / synset, options.output / "val"
    _make_folder(train)
    size, rows = 0, []
    for k in range(options.train_per_class):
        stem = f"{synset}_{k}"
        image, box = _image(np.random.default_rng((options.seed, 3, task.index, k)), options.size, colour)
        size += _save(train / f"{stem}.JPEG", image)
        _write_annotation(options.output / "Annotation" / synset / f"{stem}.xml", synset, image.size, box)
    for k, number in enumerate(task.val_numbers):
        stem = f"ILSVRC2012_val_{number:08d}"
        image, box = _image(np.random.default_rng((options.seed, 4, task.index, k)), options.size, colour)
        folder = val if options.flat_val else val / synset
        _make_folder(folder)
        size += _save(folder / f"{stem}.JPEG", image)
        rows.append(f"{stem},{synset} {' '.join(map(str, box))}\n")
    if options.odd_cases and task.index == 0:
        size += _write_odd_cases(train, np.random.default_rng((options.seed, 5)), colour)
    return size, rows


def _image(rng: np.random.Generator, base: tuple[int, int], colour: tuple[int, ...]
           ) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """A photo-like RGB image and its object's box (xmin, ymin, xmax, ymax) in pixels."""
    width, height = (max(16, int(side * rng.uniform(0.8, 1.0))) for side in base)
    if rng.random() < 1 / 3:
        width, height = height, width
    corners = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)  # a 4x3 colour grid, smoothly enlarged
    image = Image.fromarray(corners).resize((width, height), Image.Resampling.BICUBIC)
    x0, y0 = int(rng.uniform(0, 0.5) * width), int(rng.uniform(0, 0.5) * height)
    box = (x0, y0, x0 + int(rng.uniform(0.3, 0.5) * width), y0 + int(rng.uniform(0.3, 0.5) * height))
    ImageDraw.Draw(image).ellipse(box, fill=colour)
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(-GRAIN, GRAIN + 1, (height, width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)), box


def _save(path: Path, image: Image.Image, kind: str = "JPEG", **options: object) -> int:
    out = io.BytesIO()
    image.save(out, kind, **({"quality": QUALITY} if kind == "JPEG" else {}), **options)
    return _write(path, out.getvalue())


def _make_folder(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{path}: cannot create the folder ({os_reason(error)})") from None


def _store(path: Path, data: bytes) -> None:
    """Write a file; an OSError (a full disk) is a UsageError naming its folder."""
    try:
        path.write_bytes(data)
    except OSError as error:
        raise UsageError(f"{path.parent}: cannot write {path.name} ({os_reason(error)})") from None


def _write(path: Path, data: bytes) -> int:
    _store(path, data)
    with _done.get_lock():  # type: ignore[attr-defined]
        _done.value += 1  # type: ignore[attr-defined]
    return len(data)


def _write_annotation(path: Path, synset: str, size: tuple[int, int], box: tuple[int, int, int, int]) -> None:
    _make_folder(path.parent)
    corners = "".join(f"<{tag}>{value}</{tag}>" for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), box,
                                                                      strict=True))
    _store(path, f"<annotation><filename>{path.stem}</filename><size><width>{size[0]}</width>"
                 f"<height>{size[1]}</height><depth>3</depth></size><object><name>{synset}</name>"
                 f"<bndbox>{corners}</bndbox></object></annotation>\n".encode())


def _write_odd_cases(folder: Path, rng: np.random.Generator, colour: tuple[int, ...]) -> int:
    image, _ = _image(rng, (96, 72), colour)
    rgba = image.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(image.size))
    jpeg = io.BytesIO()
    image.save(jpeg, "JPEG", quality=QUALITY)
    return sum((
        _save(folder / "odd_png_rgb.JPEG", image, "PNG"),
        _save(folder / "odd_png_rgba.JPEG", rgba, "PNG"),
        _save(folder / "odd_cmyk.JPEG", image.convert("CMYK")),
        _save(folder / "odd_grayscale.JPEG", image.convert("L")),
        _write(folder / "odd_jpeg_named.png", jpeg.getvalue()),
        _write(folder / "odd_truncated.JPEG", jpeg.getvalue()[:len(jpeg.getvalue()) * 3 // 5]),
        _write(folder / "odd_empty.JPEG", b""),
        _write(folder / "odd_not_an_image.JPEG", b"<html><body>404 Not Found</body></html>\n"),
    ))
