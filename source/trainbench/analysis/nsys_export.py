"""Nsight Systems SQLite exports (``nsys export --type sqlite``) of any release, read into pandas DataFrames.

The loader under :mod:`trainbench.analysis.timeline`: it tells an export from other files and returns rows; the
interval arithmetic lives in the analysis module.

What differs between releases (seen in public exports from 2021 to nsys 2025.3): nsys creates a table only when
there was such activity, so a missing optional table means "none of it"; columns were added over the years
(``greenContextId``, ``mangledName``, ``copyCount``, NVTX ``jsonText``); the metadata table is ``EXPORT_META_DATA``
(2022), ``META_DATA_EXPORT`` (2025) or absent, the GPU table ``TARGET_INFO_CUDA_GPU`` (2021) or ``TARGET_INFO_GPU``;
NVTX names are inline (``text``) or ids into ``StringIds.value`` (``textId``). Each reader builds its query from the
columns this export has; a needed table that lacks a column the analysis cannot do without is refused
(:class:`ExportError`, one line naming the table and the column). So is a row no profiler writes (an interval that
ends before it starts, a time that is missing or not a whole number of ns): one line naming the table and the row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.errors import UsageError, os_reason

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
STRINGS_TABLE = "StringIds"
METADATA_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # newest name first
GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")

SQLITE_MAGIC = b"SQLite format 3\x00"
REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of .nsys-rep and .qdrep reports
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_HINT = "expected `nsys export --type sqlite` output"

# NVTX eventType values of ranges: 59 push/pop, 60 start/end (34, a mark, has no duration).
NVTX_RANGE_TYPES = (59, 60)
# globalPid/globalTid keep the process in the bits above the low 24 (the thread id); dividing drops the thread.
PROCESS_DIVISOR = 0x1000000
# Kernel name columns, ids into StringIds, best first: the short name of old releases can be cut to "...".
KERNEL_NAME_COLUMNS = ("demangledName", "shortName", "mangledName")


class ExportError(UsageError):
    """An export that lacks what the analysis needs; the message names what is missing, the caller adds the file."""


# --- is it an export? ---------------------------------------------------------------------------------------

def is_report(path: str | Path) -> bool:
    """Whether ``path`` is an Nsight Systems report (to export first) rather than its SQLite export."""
    file = Path(path)
    if file.suffix in REPORT_SUFFIXES:
        return True
    try:
        with open(file, "rb") as handle:
            return handle.read(len(REPORT_MAGIC)) == REPORT_MAGIC
    except OSError:
        return False


def _truncation(header: bytes, size: int) -> str | None:
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size  # the header's way of writing 64 KiB
    # The header's page count is valid only when its "version valid for" equals the change counter.
    pages = int.from_bytes(header[28:32], "big") if header[92:96] == header[24:28] else 0
    if size < pages * page_size:
        return f"truncated: {size:,} of the {pages * page_size:,} bytes its SQLite header promises"
    if page_size < 512 or size % page_size:
        return f"truncated: {size:,} bytes, not a whole number of {page_size:,}-byte pages"
    return None


def _header_problem(file: Path) -> str | None:
    """What the first bytes say is wrong with the file as an export, or None."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as handle:
            header = handle.read(100)
    except OSError as error:
        return f"cannot read: {os_reason(error)}"
    if size == 0:
        return f"empty file; {EXPORT_HINT}"
    if header.startswith(REPORT_MAGIC):
        return "an Nsight Systems report, not its SQLite export; run `nsys export --type sqlite` on it"
    if not header.startswith(SQLITE_MAGIC):
        return f"not an SQLite database; {EXPORT_HINT}"
    if len(header) < 100:
        return f"truncated: {size} bytes, shorter than an SQLite header"
    return _truncation(header, size)


def unreadable(error: sqlite3.DatabaseError) -> str:
    return f"unreadable SQLite ({error}): a truncated or damaged export?"


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _content_problem(conn: sqlite3.Connection) -> str | None:
    tables = table_names(conn)
    if KERNEL_TABLE not in tables:
        if STRINGS_TABLE not in tables:
            return f"an SQLite database but not an Nsight Systems export (no {STRINGS_TABLE}, no {KERNEL_TABLE})"
        return f"no {KERNEL_TABLE} table; was the run profiled with CUDA tracing (nsys -t cuda)?"
    if conn.execute(f"SELECT 1 FROM {KERNEL_TABLE} LIMIT 1").fetchone() is None:
        return f"{KERNEL_TABLE} is empty: the capture holds no kernel"
    return None


def open_export(path: str | Path) -> sqlite3.Connection:
    """Read-only connection to an nsys SQLite export that holds kernels; :class:`UsageError` naming the file when it
    is missing, not SQLite, a report rather than its export, truncated, damaged, or an export without kernels."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: {'not a file' if file.exists() else 'no such file'}")
    problem = _header_problem(file)
    if problem:
        raise UsageError(f"{path}: {problem}")
    # A URI so that mode=ro holds: opening must never create or modify the export.
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        problem = _content_problem(conn)
    except sqlite3.DatabaseError as error:  # a damaged page that the header check could not see
        problem = unreadable(error)
    if problem:
        conn.close()
        raise UsageError(f"{path}: {problem}")
    return conn


@contextmanager
def reading(path: str | Path) -> Iterator[sqlite3.Connection]:
    """:func:`open_export` for a ``with``: closed at the end, and what goes wrong while reading (a refused table, a
    page a damaged file lacks) becomes one :class:`UsageError` naming the file."""
    conn = open_export(path)
    try:
        yield conn
    except ExportError as error:
        raise UsageError(f"{path}: {error}") from None
    except sqlite3.DatabaseError as error:
        raise UsageError(f"{path}: {unreadable(error)}") from None
    finally:
        conn.close()


# --- columns ------------------------------------------------------------------------------------------------

def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table``; empty when there is no such table."""
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


def _require(table: str, present: set[str], needed: tuple[str, ...]) -> None:
    missing = [name for name in needed if name not in present]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise ExportError(f"{table} has no {', '.join(missing)} column{plural} (an Nsight Systems release this "
                          "suite does not know?)")


def _require_strings(conn: sqlite3.Connection, user: str) -> None:
    if not columns(conn, STRINGS_TABLE) >= {"id", "value"}:
        raise ExportError(f"no {STRINGS_TABLE} table with id and value columns, which {user} refers to")


def _or_default(present: set[str], column: str, default: int, alias: str = "k") -> str:
    """The column when this export has it (NULLs as the default), else the default: older releases lack some."""
    return f'COALESCE({alias}."{column}", {default})' if column in present else str(default)


def _frame(conn: sqlite3.Connection, sql: str, dtypes: dict[str, str], params: tuple = ()) -> pd.DataFrame:
    # Explicit dtypes: an empty result would otherwise come back as object columns.
    rows = conn.execute(sql, params).fetchall()
    return pd.DataFrame.from_records(rows, columns=list(dtypes)).astype(dtypes)


def _empty(dtypes: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in dtypes.items()})


# --- impossible rows ----------------------------------------------------------------------------------------

def _described(start: Any, end: Any, open_end: bool) -> str:
    """What is wrong with one row's interval (the query found something)."""
    for name, value in (("start", start), ("end", end)):
        if value is None and not (name == "end" and open_end):
            return f"{name} is missing (NULL)"
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return f"{name} is {value!r}, not a whole number of ns"
    return f"end {end} is before start {start}"


def _impossible_query(table: str, where: str, open_end: bool, rowid: bool) -> str:
    end_missing = "" if open_end else 'OR "end" IS NULL '
    bad = (f"(start IS NULL {end_missing}OR typeof(start) != 'integer' "
           f"""OR ("end" IS NOT NULL AND (typeof("end") != 'integer' OR "end" < start)))""")
    key = "rowid" if rowid else "NULL"
    return (f'SELECT {key}, start, "end", COUNT(*) OVER () FROM {table} WHERE {bad}{where} '
            f"ORDER BY {key} LIMIT 1")


def check_intervals(conn: sqlite3.Connection, table: str, where: str = "", open_end: bool = False) -> None:
    """:class:`ExportError` naming the first row of ``table`` (by rowid) whose interval no profiler records: start
    or end missing or not a whole number, or an end before the start. ``where``: an SQL condition (``AND ...``)
    narrowing the rows checked; ``open_end``: a missing end means a range left open, not a fault."""
    try:
        row = conn.execute(_impossible_query(table, where, open_end, rowid=True)).fetchone()
    except sqlite3.OperationalError:  # a table WITHOUT ROWID: name the row by its values alone
        row = conn.execute(_impossible_query(table, where, open_end, rowid=False)).fetchone()
    if row is None:
        return
    rowid, start, end, count = row
    which = f"rowid {rowid}" if rowid is not None else f"the row starting at {start!r}"
    more = f" ({count - 1} more such row{'s' if count > 2 else ''})" if count > 1 else ""
    raise ExportError(f"{table} {which}: {_described(start, end, open_end)}{more}; no profiler writes such a row, "
                      "so the export is damaged or was edited")


# --- tables -------------------------------------------------------------------------------------------------

KERNEL_DTYPES = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64", "name": "object",
                 "correlation": "int64", "process": "int64"}


def _kernel_sql(conn: sqlite3.Connection) -> str:
    present = columns(conn, KERNEL_TABLE)
    _require(KERNEL_TABLE, present, ("start", "end"))
    # Two name columns at most: the third (mangledName) is only reached when both others are missing.
    names = [name for name in KERNEL_NAME_COLUMNS if name in present][:2]
    if not names:
        raise ExportError(f"{KERNEL_TABLE} has none of the name columns {', '.join(KERNEL_NAME_COLUMNS)}")
    _require_strings(conn, f"{KERNEL_TABLE}.{names[0]}")
    joins = " ".join(f'LEFT JOIN {STRINGS_TABLE} AS n{i} ON n{i}.id = k."{name}"' for i, name in enumerate(names))
    name_values = ", ".join(f"n{i}.value" for i in range(len(names)))
    process = f"COALESCE(k.globalPid, 0) / {PROCESS_DIVISOR}" if "globalPid" in present else "0"
    return (f'SELECT k.start, k."end", {_or_default(present, "deviceId", 0)}, {_or_default(present, "streamId", 0)}, '
            f"COALESCE({name_values}, '<unnamed>'), {_or_default(present, 'correlationId', -1)}, {process} "
            f"FROM {KERNEL_TABLE} AS k {joins} ORDER BY k.start")


def kernel_rows(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row per kernel, by start: start, end, device, stream, name (demangled, else short), correlation and
    process (to find the launching call). Columns an older release lacks take neutral values: device and stream 0,
    correlation -1, process 0. :class:`ExportError` for an impossible row (:func:`check_intervals`)."""
    sql = _kernel_sql(conn)
    check_intervals(conn, KERNEL_TABLE)
    return _frame(conn, sql, KERNEL_DTYPES)


MEMORY_DTYPES = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64", "bytes": "int64"}


def memory_rows(conn: sqlite3.Connection, table: str) -> pd.DataFrame:
    """Rows of a memcpy or memset table: start, end, device, stream, bytes; none when the export has no such table."""
    present = columns(conn, table)
    if not present:
        return _empty(MEMORY_DTYPES)
    _require(table, present, ("start", "end", "bytes"))
    check_intervals(conn, table)
    device, stream = _or_default(present, "deviceId", 0, "m"), _or_default(present, "streamId", 0, "m")
    sql = f'SELECT m.start, m."end", {device}, {stream}, m.bytes FROM {table} AS m'
    return _frame(conn, sql, MEMORY_DTYPES)


NVTX_DTYPES = {"start": "int64", "end": "int64", "name": "object"}


def _nvtx_name(conn: sqlite3.Connection, present: set[str]) -> tuple[str, str]:
    """(SQL expression of a range's name, the join it needs): inline ``text`` first, else ``textId``'s string."""
    parts, join = [], ""
    if "text" in present:
        parts.append("NULLIF(n.text, '')")
    if "textId" in present:
        _require_strings(conn, f"{NVTX_TABLE}.textId")
        parts.append("s.value")
        join = f"LEFT JOIN {STRINGS_TABLE} AS s ON s.id = n.textId"
    if not parts:
        raise ExportError(f"{NVTX_TABLE} has neither a text nor a textId column to name its ranges")
    return (f"COALESCE({', '.join(parts)})" if len(parts) > 1 else parts[0]), join


def _like_escaped(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def nvtx_ranges(conn: sqlite3.Connection, name_prefix: str = "") -> pd.DataFrame:
    """Closed NVTX ranges (push/pop and start/end; ranges left open at the end of the capture are dropped), by
    start: start, end, name. ``name_prefix`` only narrows the query (SQL's LIKE ignores ASCII case): callers match
    the names exactly themselves. None without an NVTX_EVENTS table; :class:`ExportError` for a range that ends
    before it starts."""
    present = columns(conn, NVTX_TABLE)
    if not present:
        return _empty(NVTX_DTYPES)
    _require(NVTX_TABLE, present, ("start", "end", "eventType"))
    check_intervals(conn, NVTX_TABLE, f" AND eventType IN {NVTX_RANGE_TYPES}", open_end=True)
    name, join = _nvtx_name(conn, present)
    sql = (f'SELECT n.start, n."end", {name} FROM {NVTX_TABLE} AS n {join} '
           f'WHERE n.eventType IN {NVTX_RANGE_TYPES} AND n."end" >= n.start AND {name} IS NOT NULL')
    params: tuple = ()
    if name_prefix:
        sql += f" AND {name} LIKE ? ESCAPE '\\'"
        params = (_like_escaped(name_prefix) + "%",)
    return _frame(conn, sql + " ORDER BY n.start", NVTX_DTYPES, params)


LAUNCH_DTYPES = {"process": "int64", "correlation": "int64", "launch": "int64"}


def launch_rows(conn: sqlite3.Connection) -> pd.DataFrame | None:
    """CPU start of the runtime calls by (process, correlation): process, correlation, launch. None when the export
    has nothing to join kernels to (no runtime table, or one without correlationId or globalTid)."""
    if not columns(conn, RUNTIME_TABLE) >= {"start", "correlationId", "globalTid"}:
        return None
    # correlationId is unique only within a process, hence the process in the key; MIN guards against repeats.
    sql = (f"SELECT globalTid / {PROCESS_DIVISOR}, correlationId, MIN(start) FROM {RUNTIME_TABLE} "
           "WHERE globalTid IS NOT NULL AND correlationId IS NOT NULL GROUP BY 1, 2")
    return _frame(conn, sql, LAUNCH_DTYPES)


# --- what the export says about itself ----------------------------------------------------------------------

EXTENT_TABLES = (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, RUNTIME_TABLE, NVTX_TABLE)


def recorded_extent(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """From the first start to the last end of anything the export recorded (GPU activity, runtime calls, NVTX
    events), in ns: outside it the capture saw nothing, so no busy time can be measured there. None when empty."""
    starts, ends = [], []
    for table in EXTENT_TABLES:
        if not columns(conn, table) >= {"start", "end"}:
            continue
        sql = (f"""SELECT MIN(start), MAX(COALESCE("end", start)) FROM {table} """
               f"""WHERE typeof(start) = 'integer' AND typeof(COALESCE("end", start)) = 'integer'""")
        first, last = conn.execute(sql).fetchone()
        if first is not None:
            starts.append(first)
            ends.append(last)
    return (min(starts), max(ends)) if starts else None


def _nsys_version(conn: sqlite3.Connection) -> str | None:
    for table in METADATA_TABLES:
        if columns(conn, table) >= {"name", "value"}:
            row = conn.execute(f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION'").fetchone()
            return str(row[0]) if row else None
    return None


def _gpu_names(conn: sqlite3.Connection, devices: set[int]) -> list[str]:
    """Names of the GPUs that ran kernels (all listed GPUs when the ids do not tell), each once."""
    for table in GPU_TABLES:
        present = columns(conn, table)
        if "name" not in present:
            continue
        key = next((column for column in ("id", "deviceId") if column in present), None)
        rows = conn.execute(f'SELECT {key or "NULL"}, name FROM {table}').fetchall()
        used = [name for device, name in rows if device in devices] or [name for _, name in rows]
        return list(dict.fromkeys(str(name).strip() for name in used))
    return []


def export_info(conn: sqlite3.Connection, devices: set[int]) -> dict[str, Any]:
    """The Nsight Systems release that exported the file (None where the export does not say: before 2022) and the
    names of the GPUs in ``devices``."""
    return {"nsys_version": _nsys_version(conn), "gpus": _gpu_names(conn, devices)}
