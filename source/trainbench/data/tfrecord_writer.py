"""Writing ``tf.train.Example`` records into TFRecord shards, without TensorFlow.

Importing TensorFlow costs seconds per worker process, more than converting thousands of images, so the few
protobuf messages of an Example and the record framing are encoded here (``tfrecord_reader`` reads them back).
Large payloads are kept as lists of parts and joined once, so an image's bytes are copied as little as possible.

Framing of one record: uint64 length, uint32 masked CRC-32C of those 8 bytes, payload, uint32 masked CRC-32C of
the payload, all little-endian. A shard is written to a temporary name and renamed when complete.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainbench.data.bboxes import Box
from trainbench.data.crc32c import masked_crc32c
from trainbench.data.imagefiles import PreparedImage
from trainbench.errors import UsageError, os_reason

Parts = list[bytes]
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3  # Feature's oneof field numbers
PARTIAL = ".partial-"  # temporary shard names: .<name>.partial-<pid>


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1  # int64: negative numbers as their two's complement, as protobuf does
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def _header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field (wire type 2), the content following it."""
    return _varint(number << 3 | 2) + _varint(length)


def bytes_feature(values: Sequence[bytes]) -> Parts:
    parts: Parts = []
    for value in values:
        parts += (_header(1, len(value)), value)
    return [_header(_BYTES_LIST, sum(map(len, parts))), *parts]


def _packed(number: int, packed: bytes) -> Parts:
    inner = _header(1, len(packed)) + packed if packed else b""  # an empty list: the field is left out
    return [_header(number, len(inner)) + inner]


def float_feature(values: Sequence[float]) -> Parts:
    return _packed(_FLOAT_LIST, struct.pack(f"<{len(values)}f", *values))


def int64_feature(values: Sequence[int]) -> Parts:
    return _packed(_INT64_LIST, b"".join(map(_varint, values)))


@functools.cache
def _key_field(key: str) -> bytes:
    return _header(1, len(key.encode())) + key.encode()


def encode_example(features: dict[str, Parts]) -> bytes:
    """Example{features: Features{feature: map<string, Feature>}}; keys in sorted order, for identical output.

    Each map entry is {key=1, value=2}. Lengths are summed over the parts, so the image bytes are copied once.
    """
    parts: Parts = []
    for key in sorted(features):
        feature, key_field = features[key], _key_field(key)
        size = sum(map(len, feature))
        value_header = _header(2, size)
        parts += (_header(1, len(key_field) + len(value_header) + size), key_field, value_header, *feature)
    return b"".join([_header(1, sum(map(len, parts))), *parts])


def frame(payload: bytes) -> Parts:
    """One TFRecord record around ``payload``."""
    length = _LENGTH.pack(len(payload))
    return [length, _CRC.pack(masked_crc32c(length)), payload, _CRC.pack(masked_crc32c(payload))]


@dataclass(frozen=True)
class ShardFile:
    records: int
    bytes: int
    sha256: str


def partial_path(path: Path) -> Path:
    # The process id keeps two writers apart (a worker orphaned by a killed run and the rerun's).
    return path.with_name(f".{path.name}{PARTIAL}{os.getpid()}")


def write_shard(path: Path, payloads: Iterable[bytes]) -> ShardFile:
    """Write every payload as a record of ``path``: under a temporary name, renamed into place when complete.

    A write error (a full disk) is a UsageError naming the folder; this shard's temporary file is removed, the
    shards already done stay.
    """
    temporary = partial_path(path)
    digest = hashlib.sha256()
    records = size = 0
    try:
        with open(temporary, "wb") as out:
            for payload in payloads:
                for part in frame(payload):
                    out.write(part)
                    digest.update(part)
                    size += len(part)
                records += 1
        os.replace(temporary, path)
    except OSError as error:
        raise UsageError(f"{path.parent}: cannot write {path.name} ({os_reason(error)}); the shards finished "
                         "so far are kept: rerun the same command to resume") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)  # gone after the rename; removed after a failure
    return ShardFile(records, size, digest.hexdigest())


# --- the ImageNet record schema (as tf-models-official's ImageNet reader and the original converter use it) --


def _utf8(text: str) -> bytes:
    """A name as the bytes it was on disk: a non-UTF-8 file name arrives with surrogate escapes (os.fsdecode)."""
    return text.encode("utf-8", "surrogateescape")


def image_example(image: PreparedImage, filename: str, label: int, synset: str, text: str,
                  boxes: Sequence[Box] = ()) -> bytes:
    """The record of one image: RGB JPEG, size, class (label 1..N, synset, text) and normalised boxes."""
    return encode_example({
        "image/encoded": bytes_feature([image.encoded]),
        "image/height": int64_feature([image.height]),
        "image/width": int64_feature([image.width]),
        "image/colorspace": bytes_feature([b"RGB"]),
        "image/channels": int64_feature([3]),
        "image/format": bytes_feature([b"JPEG"]),
        "image/filename": bytes_feature([_utf8(filename)]),
        "image/class/label": int64_feature([label]),
        "image/class/synset": bytes_feature([_utf8(synset)]),
        "image/class/text": bytes_feature([_utf8(text)]),
        "image/object/bbox/xmin": float_feature([box.xmin for box in boxes]),
        "image/object/bbox/ymin": float_feature([box.ymin for box in boxes]),
        "image/object/bbox/xmax": float_feature([box.xmax for box in boxes]),
        "image/object/bbox/ymax": float_feature([box.ymax for box in boxes]),
        "image/object/bbox/label": int64_feature([label] * len(boxes)),
    })
