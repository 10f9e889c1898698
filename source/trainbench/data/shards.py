"""The shard plan and the manifest that lets an interrupted conversion resume.

The plan fixes each shard's content before any work starts: the training and validation orders are shuffled with a
fixed seed and cut into contiguous, nearly equal ranges, so the output is the same whatever the number of worker
processes and whatever order they finish in. The manifest (``manifest.json``, rewritten atomically after every
shard) lists each finished shard's record count, size and sha256 with a fingerprint of the plan; a rerun of the
same plan keeps the shards it lists whose file still has that size and sha256 (the others are redone, with the
reason), a different plan is refused rather than mixed with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainbench.data.imagenet_tree import ImageTree
from trainbench.errors import UsageError, os_reason
from trainbench.results.files import write_text_atomic

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "trainbench-tfrecords/1"  # ImageNet's, which names no kind
KIND_MANIFEST_FORMAT = "trainbench-tfrecords/2"  # the first format plus "kind" and "settings" (record_schemas)
TRAIN, VALIDATION = "train", "validation"
SHARD_NAME = re.compile(r"(train|validation)-(\d{5})-of-(\d{5})")  # temporary and hidden files never match
_ENTRY_TYPES = {"split": str, "records": int, "bytes": int, "sha256": str, "converted": int, "skipped": list}
_HASH_THREADS = min(8, os.cpu_count() or 1)  # hashlib releases the GIL: threads read and hash shards in parallel


@dataclass(frozen=True)
class ShardTask:
    name: str
    split: str  # TRAIN or VALIDATION
    sources: tuple[Any, ...]  # what the shard is made of: ImageNet's Sources, a corpus's documents, COCO's images


@dataclass(frozen=True)
class ShardResult:
    name: str
    split: str
    records: int
    bytes: int
    sha256: str
    reencoded: int  # odd files re-encoded as RGB JPEG (the manifest's "converted", its name in the file)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}"


def plan_shards(tree: ImageTree, train_shards: int, validation_shards: int, seed: int) -> list[ShardTask]:
    """Training shards then validation shards (none without val/), each a contiguous range of the shuffled order."""
    return [*plan_split(TRAIN, tree.train, train_shards, seed),
            *plan_split(VALIDATION, tree.validation, validation_shards, seed)]


def plan_split(split: str, items: Sequence[Any], count: int, seed: int) -> list[ShardTask]:
    """``count`` shards of one split, each a contiguous range of the items shuffled with ``seed`` (none for no
    items): what every converter's plan is made of, so its shards do not depend on the worker count."""
    if not items:
        return []
    order = list(items)
    random.Random(seed).shuffle(order)  # a fresh generator per split: each order depends on the seed alone
    bounds = [index * len(order) // count for index in range(count + 1)]
    return [ShardTask(shard_name(split, index, count), split, tuple(order[bounds[index]:bounds[index + 1]]))
            for index in range(count)]


def fingerprint(tasks: Sequence[ShardTask], texts: dict[str, str]) -> str:
    """sha256 of everything that decides the shards' bytes: names, sources (path, size, label, box file), texts."""
    digest = hashlib.sha256(json.dumps(sorted(texts.items())).encode())
    for task in tasks:
        digest.update(f"{task.name}\n".encode())
        for source in task.sources:  # a non-UTF-8 file name is hashed as the bytes it is (surrogate escapes)
            line = f"{source.path}\t{source.size}\t{source.label}\t{source.annotation}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def shard_files(folder: Path) -> list[Path]:
    """The shard files in a folder, sorted by name."""
    return sorted(path for path in folder.iterdir() if SHARD_NAME.fullmatch(path.name))


class Manifest:
    """The finished shards of one plan in one output folder."""

    def __init__(self, folder: Path, header: dict[str, Any], shards: dict[str, dict[str, Any]],
                 redone: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.header = header  # format, fingerprint, num_classes, synsets, seed, shard counts
        self.shards = shards
        self.redone = redone or {}  # listed shards that must be written again, with the reason

    @classmethod
    def open(cls, folder: Path, header: dict[str, Any], planned: Iterable[str], overwrite: bool) -> Manifest:
        """Resume the folder's manifest when it is of the same plan; refuse to mix plans unless ``overwrite``."""
        planned = set(planned)
        previous = load_manifest(folder)
        if previous is not None and previous.get("fingerprint") == header["fingerprint"]:
            listed = previous.get("shards")
            listed = {name: entry for name, entry in listed.items() if name in planned} \
                if isinstance(listed, dict) else {}
            return cls(folder, header, *_still_finished(folder, listed))
        existing = shard_files(folder)
        if (previous is not None or existing) and not overwrite:
            what = "a manifest of another conversion" if previous is not None else f"{len(existing)} shards"
            raise UsageError(f"{folder}: holds {what} (other input, shard counts or options); they are kept: pass "
                             "--overwrite to replace them, or choose another --output folder")
        for path in existing:
            if path.name not in planned:  # --overwrite: shards of the old plan that the new one will not rewrite
                path.unlink()
        manifest = cls(folder, header, {})
        manifest.save()
        return manifest

    def record(self, result: ShardResult) -> None:
        # The manifest's key for the re-encoded count is "converted", since its first format; the order is kept.
        entry = {("converted" if key == "reencoded" else key): value for key, value in asdict(result).items()}
        del entry["name"]
        self.shards[result.name] = entry
        self.save()

    def save(self) -> None:
        content = {**self.header, "shards": dict(sorted(self.shards.items()))}
        write_text_atomic(self.folder / MANIFEST, json.dumps(content, indent=2) + "\n")


def load_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest's content; None when there is none; an unreadable one counts as another conversion's."""
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def _still_finished(folder: Path, listed: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The listed shards whose file still has the listed size and sha256, and why each other one is redone.

    Every kept shard is read once: a shard altered after it was written (a bad disk, a copy, an edit) is written
    again instead of being kept.
    """
    problems = _in_threads(lambda item: _changed(folder / item[0], item[1]), list(listed.items()))
    finished = {name: entry for (name, entry), problem in zip(listed.items(), problems, strict=True) if not problem}
    redone = {name: problem for name, problem in zip(listed, problems, strict=True) if problem}
    return finished, redone


def _changed(path: Path, entry: Any) -> str | None:
    """Why a listed shard cannot be kept; None when its file is the one listed."""
    if not (isinstance(entry, dict) and all(isinstance(entry.get(key), kind) for key, kind in _ENTRY_TYPES.items())):
        return "its manifest entry is incomplete"
    try:
        size = path.stat().st_size
        if size != entry["bytes"]:
            return f"{size} bytes, the manifest lists {entry['bytes']}"
        with open(path, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"cannot be read ({os_reason(error)})"
    return None if digest == entry["sha256"] else "content differs from the manifest's sha256"


def _in_threads(function: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``function`` over ``items`` on a few threads; on Ctrl-C the items not started are dropped."""
    executor = ThreadPoolExecutor(_HASH_THREADS)
    try:
        return list(executor.map(function, items))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
