"""Run folders and the files in them, for every layer: fresh folders that are never reused, files replaced
atomically, per-batch-size file names.

- ``create_fresh_dir``: ``root/name``, or ``name-1``, ``-2``... when taken; ``mkdir`` is atomic, so two commands
  started together never share a folder and no earlier result is ever overwritten.
- ``write_text_atomic``: a new file under a name unique to this writer (process id and random part), renamed over
  the old one: never half-written, and never a temporary name two processes share. A full disk is one line.
- ``write_json_atomic`` stamps the results model's format version into every JSON object it writes.

The names of run files and folders are ``results.layout``'s, imported from there only.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainbench.errors import UsageError, os_reason
from trainbench.results.csv_cells import neutral_rows
from trainbench.results.records import stamped

_TEMPORARY = ".tmp"


def create_fresh_dir(root: Path, name: str) -> Path:
    """Make ``root/name``, or ``root/name-1``, ``-2``... when taken; an existing folder is never reused.

    Every command makes its output folder here: a root that cannot hold it (a file, a path through a file, a
    read-only mount, no permission) is a UsageError naming the root and the reason, before anything is written."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: not a folder, cannot make a run folder in it")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            path = root / (name if attempt == 0 else f"{name}-{attempt}")
            try:
                path.mkdir()  # atomic: fails if someone else has the name
            except FileExistsError:
                continue
            return path
    except OSError as error:
        raise UsageError(f"{root}: cannot make a run folder in it: {os_reason(error)}") from None
    raise UsageError(f"{root}: {name} and its 999 numbered variants are all taken; choose another output folder")


def create_run_dir(root: Path, label: str) -> Path:
    """Make ``root/<UTC time>_<label>`` (with a numeric suffix when taken)."""
    return create_fresh_dir(root, f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}_{label}")


def rank_file(path: Path, rank: int) -> Path:
    """One process's own copy of a per-batch file when several measure together: ``batch_<X>.rank<R><suffix>``."""
    head, dot, rest = path.name.partition(".")
    return path.with_name(f"{head}.rank{rank}{dot}{rest}")


def rank_files(path: Path) -> list[Path]:
    """Every ``rank_file`` of ``path`` there is, by rank."""
    head, dot, rest = path.name.partition(".")
    found = [(int(match[1]), candidate) for candidate in path.parent.glob(f"{head}.rank*{dot}{rest}")
             if (match := re.fullmatch(rf"{re.escape(head)}\.rank(\d+){re.escape(dot + rest)}", candidate.name))]
    return [candidate for _, candidate in sorted(found)]


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, LF line ends) by rename; an OSError (a full disk) is a UsageError."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{_TEMPORARY}")
    try:
        with open(temporary, "x", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write ({os_reason(error)})") from None


def temporary_files(path: Path) -> list[Path]:
    """The temporary files ``write_text_atomic`` left for ``path`` when its process was killed."""
    return list(path.parent.glob(f".{path.name}.*{_TEMPORARY}"))


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON; an object gets the results model's ``"format"`` version first."""
    if isinstance(data, dict):
        data = stamped(data)
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_csv_atomic(path: Path, fields: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(neutral_rows(rows))
    write_text_atomic(path, text.getvalue())


def append_csv(path: Path, fields: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Rows added at the end and flushed to disk (a crash loses none that were appended); the header when new."""
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(neutral_rows(rows))
        out.flush()
        os.fsync(out.fileno())


def append_json_line(path: Path, row: dict[str, Any]) -> None:
    """One JSON line (with the format version) added and flushed to disk: a crash loses at most the line in progress."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(stamped(row), sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
