"""Image files judged by their content, never by their name: what goes into a record as an RGB JPEG.

An ordinary RGB JPEG is stored byte for byte: its size comes from the frame header, found by walking the marker
segments, and its completeness from the end-of-image marker, so the pixels are never decoded (nor Pillow called).
Anything else Pillow can decode (a PNG named ``.JPEG``, with or without alpha, a CMYK or grayscale JPEG, ...) is
re-encoded as an RGB JPEG. Empty, truncated and non-image files raise ``SkipImage`` with the reason, for
``skipped.csv``. The type is judged first from a file's first bytes (``check_signature``: the magic numbers of the
formats Pillow reads), so a large non-image is refused after reading its head only. Formats that have no
signature (TGA, IM, ...) are not accepted: any file could pass for one of them.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

REENCODE_QUALITY = 95  # re-encoded files only; 4:4:4 chroma keeps the colour detail of PNG sources
_WHITE = (255, 255, 255)
_SOI, _EOI, _SOS = b"\xff\xd8", b"\xff\xd9", 0xDA
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0-7: no length field
_FRAMES = frozenset({*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC), *range(0xCD, 0xD0)})  # SOFn
_ORDINARY_FRAMES = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended sequential, progressive (Huffman)
SIGNATURE_BYTES = 16  # the prefix Pillow's format plugins judge a file by
NOT_AN_IMAGE = "not an image (content not recognised)"


class SkipImage(Exception):
    """A file that cannot become a record; the message is the reason listed in skipped.csv."""


@dataclass(frozen=True)
class PreparedImage:
    encoded: bytes  # an RGB JPEG
    height: int
    width: int
    conversion: str | None  # what was done to a non-standard file, e.g. "PNG RGBA -> RGB JPEG"; None: stored as is


def prepare_image(data: bytes) -> PreparedImage:
    """The record-ready JPEG for a file's bytes, or SkipImage saying why it cannot be used."""
    check_signature(data[:SIGNATURE_BYTES])
    header = read_jpeg_header(data)
    if header is not None and header.ordinary:
        if data.rfind(_EOI, header.scan_start) < 0:
            raise SkipImage("truncated JPEG (no end-of-image marker after the image data)")
        return PreparedImage(data, header.height, header.width, None)
    return _reencode(_open_header(data))


def check_signature(head: bytes) -> None:
    """SkipImage unless a file's first bytes (at least SIGNATURE_BYTES of them) start an image format."""
    if not head:
        raise SkipImage("empty file")
    if not (head.startswith(_SOI) or any(_accepts(accept, head) for accept in _signatures().values())):
        raise SkipImage(NOT_AN_IMAGE)


def _accepts(accept: Callable[[bytes], Any], head: bytes) -> bool:
    try:
        return bool(accept(head[:SIGNATURE_BYTES]))
    except Exception:  # noqa: BLE001 -- a plugin's test on a file shorter than it expects: not its format
        return False


@functools.cache
def _signatures() -> dict[str, Callable[[bytes], Any]]:
    """Format name -> signature test, for each format Pillow opens that has one."""
    Image.init()
    return {name: accept for name in Image.ID if (accept := Image.OPEN[name][1]) is not None}


def _open_header(data: bytes) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data), formats=list(_signatures()))  # lazy: the header, not the pixels
    except UnidentifiedImageError:
        raise SkipImage(NOT_AN_IMAGE) from None
    except Exception as error:  # noqa: BLE001 -- Pillow's plugins raise many kinds on corrupt data; skip the file
        raise SkipImage(f"unreadable image header ({error})") from None


@dataclass(frozen=True)
class JpegHeader:
    frame: int  # the start-of-frame marker: the coding process
    precision: int
    height: int
    width: int
    components: int
    scan_start: int  # offset just past the first start-of-scan header

    @property
    def ordinary(self) -> bool:
        """Huffman-coded 8-bit 3-channel (YCbCr or RGB): what every JPEG decoder reads, stored as is."""
        return self.frame in _ORDINARY_FRAMES and self.precision == 8 and self.components == 3 and \
            self.height > 0 and self.width > 0


def read_jpeg_header(data: bytes) -> JpegHeader | None:
    """The frame header of a JPEG, walking its marker segments up to the first scan; None if it is not a JPEG
    or ends before the scan. A few segments are read, never the image data."""
    if not data.startswith(_SOI):
        return None
    position, size, frame = 2, len(data), None
    while position + 4 <= size:
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker in _STANDALONE_MARKERS:
            position += 2
            continue
        end = position + 2 + int.from_bytes(data[position + 2:position + 4], "big")
        if marker in _FRAMES and end <= size:
            frame = (marker, data[position + 4], int.from_bytes(data[position + 5:position + 7], "big"),
                     int.from_bytes(data[position + 7:position + 9], "big"), data[position + 9])
        if marker == _SOS:
            return JpegHeader(*frame, scan_start=end) if frame is not None and end <= size else None
        position = end
    return None


def jpeg_is_complete(data: bytes) -> bool:
    """Whether an end-of-image marker follows the first scan header (a truncated file lacks it).

    The marker is searched after the scan header only: an EXIF thumbnail before it carries its own markers.
    """
    header = read_jpeg_header(data)
    return header is not None and data.rfind(_EOI, header.scan_start) >= 0


def _reencode(image: Image.Image) -> PreparedImage:
    source = f"{image.format} {image.mode}"
    try:
        image.load()  # Pillow refuses truncated data here (LOAD_TRUNCATED_IMAGES is off)
        rgb = _to_rgb(image)
    except Exception as error:  # noqa: BLE001 -- as in _open_header: one bad file must not end the conversion
        raise SkipImage(f"truncated or corrupt {image.format} data ({error})") from None
    out = io.BytesIO()
    rgb.save(out, "JPEG", quality=REENCODE_QUALITY, subsampling=0)
    return PreparedImage(out.getvalue(), rgb.height, rgb.width, f"{source} -> RGB JPEG")


def _to_rgb(image: Image.Image) -> Image.Image:
    # Transparent pixels hold arbitrary colours; over white they look as the image is meant to be seen.
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, _WHITE)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")
