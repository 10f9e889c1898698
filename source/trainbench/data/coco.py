"""COCO instance annotations (``instances_*.json``): read, validate, and turn into the boxes a record stores.

A file that is not COCO as a whole (not JSON, no ``images``/``annotations``/``categories`` lists, categories
without a whole-number ``id`` and a ``name``) is a UsageError naming the file. Odd items inside a good file are
dropped with their reason, for ``skipped.csv``, and the rest is kept:

- an image entry without a usable ``id``, ``file_name``, ``width`` or ``height``, a repeated id, or whose file is
  missing under the image folder;
- an annotation naming an image id that is not listed, or an unknown category id, or without a usable ``bbox``;
- a box with no area (width or height <= 0);
- a box reaching outside its image: clipped to the image when part of it is inside (listed as clipped, kept),
  dropped when nothing is left.

Images without annotations are kept (``create_coco_tf_record.py`` keeps them too). Boxes follow that converter:
COCO's ``[x, y, width, height]`` in pixels becomes xmin = x / W, xmax = (x + width) / W, ymin = y / H,
ymax = (y + height) / H; ``iscrowd``, ``area`` (as the annotation gives it) and the category id as the label
with its name as the class text. It skips boxes that reach outside the image; here they are clipped instead.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeGuard

from trainbench.errors import UsageError, os_reason

Skipped = tuple[str, str]  # (what, reason), a row of skipped.csv


@dataclass(frozen=True)
class CocoObject:
    """One annotation's box, normalised to [0, 1] by its image's width and height."""

    xmin: float
    xmax: float
    ymin: float
    ymax: float
    label: int  # the COCO category id
    text: str  # the category's name
    is_crowd: int
    area: float  # in pixels, as the annotation gives it


@dataclass(frozen=True)
class CocoImage:
    source_id: str  # the COCO image id, as text
    file_name: str  # relative to the image folder
    width: int  # as the annotations file gives it (the converter checks the file's header against it)
    height: int
    size: int  # the file's bytes (for the resume fingerprint and the MB/s)
    objects: tuple[CocoObject, ...]


@dataclass(frozen=True)
class CocoSet:
    annotations: Path
    sha256: str  # of the annotations file's bytes (for the resume fingerprint)
    image_dir: Path
    images: tuple[CocoImage, ...]  # in the file's order
    categories: dict[int, str]  # id -> name, in id order
    skipped: tuple[Skipped, ...]  # the odd entries of the file, in the file's order

    @property
    def num_classes(self) -> int:
        """The largest category id: labels are the ids themselves (COCO 2017's 80 categories use 1..90)."""
        return max(self.categories)


def read_coco(annotations: Path, image_dir: Path) -> CocoSet:
    """The usable images of an annotations file with their boxes, and the entries dropped, with the reason."""
    content, digest = _load(annotations)
    if not image_dir.is_dir():
        raise UsageError(f"{image_dir}: no such image folder")
    categories = _categories(annotations, content["categories"])
    skipped: list[Skipped] = []
    images, listed = _images(annotations, content["images"], image_dir, skipped)
    objects = _objects(annotations.name, content["annotations"], images, listed, categories, skipped)
    kept = tuple(CocoImage(image.source_id, image.file_name, image.width, image.height, image.size,
                           tuple(objects.get(image.source_id, ()))) for image in images.values())
    if not kept:
        raise UsageError(f"{annotations}: none of its {len(content['images'])} images is usable (first problem: "
                         f"{skipped[0][0]}: {skipped[0][1]})" if skipped else f"{annotations}: lists no images")
    return CocoSet(annotations, digest, image_dir, kept, categories, tuple(skipped))


def _load(path: Path) -> tuple[dict[str, Any], str]:
    """The file's content and the sha256 of its bytes (read once: the content is what the digest names)."""
    try:
        data = path.read_bytes()
        content = json.loads(data)
    except IsADirectoryError:
        raise UsageError(f"{path}: a folder, not a COCO annotations file") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read the annotations ({os_reason(error)})") from None
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UsageError(f"{path}: not a COCO annotations file (not JSON: {error})") from None
    if not isinstance(content, dict):
        raise UsageError(f"{path}: not a COCO annotations file (a JSON {type(content).__name__}, not an object)")
    for key in ("images", "annotations", "categories"):
        if not isinstance(content.get(key), list):
            what = "missing" if key not in content else f"a {type(content[key]).__name__}, not a list"
            raise UsageError(f"{path}: not a COCO annotations file ({key!r} is {what})")
    return content, hashlib.sha256(data).hexdigest()


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _categories(path: Path, entries: list[Any]) -> dict[int, str]:
    """id -> name; the label space, so a bad category is a problem of the whole file."""
    categories: dict[int, str] = {}
    for index, entry in enumerate(entries):
        if not (isinstance(entry, dict) and _whole(entry.get("id")) and isinstance(entry.get("name"), str)):
            raise UsageError(f"{path}: not a COCO annotations file (categories[{index}] needs a whole-number "
                             "'id' and a 'name')")
        if entry["id"] < 1 or entry["id"] in categories:
            problem = "below 1" if entry["id"] < 1 else "repeated"
            raise UsageError(f"{path}: category id {entry['id']} is {problem} (categories[{index}])")
        categories[entry["id"]] = entry["name"]
    if not categories:
        raise UsageError(f"{path}: not a COCO annotations file ('categories' is empty)")
    return dict(sorted(categories.items()))


def _images(path: Path, entries: list[Any], image_dir: Path, skipped: list[Skipped]
            ) -> tuple[dict[str, CocoImage], set[str]]:
    """The listed images whose entry is well formed and whose file is there, by source id; every id listed."""
    images: dict[str, CocoImage] = {}
    listed: set[str] = set()
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("id") is not None:
            listed.add(str(entry["id"]))
        image = _image(entry, image_dir)
        if isinstance(image, str):
            name = entry.get("file_name") if isinstance(entry, dict) else None
            skipped.append((name if isinstance(name, str) else f"{path.name} images[{index}]", image))
        elif image.source_id in images:
            skipped.append((image.file_name, f"image id {image.source_id} is listed twice; the first is kept"))
        else:
            images[image.source_id] = image
    return images, listed


def _image(entry: Any, image_dir: Path) -> CocoImage | str:
    """The image, or why it is dropped."""
    if not isinstance(entry, dict):
        return "image entry is not an object"
    source_id, name, width, height = (entry.get(key) for key in ("id", "file_name", "width", "height"))
    if not (_whole(source_id) or (isinstance(source_id, str) and source_id)):
        return "image entry without a whole-number or text 'id'"
    if not (isinstance(name, str) and name):
        return f"image id {source_id} without a 'file_name'"
    if not (_whole(width) and _whole(height) and width > 0 and height > 0):
        return f"image id {source_id}: width and height must be whole numbers above 0, got {width!r}x{height!r}"
    relative = PurePosixPath(name)
    if relative.is_absolute() or ".." in relative.parts:
        return "file name outside the image folder"
    try:
        size = os.stat(image_dir / name).st_size
    except FileNotFoundError:
        return "missing image file"
    except OSError as error:
        return f"cannot read ({os_reason(error)})"
    except ValueError:  # a lone surrogate (a JSON \\udXXX escape), or a NUL: no file can have that name
        return "file name that no file can have (a NUL or an invalid Unicode escape)"
    return CocoImage(str(source_id), name, width, height, size, ())


def _objects(file: str, entries: list[Any], images: Mapping[str, CocoImage], listed: set[str],
             categories: dict[int, str], skipped: list[Skipped]) -> dict[str, list[CocoObject]]:
    """The usable boxes of each listed image (source id -> boxes, in the file's order)."""
    objects: dict[str, list[CocoObject]] = {}
    for index, entry in enumerate(entries):
        what = f"{file} annotation {entry.get('id', f'[{index}]') if isinstance(entry, dict) else f'[{index}]'}"
        found = _object(entry, images, listed, categories)
        if isinstance(found, str):
            skipped.append((what, found))
            continue
        source_id, item, clipped = found
        if clipped:
            skipped.append((what, clipped))
        objects.setdefault(source_id, []).append(item)
    return objects


def _object(entry: Any, images: Mapping[str, CocoImage], listed: set[str], categories: dict[int, str]
            ) -> tuple[str, CocoObject, str | None] | str:
    """(source id, box, a note when it was clipped), or why the annotation is dropped."""
    if not isinstance(entry, dict):
        return "annotation is not an object"
    image_id = entry.get("image_id")
    image = images.get(str(image_id))
    if image is None:
        return f"image id {image_id!r} {'was skipped' if str(image_id) in listed else 'is not listed in images'}"
    category, crowd, area, bbox = (entry.get(key) for key in ("category_id", "iscrowd", "area", "bbox"))
    if not (_whole(category) and category in categories):
        return f"unknown category id {category!r}"
    if crowd not in (None, 0, 1) or isinstance(crowd, bool):
        return f"iscrowd must be 0 or 1, got {crowd!r}"
    if area is not None and not (_number(area) and area >= 0):
        return f"area must be a number >= 0, got {area!r}"
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(map(_number, bbox))):
        return f"bbox must be [x, y, width, height], got {bbox!r}"
    x, y, width, height = (float(value) for value in bbox)
    if width <= 0 or height <= 0:
        return f"box with no area (width {width:g}, height {height:g})"
    x0, y0 = max(x, 0.0), max(y, 0.0)
    x1, y1 = min(x + width, image.width), min(y + height, image.height)
    where = f"box [{x:g}, {y:g}, {width:g}, {height:g}] outside its image ({image.width}x{image.height})"
    if x1 <= x0 or y1 <= y0:
        return f"{where}: nothing inside it, skipped"
    clipped = (x0, y0, x1, y1) != (x, y, x + width, y + height)
    note = f"{where}: clipped to [{x0:g}, {y0:g}, {x1 - x0:g}, {y1 - y0:g}], kept" if clipped else None
    return image.source_id, CocoObject(
        x0 / image.width, x1 / image.width, y0 / image.height, y1 / image.height, category, categories[category],
        int(crowd or 0),
        float(area) if area is not None else (x1 - x0) * (y1 - y0)), note
