"""Bounding boxes from ImageNet's PASCAL VOC annotation XML, normalised to [0, 1] of the image size.

As the original converter: coordinates are divided by the image size the annotation states (the image's own size
when it states none), each pair is put in order and clamped to [0, 1], and boxes left with no area are dropped
(ImageNet has boxes reaching outside their image, and a few with min > max).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass


@dataclass(frozen=True)
class Box:
    xmin: float
    ymin: float
    xmax: float
    ymax: float


def read_boxes(xml: bytes, width: int, height: int) -> list[Box]:
    """The normalised boxes of every ``<object>``; ValueError says what is wrong with a malformed file."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise ValueError(f"not well-formed XML ({error})") from None
    width, height = _stated_size(root, width, height)
    boxes = []
    for box in root.iter("bndbox"):
        xmin, xmax = _span(_number(box, "xmin"), _number(box, "xmax"), width)
        ymin, ymax = _span(_number(box, "ymin"), _number(box, "ymax"), height)
        if xmin < xmax and ymin < ymax:
            boxes.append(Box(xmin, ymin, xmax, ymax))
    return boxes


def _stated_size(root: ElementTree.Element, width: int, height: int) -> tuple[int, int]:
    """The annotation's ``<size>``, where it gives a positive one; the image's own size otherwise."""
    size = root.find("size")
    if size is None or size.find("width") is None or size.find("height") is None:
        return width, height
    stated = int(_number(size, "width")), int(_number(size, "height"))
    return stated if min(stated) > 0 else (width, height)


def _number(element: ElementTree.Element, tag: str) -> float:
    text = element.findtext(tag)
    if text is None:
        raise ValueError(f"<{element.tag}> has no <{tag}>")
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"<{tag}> is not a number: {text.strip()!r}") from None


def _span(low: float, high: float, extent: int) -> tuple[float, float]:
    if extent <= 0:
        raise ValueError(f"image size {extent} is not positive")
    low, high = sorted((low / extent, high / extent))
    return min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0)
