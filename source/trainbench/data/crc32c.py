"""CRC-32C (Castagnoli), the checksum of TFRecord files, without TensorFlow.

The checksum comes from ``google-crc32c`` (the wrapper of Google's C library, used by the Google Cloud storage
clients; pinned in constraints.txt, a dependency in pyproject.toml): about 20 GB/s on a 110 kB record here with
the hardware CRC instruction, where converting ImageNet spent about 70 % of its time in the numpy version below
(120-150 MB/s). The converter (``records``), the TFRecord reader and ``data verify`` all go through ``crc32c``.

The numpy version is kept, as the fallback only, because it still earns something: where the library is missing
or its compiled extension does not load, the library's own pure-Python code runs at about 5 MB/s, 25 times
slower, which would make ``verify`` and the PyTorch reader crawl. ``IMPLEMENTATION`` says which one runs.
``TRAINBENCH_CRC32C`` chooses: unset (the library when it loads, else numpy), ``numpy`` (forced; the benchmark
benchmarks/convert_speed.py measures the two against each other that way) or ``google-crc32c`` (the library or
a one-line error); any other value is refused.

The numpy version: a byte-at-a-time table loop in Python runs at about 7 MB/s, too slow to check ImageNet records
(about 110 kB each) as fast as they are decoded. CRC is linear over GF(2), so a long payload is cut into K equal
chunks whose CRC registers advance together, one numpy operation per byte position, and the K registers are then
folded pairwise: crc(A + B) = advance(crc(A), len(B)) ^ crc(B), where ``advance`` (feeding len(B) zero bytes) is a
linear map stored as four 256-entry tables, one per register byte.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

from trainbench.errors import UsageError

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
    initial = np.array(0xFFFFFFFF, np.uint32)  # 0-d: _advance takes arrays
    for bit in range(size.bit_length()):
        if size >> bit & 1:
            initial = _advance(_ADVANCE[bit], initial)
    return int(initial ^ registers[0]) ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """A CRC as a TFRecord stores it: rotated right by 15 bits plus a constant, modulo 2**32."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    """The checksum of ``data`` as a TFRecord stores it."""
    return mask(crc32c(data))


def _c_library() -> ModuleType | None:
    """google_crc32c when its compiled extension loads (its own pure-Python fallback is slower than numpy's)."""
    try:
        import google_crc32c
    except ImportError:
        return None
    return google_crc32c if google_crc32c.implementation == "c" else None


def _choose(setting: str) -> ModuleType | None:
    """The library, or None for numpy, as ``TRAINBENCH_CRC32C`` asks (a typo must not measure the wrong one)."""
    if setting == "numpy":
        return None
    library = _c_library()
    if setting == LIBRARY and library is None:
        raise UsageError(f"{ENVIRONMENT}={LIBRARY}: the google-crc32c package with its C extension is not installed")
    if setting not in ("", LIBRARY):
        raise UsageError(f"{ENVIRONMENT}={setting!r}: use numpy or {LIBRARY}, or leave it unset")
    return library


ENVIRONMENT, LIBRARY = "TRAINBENCH_CRC32C", "google-crc32c"
_GOOGLE = _choose(os.environ.get(ENVIRONMENT, ""))
IMPLEMENTATION = "google-crc32c (C)" if _GOOGLE is not None else "numpy"


def crc32c(data: bytes | memoryview) -> int:
    """The CRC-32C of ``data`` (initial value and final xor 0xFFFFFFFF, as TFRecord and iSCSI use)."""
    if _GOOGLE is None:
        return crc32c_numpy(data)
    return _GOOGLE.value(data if isinstance(data, bytes) else bytes(data))  # it refuses views: a copy
