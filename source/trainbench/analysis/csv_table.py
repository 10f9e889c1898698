"""Find the profiler table inside a file and read it with pandas' C parser.

Profiler CSVs are rarely clean: ``==PROF==``/``==ERROR==`` lines and the application's own output come before
the header, rows are ragged, and some ``.csv`` files hold no table at all. The header line is located first
(a cheap scan of line prefixes); pandas' C parser then reads from there, inferring numbers with thousands
separators. Reading from the path with ``skiprows`` is the fast way, but pandas honours quotes and lone carriage
returns in skipped lines, so a preamble holding either is skipped by starting from the header's byte offset.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from trainbench.errors import UsageError, os_reason

NCU_DETAILS = "ncu-details"
NCU_RAW = "ncu-raw"
NVPROF_METRICS = "nvprof-metrics"

# Missing values as ncu and nvprof print them; nothing else (a kernel may well be called "NA" or "None").
NA_VALUES = ["", "n/a", "N/A"]
_NCU_PREFIXES = (b'"ID",', b"ID,")
_NVPROF_PREFIXES = (b'"Device","Kernel","Invocations"', b"Device,Kernel,Invocations")
_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"  # archived profiles (batch_X.csv.gz) are read as they are
# ncu --csv redirected by Windows PowerShell (`> file`) is UTF-16, usually with a byte-order mark.
_UTF16_BOMS = {codecs.BOM_UTF16_LE: "utf-16-le", codecs.BOM_UTF16_BE: "utf-16-be"}
_SNIFF = 4096
_UNSAFE_TO_SKIP = (b'"', b"\r", b"\x00")
_WIDE = 32  # tables with more columns than this are read column-selectively (the raw page has hundreds)


@dataclass(frozen=True)
class Table:
    path: Path
    kind: str  # NCU_DETAILS, NCU_RAW or NVPROF_METRICS
    offset: int  # byte offset of the header line
    line: int  # its line number, from 0
    plain_preamble: bool  # nothing before it that pandas' line skipping would misread
    fields: tuple[str, ...]  # the header's column names
    streamed: bool = False  # gzip or UTF-16: read through open_profile, offsets are in the decoded stream


def _line_fields(text: str) -> list[str]:
    """One line's fields. The csv module refuses a line with a carriage return inside it (pandas, which reads the
    table, ends a line there): a malformed table, one line of error like pandas' own, not a crash."""
    try:
        return next(csv.reader([text]), [])
    except csv.Error as error:
        raise UsageError(f"malformed CSV table: cannot split a line into fields ({_one_line(error)})") from None


def _header_fields(line: bytes) -> tuple[str, ...]:
    return tuple(_line_fields(line.decode("utf-8", errors="replace").rstrip("\r\n")))


def _classify(line: bytes) -> tuple[str, tuple[str, ...]] | None:
    """The table kind a header line starts, or None for any other line."""
    if line.startswith(_NVPROF_PREFIXES):
        fields = _header_fields(line)
        return (NVPROF_METRICS, fields) if {"Metric Name", "Avg"} <= set(fields) else None
    if not line.startswith(_NCU_PREFIXES):
        return None
    fields = _header_fields(line)
    if {"Metric Name", "Metric Value"} <= set(fields):
        return NCU_DETAILS, fields
    # The raw page names launches like the details page does; anything else starting "ID," is app output.
    return (NCU_RAW, fields) if "Kernel Name" in fields or "Process ID" in fields else None


def utf16_encoding(head: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when the first bytes are UTF-16 text (by byte-order mark, else by its NUL bytes)."""
    for bom, encoding in _UTF16_BOMS.items():
        if head.startswith(bom):
            return encoding
    pairs = len(head) // 2
    if pairs < 2:
        return None
    even_nul, odd_nul = head[0:2 * pairs:2].count(0), head[1:2 * pairs:2].count(0)
    # ASCII text in UTF-16 has a NUL in every other byte; a real CSV has none at all.
    if odd_nul == pairs and even_nul == 0:
        return "utf-16-le"
    if even_nul == pairs and odd_nul == 0:
        return "utf-16-be"
    return None


def _utf16_as_utf8(handle: BinaryIO, encoding: str) -> BinaryIO:
    try:
        text = handle.read().decode(encoding)
    except UnicodeDecodeError as error:
        raise UsageError(f"damaged UTF-16 text: {error}") from None
    return io.BytesIO(text.removeprefix("\ufeff").encode("utf-8"))


def open_profile(path: str | Path) -> BinaryIO:
    """Open for reading as UTF-8 bytes (gzip and UTF-16 decoded), with the OS problem as a one-line UsageError."""
    target = Path(path)
    if target.is_dir():
        raise UsageError("is a directory, not a profiler CSV")
    try:
        with target.open("rb") as raw:
            head = raw.read(_SNIFF)
            encoding = utf16_encoding(head)
            if encoding is not None:
                raw.seek(0)
                return _utf16_as_utf8(raw, encoding)
        if head.startswith(_GZIP_MAGIC):
            return gzip.open(target, "rb")  # type: ignore[return-value]
        return target.open("rb")
    except FileNotFoundError:
        raise UsageError("no such file") from None
    except OSError as error:
        raise UsageError(f"cannot read: {os_reason(error)}") from None


@contextmanager
def _gzip_errors() -> Iterator[None]:
    """A truncated or corrupt .gz shows itself only while it is read: one UsageError wherever that happens."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise UsageError(f"damaged gzip data: {error}") from None


def locate_table(path: str | Path) -> Table:
    """Scan lines up to the first table header; raises UsageError when there is none."""
    offset, plain, seen_any = 0, True, False
    with _gzip_errors(), open_profile(path) as handle:
        for number, line in enumerate(handle):
            bom = len(_BOM) if number == 0 and line.startswith(_BOM) else 0
            found = _classify(line[bom:])
            if found is not None:
                return Table(Path(path), found[0], offset + bom, number, plain, found[1],
                             not isinstance(handle, io.BufferedReader))
            seen_any = seen_any or bool(line.strip())
            plain = plain and not any(mark in line for mark in _UNSAFE_TO_SKIP)
            offset += len(line)
    if not seen_any:
        raise UsageError("empty file")
    raise UsageError("no ncu or nvprof metrics table in it (no header line ID,Process ID,... or Device,Kernel,...)")


def _read(table: Table, usecols: list[int] | None, skip_units: bool, options: dict[str, Any]) -> pd.DataFrame:
    with warnings.catch_warnings():
        # pandas warns on stderr (mixed types across chunks, rows longer than the header); a row longer than
        # the header must not pass unnoticed when all columns are read, so that one becomes an error.
        warnings.simplefilter("ignore")
        if usecols is None:
            warnings.simplefilter("error", pd.errors.ParserWarning)
        return _read_from(table, usecols, skip_units, options)


def _read_from(table: Table, usecols: list[int] | None, skip_units: bool, options: dict[str, Any]) -> pd.DataFrame:
    if table.plain_preamble and not table.streamed:
        skip: int | list[int] = [*range(table.line), table.line + 1] if skip_units else table.line
        return pd.read_csv(table.path, skiprows=skip, usecols=usecols, **options)
    with _gzip_errors(), open_profile(table.path) as handle:
        handle.seek(table.offset)
        return pd.read_csv(handle, skiprows=[1] if skip_units else None, usecols=usecols, **options)


def _read_any_encoding(table: Table, usecols: list[int] | None, skip_units: bool) -> pd.DataFrame:
    options: dict[str, Any] = {
        "thousands": ",",
        "keep_default_na": False,
        "na_values": NA_VALUES,
        "engine": "c",
        "encoding": "utf-8",
        "index_col": False,  # never take a first column as the index when rows are longer than the header
    }
    try:
        return _read(table, usecols, skip_units, options)
    except UnicodeDecodeError:
        # Replacing bad bytes makes pandas decode in Python (2x slower), so only files that need it pay.
        return _read(table, usecols, skip_units, {**options, "encoding_errors": "replace"})


def read_columns(table: Table, columns: list[str], skip_units: bool = False) -> pd.DataFrame:
    """The named columns, one row per data line, NaN where a ragged row stops early.

    The C parser infers types, so clean numeric columns arrive as numbers with thousands separators already
    removed; a column holding any text (``(32, 4, 1)``) stays text and is cleaned by :func:`as_number`.
    Narrow tables are read whole (pandas is faster without ``usecols``), and again column by column only when
    a row is longer than the header; ``skip_units`` leaves out the line after the header (the raw page's units).
    """
    selected = sorted({table.fields.index(column) for column in columns})
    try:
        if len(table.fields) <= _WIDE:
            try:
                return _read_any_encoding(table, None, skip_units)[list(columns)]
            except (pd.errors.ParserError, pd.errors.ParserWarning):
                pass  # a row longer than the header: usecols ignores the extra fields
        return _read_any_encoding(table, selected, skip_units)
    except (pd.errors.ParserError, ValueError, UnicodeError, OverflowError, KeyError) as error:
        raise UsageError(f"malformed CSV table: {_one_line(error)}") from None


def as_number(column: pd.Series) -> pd.Series:
    """A column as float64: numbers as they are, text cleaned (thousands separators) and parsed, else NaN."""
    if is_numeric_dtype(column.dtype) and not is_bool_dtype(column.dtype):
        numbers = column.astype("float64")
    else:
        text = column.astype("str").str.replace(",", "", regex=False).str.strip()
        numbers = pd.to_numeric(text, errors="coerce").astype("float64")
    return numbers.where(np.isfinite(numbers.to_numpy()))  # inf is no measurement either


def unreadable(column: pd.Series) -> np.ndarray:
    """True where a cell holds neither a missing-value mark (n/a, empty) nor a finite number: "nan", "1e999"."""
    present = column.notna().to_numpy(dtype=bool)
    if is_numeric_dtype(column.dtype) and not is_bool_dtype(column.dtype):
        return present & np.isinf(column.to_numpy(dtype="float64", na_value=np.nan))
    marked = column.astype("str").str.strip().isin(NA_VALUES).to_numpy(dtype=bool)
    return present & ~marked & as_number(column).isna().to_numpy(dtype=bool)


def as_text(column: pd.Series) -> pd.Series:
    """A column as text, "" where missing (a column of numbers or of nothing can hold names too)."""
    return column.astype("str").fillna("")


def line_after_header(table: Table) -> list[str]:
    """The fields of the line that follows the header (the raw page's units row)."""
    with _gzip_errors(), open_profile(table.path) as handle:
        handle.seek(table.offset)
        handle.readline()
        return _line_fields(handle.readline().decode("utf-8", errors="replace"))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
