"""The shard plan and the manifest that lets an interrupted conversion resume.

The plan fixes each shard's content before any work starts: the training and validation orders are shuffled with a
fixed seed and cut into contiguous, nearly equal ranges, so the output is the same whatever the number of worker
processes and whatever order they finish in. The manifest (``manifest.json``, rewritten atomically after every
shard) lists each finished shard's record count, size and sha256 with a fingerprint of the plan; a rerun of the
same plan skips the shards it lists, a different plan is refused rather than mixed with them.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainbench.bench.store import write_json_atomic
from trainbench.data.imagenet_tree import ImageTree, Source
from trainbench.errors import UsageError

MANIFEST = "manifest.json"
FORMAT = "trainbench-tfrecords/1"
TRAIN, VALIDATION = "train", "validation"
SHARD_NAME = re.compile(r"(train|validation)-(\d{5})-of-(\d{5})")  # temporary and hidden files never match
MAX_SHARDS = 99_999  # five digits in the names


@dataclass(frozen=True)
class ShardTask:
    name: str
    split: str  # TRAIN or VALIDATION
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class ShardResult:
    name: str
    split: str
    records: int
    bytes: int
    sha256: str
    converted: int  # odd files re-encoded as RGB JPEG
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}"


def plan_shards(tree: ImageTree, train_shards: int, validation_shards: int, seed: int) -> list[ShardTask]:
    """Training shards then validation shards (none without val/), each a contiguous range of the shuffled order."""
    tasks = []
    for split, sources, count in ((TRAIN, tree.train, train_shards), (VALIDATION, tree.validation, validation_shards)):
        if not sources:
            continue
        order = list(sources)
        random.Random(seed).shuffle(order)  # a fresh generator per split: each order depends on the seed alone
        bounds = [index * len(order) // count for index in range(count + 1)]
        tasks += [ShardTask(shard_name(split, index, count), split, tuple(order[bounds[index]:bounds[index + 1]]))
                  for index in range(count)]
    return tasks


def fingerprint(tasks: Sequence[ShardTask], texts: dict[str, str]) -> str:
    """sha256 of everything that decides the shards' bytes: names, sources (path, size, label, box file), texts."""
    digest = hashlib.sha256(json.dumps(sorted(texts.items())).encode())
    for task in tasks:
        digest.update(f"{task.name}\n".encode())
        for source in task.sources:
            digest.update(f"{source.path}\t{source.size}\t{source.label}\t{source.annotation}\n".encode())
    return digest.hexdigest()


def shard_files(folder: Path) -> list[Path]:
    """The shard files in a folder, sorted by name."""
    return sorted(path for path in folder.iterdir() if SHARD_NAME.fullmatch(path.name))


class Manifest:
    """The finished shards of one plan in one output folder."""

    def __init__(self, folder: Path, header: dict[str, Any], shards: dict[str, dict[str, Any]]) -> None:
        self.folder = folder
        self.header = header  # format, fingerprint, num_classes, synsets, seed, shard counts
        self.shards = shards

    @classmethod
    def open(cls, folder: Path, header: dict[str, Any], planned: Iterable[str], overwrite: bool) -> Manifest:
        """Resume the folder's manifest when it is of the same plan; refuse to mix plans unless ``overwrite``."""
        previous = load_manifest(folder)
        if previous is not None and previous.get("fingerprint") == header["fingerprint"]:
            return cls(folder, header, _finished(folder, previous.get("shards", {})))
        existing = shard_files(folder)
        if (previous is not None or existing) and not overwrite:
            what = "a manifest of another conversion" if previous is not None else f"{len(existing)} shards"
            raise UsageError(f"{folder}: holds {what} (other input, shard counts or options); they are kept: pass "
                             "--overwrite to replace them, or choose another --output folder")
        planned = set(planned)
        for path in existing:
            if path.name not in planned:  # --overwrite: shards of the old plan that the new one will not rewrite
                path.unlink()
        manifest = cls(folder, header, {})
        manifest.save()
        return manifest

    def record(self, result: ShardResult) -> None:
        entry = asdict(result)
        del entry["name"]
        self.shards[result.name] = entry
        self.save()

    def save(self) -> None:
        write_json_atomic(self.folder / MANIFEST, {**self.header, "shards": dict(sorted(self.shards.items()))})


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


def _finished(folder: Path, shards: Any) -> dict[str, dict[str, Any]]:
    # A listed shard counts only while its file is there at the listed size (a power cut may lose the data of a
    # renamed file); the full check of its bytes is 'trainbench data verify'.
    if not isinstance(shards, dict):
        return {}
    return {name: entry for name, entry in shards.items()
            if isinstance(entry, dict) and _size(folder / name) == entry.get("bytes")}


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
