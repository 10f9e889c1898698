"""The ``coco`` record of one image (``record_schemas.SCHEMAS["coco"]``), and its check for ``data verify``.

The image file's bytes are stored untouched, as ``create_coco_tf_record.py`` stores them: a JPEG or a PNG, its
format told by the file's signature, never by its name, and its size read from its header (the pixels are not
decoded). tf-models-official's ``TfExampleDecoder`` decodes both with ``tf.io.decode_image(channels=3)``, so
grayscale and palette files are fine as they are. Files that decoder may refuse are skipped with the reason:
other formats, JPEGs that are not 8-bit Huffman-coded with 1 or 3 channels (CMYK, 12-bit, arithmetic, lossless),
truncated files.
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from PIL import Image

from trainbench.data.coco import CocoImage, CocoObject
from trainbench.data.imagefiles import SkipImage, check_signature, read_jpeg_header
from trainbench.data.record_schemas import SCHEMAS
from trainbench.data.tfrecord_reader import Feature
from trainbench.data.tfrecord_writer import bytes_feature, encode_example, float_feature, int64_feature

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"IEND\xaeB`\x82"  # the IEND chunk's type and CRC: the last 8 bytes of a complete PNG
_JPEG_SOI, _JPEG_EOI = b"\xff\xd8", b"\xff\xd9"
_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended sequential, progressive (Huffman)
_OBJECT_LISTS = ("image/object/bbox/xmin", "image/object/bbox/xmax", "image/object/bbox/ymin",
                 "image/object/bbox/ymax", "image/object/class/text", "image/object/class/label",
                 "image/object/is_crowd", "image/object/area")
_PYTHON_TYPES = {"int64": int, "float": float, "bytes": bytes}


@dataclass(frozen=True)
class ImageHeader:
    format: str  # "jpeg" or "png", as image/format stores it
    width: int
    height: int


def image_header(data: bytes) -> ImageHeader:
    """The format and size of an image file's bytes; SkipImage with the reason for anything not storable as is."""
    check_signature(data[:16])  # empty files and non-images, with the ImageNet converter's reasons
    if data.startswith(_PNG_SIGNATURE):
        return _png_header(data)
    if data.startswith(_JPEG_SOI):
        return _jpeg_header(data)
    kind = _format_name(data)
    raise SkipImage(f"{kind} image: only JPEG and PNG files are stored (convert it to one of them)")


def _png_header(data: bytes) -> ImageHeader:
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise SkipImage("truncated or corrupt PNG (no IHDR chunk)")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0:
        raise SkipImage(f"PNG of size {width}x{height}")
    if not data.endswith(_PNG_END):
        raise SkipImage("truncated PNG (no IEND chunk at its end)")
    return ImageHeader("png", width, height)


def _jpeg_header(data: bytes) -> ImageHeader:
    header = read_jpeg_header(data)
    if header is None:
        raise SkipImage("truncated or corrupt JPEG (no frame and scan header)")
    if header.frame not in _JPEG_FRAMES or header.precision != 8 or header.components not in (1, 3):
        raise SkipImage(f"JPEG with {header.components} channels, {header.precision}-bit, frame type "
                        f"0x{header.frame:02X}: not one every decoder reads (re-encode it as an 8-bit RGB JPEG)")
    if header.width == 0 or header.height == 0:
        raise SkipImage(f"JPEG of size {header.width}x{header.height}")
    if data.rfind(_JPEG_EOI, header.scan_start) < 0:
        raise SkipImage("truncated JPEG (no end-of-image marker after the image data)")
    return ImageHeader("jpeg", header.width, header.height)


def _format_name(data: bytes) -> str:
    try:
        return Image.open(io.BytesIO(data)).format or "unknown"
    except Exception:  # noqa: BLE001 -- Pillow raises many kinds on odd data; the name is for the reason only
        return "an unreadable"


def coco_example(image: CocoImage, encoded: bytes, header: ImageHeader) -> bytes:
    """The record of one image with its boxes, every feature of the schema present (empty lists for no boxes)."""
    objects: Sequence[CocoObject] = image.objects
    return encode_example({
        "image/encoded": bytes_feature([encoded]),
        "image/format": bytes_feature([header.format.encode()]),
        "image/height": int64_feature([header.height]),
        "image/width": int64_feature([header.width]),
        "image/filename": bytes_feature([image.file_name.encode("utf-8", "surrogateescape")]),
        "image/source_id": bytes_feature([image.source_id.encode("utf-8", "surrogatepass")]),
        "image/key/sha256": bytes_feature([hashlib.sha256(encoded).hexdigest().encode()]),
        "image/object/bbox/xmin": float_feature([item.xmin for item in objects]),
        "image/object/bbox/xmax": float_feature([item.xmax for item in objects]),
        "image/object/bbox/ymin": float_feature([item.ymin for item in objects]),
        "image/object/bbox/ymax": float_feature([item.ymax for item in objects]),
        "image/object/class/text": bytes_feature([item.text.encode("utf-8", "surrogatepass") for item in objects]),
        "image/object/class/label": int64_feature([item.label for item in objects]),
        "image/object/is_crowd": int64_feature([item.is_crowd for item in objects]),
        "image/object/area": float_feature([item.area for item in objects]),
    })


# --- data verify ---------------------------------------------------------------------------------------------


def check_coco_record(features: Mapping[str, Feature], settings: Mapping[str, int], decode: bool) -> str | None:
    """What is wrong with one parsed ``coco`` record, or None: every feature of the schema with its type and
    length, the object lists of one length, boxes in [0, 1] with min <= max, labels 1..num_classes, crowd flags
    0 or 1, areas >= 0, and an image of its declared format and size (decoded when ``decode``, else its header
    and end marker)."""
    problem = _schema_problem(features) or _object_problem(features, settings.get("num_classes"))
    if problem:
        return problem
    name = features["image/filename"][0]
    problem = _image_problem(features, decode)
    return f"({name.decode(errors='replace') if isinstance(name, bytes) else name}) {problem}" if problem else None


def _schema_problem(features: Mapping[str, Feature]) -> str | None:
    for key, feature in SCHEMAS["coco"].items():
        if key not in features:
            return f"no {key}"
        values = features[key]
        if feature.length is not None and len(values) != feature.length:
            return f"{key} has {len(values)} values, expected {feature.length}"
        wanted = _PYTHON_TYPES[feature.type]
        if any(not isinstance(value, wanted) for value in values):
            return f"{key} is not of type {feature.type}"
    lengths = {len(features[key]) for key in _OBJECT_LISTS}
    if len(lengths) > 1:
        return f"the object lists have different lengths ({sorted(lengths)})"
    return None


def _object_problem(features: Mapping[str, Feature], num_classes: int | None) -> str | None:
    """Called after ``_schema_problem``: every list has its schema's type."""
    sides = [cast(list[float], features[f"image/object/bbox/{side}"]) for side in ("xmin", "xmax", "ymin", "ymax")]
    for index, (xmin, xmax, ymin, ymax) in enumerate(zip(*sides, strict=True)):
        inside = all(math.isfinite(value) and 0.0 <= value <= 1.0 for value in (xmin, xmax, ymin, ymax))
        if not (inside and xmin <= xmax and ymin <= ymax):
            return f"box {index} [{xmin}, {xmax}, {ymin}, {ymax}] (xmin, xmax, ymin, ymax) not within [0, 1] in order"
    for label in cast(list[int], features["image/object/class/label"]):
        if not 1 <= label <= (num_classes or label):
            return f"label {label} outside 1..{num_classes or 'N'}"
    if any(flag not in (0, 1) for flag in features["image/object/is_crowd"]):
        return "is_crowd other than 0 or 1"
    if any(not (math.isfinite(area) and area >= 0) for area in cast(list[float], features["image/object/area"])):
        return "an area below 0 or not finite"
    return None


def _image_problem(features: Mapping[str, Feature], decode: bool) -> str | None:
    encoded = cast(bytes, features["image/encoded"][0])
    declared = (features["image/format"][0], features["image/width"][0], features["image/height"][0])
    try:
        header = image_header(encoded)
    except SkipImage as reason:
        return str(reason)
    found = (header.format.encode(), header.width, header.height)
    if found != declared:
        return f"declared {_shown(declared)}, the image is {_shown(found)}"
    if decode:
        try:
            with Image.open(io.BytesIO(encoded)) as image:
                image.load()
                size = image.size
        except Exception as error:  # noqa: BLE001 -- Pillow raises many kinds on corrupt data: a finding
            return f"image does not decode ({error})"
        if size != (header.width, header.height):
            return f"declared {header.width}x{header.height}, the image decodes to {size[0]}x{size[1]}"
    return None


def _shown(image: tuple[object, ...]) -> str:
    kind, width, height = image
    return f"{kind.decode(errors='replace') if isinstance(kind, bytes) else kind} {width}x{height}"
