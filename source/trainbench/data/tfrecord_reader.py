"""TFRecord files and ``tf.train.Example`` records, read without TensorFlow.

The PyTorch side must never import TensorFlow (importing both in one process crashes), so the record framing and
the few protobuf messages of an Example are decoded here by hand.

A TFRecord file is a sequence of records: uint64 length, uint32 masked CRC-32C of those 8 bytes, the payload,
uint32 masked CRC-32C of the payload (all little-endian). Every checksum is verified, so a corrupt or truncated
shard fails with a message naming the file and the byte offset, never with wrong images.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from trainbench.data.crc32c import masked_crc32c
from trainbench.errors import UsageError

Feature = list[bytes] | list[float] | list[int]

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_READ_BUFFER = 1 << 20


class DataError(UsageError):
    """Unusable input data (a corrupt or truncated shard, an unreadable image): the message names the file."""


# --- record framing ---------------------------------------------------------------------------------------------


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb", buffering=_READ_BUFFER)  # the callers close it (with ...)
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror})") from None


def _read_header(file: BinaryIO, path: Path, offset: int) -> int | None:
    """The payload length of the record at ``offset``, or None at a clean end of file."""
    header = file.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise DataError(f"{path}: truncated record header at byte {offset}")
    length, length_crc = _HEADER.unpack(header)
    if masked_crc32c(header[:8]) != length_crc:
        raise DataError(f"{path}: corrupt record at byte {offset} (length checksum mismatch)")
    return length


def read_records(path: Path, verify: bool = True) -> Iterator[bytes]:
    """Every record's payload, in file order; ``verify=False`` skips the payload checksum (label scans)."""
    path = Path(path)
    with _open(path) as file:
        offset = 0
        while (length := _read_header(file, path, offset)) is not None:
            payload = file.read(length)
            footer = file.read(_FOOTER.size)
            if len(payload) < length or len(footer) < _FOOTER.size:
                raise DataError(f"{path}: truncated record at byte {offset} ({length} bytes announced, file too short)")
            if verify and masked_crc32c(payload) != _FOOTER.unpack(footer)[0]:
                raise DataError(f"{path}: corrupt record at byte {offset} (data checksum mismatch)")
            offset += _HEADER.size + length + _FOOTER.size
            yield payload


def count_records(path: Path) -> int:
    """Records in a file, reading only the headers (the payloads are skipped, not checked)."""
    path = Path(path)
    size = os.path.getsize(path)
    count = offset = 0
    with _open(path) as file:
        while (length := _read_header(file, path, offset)) is not None:
            end = offset + _HEADER.size + length + _FOOTER.size
            if end > size:
                raise DataError(f"{path}: truncated record at byte {offset} ({length} bytes announced, file too short)")
            file.seek(end)
            offset = end
            count += 1
    return count


def find_corruption(files: Iterable[Path]) -> DataError | None:
    """The first fault in these shards, for naming the file behind a reader's anonymous error.

    Headers first (cheap: truncation and damaged lengths, the common faults), then every payload checksum.
    """
    files = list(files)
    for check in (count_records, lambda path: sum(1 for _ in read_records(path))):
        for path in files:
            try:
                check(path)
            except DataError as error:
                return error
    return None


# --- tf.train.Example -----------------------------------------------------------------------------------------
# Example{features=1: Features}; Features{feature=1: map<string, Feature>}, each map entry {key=1, value=2};
# Feature{oneof bytes_list=1, float_list=2, int64_list=3}; each list {value=1, repeated, packed or not}.


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value) of a message: an int for a varint, the raw bytes for every other wire type."""
    position, end = 0, len(data)
    while position < end:
        key, position = _varint(data, position)
        wire = key & 7
        if wire == 0:
            value, position = _varint(data, position)
            yield key >> 3, value
            continue
        if wire == 2:
            size, position = _varint(data, position)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if position + size > end:
            raise ValueError("truncated protobuf field")
        yield key >> 3, data[position:position + size]
        position += size


def _bytes(value: int | memoryview) -> memoryview:
    """A length-delimited field's content; a varint where a message or bytes belong means a malformed record."""
    if isinstance(value, int):
        raise ValueError("a number where a message was expected")
    return value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int64s(data: memoryview) -> list[int]:
    values = []
    for number, value in _fields(data):
        if number != 1:
            continue
        if isinstance(value, int):  # unpacked: one varint per field
            values.append(_signed(value))
            continue
        position = 0  # packed: a run of varints
        while position < len(value):
            item, position = _varint(value, position)
            values.append(_signed(item))
    return values


def _floats(data: memoryview) -> list[float]:
    values: list[float] = []
    for number, value in _fields(data):
        if number == 1:  # packed (a run of float32) and unpacked (one float32) read the same way
            content = _bytes(value)
            values.extend(struct.unpack(f"<{len(content) // 4}f", content))
    return values


def _feature(data: memoryview) -> Feature:
    for number, value in _fields(data):
        if number == 1:
            return [bytes(_bytes(item)) for field, item in _fields(_bytes(value)) if field == 1]
        if number == 2:
            return _floats(_bytes(value))
        if number == 3:
            return _int64s(_bytes(value))
    return []  # no kind set: an empty feature


def _map_entry(entry: memoryview) -> tuple[str, Feature]:
    key, value = "", memoryview(b"")
    for field, content in _fields(entry):
        if field == 1:
            key = bytes(_bytes(content)).decode()
        elif field == 2:
            value = _bytes(content)
    return key, _feature(value)


def parse_example(payload: bytes | memoryview) -> dict[str, Feature]:
    """A serialised ``tf.train.Example`` as {feature name: list of bytes, floats or ints}.

    Raises ValueError when the payload is not a well-formed Example.
    """
    features: dict[str, Feature] = {}
    try:
        for number, message in _fields(memoryview(payload)):
            if number == 1:
                entries = (_map_entry(_bytes(entry)) for field, entry in _fields(_bytes(message)) if field == 1)
                features.update(entries)  # a repeated key: the last one wins, as in protobuf
    except (ValueError, IndexError, struct.error) as error:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"malformed tf.train.Example ({error})") from None
    return features
