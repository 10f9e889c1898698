"""CRC-32C (Castagnoli), the checksum of TFRecord files, without TensorFlow.

The checksum comes from ``google-crc32c`` (the wrapper of Google's C library, used by the Google Cloud storage
clients; pinned in constraints.txt): several GB/s with the hardware CRC instruction, where converting ImageNet
spent about 70 % of its time in the numpy version below (about 150 MB/s). The numpy version is kept for an
install where the library is missing or has no compiled extension (its own pure-Python fallback runs at a few
MB/s); ``IMPLEMENTATION`` says which one runs. ``TRAINBENCH_CRC32C=numpy`` in the environment forces the numpy
version (benchmarks/convert_speed.py measures the two against each other that way).

The numpy version: a byte-at-a-time table loop in Python runs at about 7 MB/s, too slow to check ImageNet records
(about 110 kB each) as fast as they are decoded. CRC is linear over GF(2), so a long payload is cut into K equal
chunks whose CRC registers advance together, one numpy operation per byte position, and the K registers are then
folded pairwise: crc(A + B) = advance(crc(A), len(B)) ^ crc(B), where ``advance`` (feeding len(B) zero bytes) is a
linear map stored as four 256-entry tables, one per register byte.
"""

from __future__ import annotations

import os

import numpy as np

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8  # TFRecord's checksum masking constant
_SHORT = 1024  # below this the plain Python loop is faster than numpy's per-call overhead
_CHUNK = 16  # bytes per chunk in the vectorised loop: fewest numpy calls per byte on ImageNet-sized records
_BITS = np.arange(32, dtype=np.uint32)


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_TABLE_LIST = [int(value) for value in _TABLE]


def _apply_columns(columns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A linear map on 32-bit registers, given as the images of the 32 unit bits, applied to ``values``."""
    bits = (values[..., None] >> _BITS) & np.uint32(1)
    return np.bitwise_xor.reduce(bits * columns, axis=-1).astype(np.uint32)


def _advance_tables(levels: int) -> list[np.ndarray]:
    """For each k < levels: the map 'feed 2**k zero bytes' as (4, 256) tables indexed by each register byte."""
    unit = np.uint32(1) << _BITS
    columns = (_TABLE[unit & 0xFF] ^ (unit >> 8)).astype(np.uint32)  # feed one zero byte
    byte_values = np.arange(256, dtype=np.uint32)
    tables = []
    for _ in range(levels):
        tables.append(np.stack([_apply_columns(columns, byte_values << np.uint32(8 * i)) for i in range(4)]))
        columns = _apply_columns(columns, columns)  # squaring: twice as many zero bytes
    return tables


_ADVANCE = _advance_tables(48)  # payloads up to 2**48 bytes


def _advance(tables: np.ndarray, registers: np.ndarray) -> np.ndarray:
    return (tables[0][registers & 0xFF] ^ tables[1][(registers >> 8) & 0xFF]
            ^ tables[2][(registers >> 16) & 0xFF] ^ tables[3][registers >> 24])


def _crc_short(data: bytes | memoryview) -> int:
    register = 0xFFFFFFFF
    table = _TABLE_LIST
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register ^ 0xFFFFFFFF


def crc32c_numpy(data: bytes | memoryview) -> int:
    """The CRC-32C of ``data`` computed with numpy (the fallback; see the module's docstring)."""
    size = len(data)
    if size < _SHORT:
        return _crc_short(data)
    chunks = 1 << (-(-size // _CHUNK) - 1).bit_length()  # a power of two, for the pairwise folding
    # Leading zero bytes leave a zero register unchanged, so padding in front does not alter the raw CRC.
    padded = np.zeros(chunks * _CHUNK, np.uint8)
    padded[len(padded) - size:] = np.frombuffer(data, np.uint8)
    columns = np.ascontiguousarray(padded.reshape(chunks, _CHUNK).T)
    registers = np.zeros(chunks, np.uint32)
    for column in columns:
        registers = _TABLE[(registers ^ column) & 0xFF] ^ (registers >> 8)
    level = _CHUNK.bit_length() - 1
    while len(registers) > 1:
        registers = _advance(_ADVANCE[level], registers[0::2]) ^ registers[1::2]
        level += 1
    # The initial value 0xFFFFFFFF, carried through the whole (unpadded) length, enters linearly.
    initial = np.uint32(0xFFFFFFFF)
    for bit in range(size.bit_length()):
        if size >> bit & 1:
            initial = _advance(_ADVANCE[bit], initial)
    return int(initial ^ registers[0]) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    """The checksum as a TFRecord stores it: rotated right by 15 bits plus a constant, modulo 2**32."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _library() -> object | None:
    if os.environ.get("TRAINBENCH_CRC32C") == "numpy":
        return None
    try:
        import google_crc32c
    except ImportError:
        return None
    return google_crc32c if google_crc32c.implementation == "c" else None


_GOOGLE = _library()
IMPLEMENTATION = "google-crc32c (C)" if _GOOGLE is not None else "numpy"


def crc32c(data: bytes | memoryview) -> int:
    """The CRC-32C of ``data`` (initial value and final xor 0xFFFFFFFF, as TFRecord and iSCSI use)."""
    if _GOOGLE is None:
        return crc32c_numpy(data)
    return _GOOGLE.value(data if isinstance(data, bytes) else bytes(data))  # it takes bytes, not views
