"""What a ``--data`` folder holds: TFRecord shards or an image-folder tree, and how many records and classes.

Framework-free (no TensorFlow, no torch): the command line validates folders with it before any worker starts,
and both pipelines find their files through it.

- TFRecords: ``train-NNNNN-of-NNNNN`` and ``validation-NNNNN-of-NNNNN`` in the folder (the converter's output).
  With only one of the two splits present, it serves for both training and evaluation.
- An image-folder tree (PyTorch only): ``<folder>/train/<class>/<image>`` with ``<folder>/val/<class>/<image>``
  (or ``validation/``) for evaluation, or ``<folder>/<class>/<image>``, which then serves for both.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainbench.data.record_kinds import RecordKindSpec, record_kind, unnamed_kind
from trainbench.data.record_schemas import RECORD_KINDS, RecordKind
from trainbench.data.shards import MANIFEST, SHARD_NAME
from trainbench.data.tfrecord_reader import count_records, parse_example, read_records
from trainbench.errors import UsageError, os_reason

TFRECORDS = "tfrecords"
IMAGE_FOLDER = "imagefolder"
TRAIN, VALIDATION = "train", "validation"
# torchvision's ImageFolder extensions: a tree is recognised by the files ImageFolder itself would load.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
_EVAL_FOLDERS = ("val", "validation")


@dataclass(frozen=True)
class DataSource:
    folder: Path
    kind: str  # TFRECORDS or IMAGE_FOLDER
    train: tuple[Path, ...]  # TFRecord shards, or the one root folder of an image-folder tree
    evaluation: tuple[Path, ...]

    @property
    def is_tfrecords(self) -> bool:
        """Whether the folder holds TFRecord shards (of any record kind, ``record_format``)."""
        return self.kind == TFRECORDS

    @property
    def is_image_folder(self) -> bool:
        """Whether the folder is an image-folder tree (ImageNet's images as files, PyTorch only)."""
        return self.kind == IMAGE_FOLDER


def _shards(folder: Path, split: str) -> tuple[Path, ...]:
    return tuple(sorted(path for path in folder.glob(f"{split}-*") if SHARD_NAME.fullmatch(path.name)))


def _has_images(folder: Path) -> bool:
    with _scandir(folder) as entries:
        return any(_is(entry.is_file) and entry.name.lower().endswith(IMAGE_EXTENSIONS) for entry in entries)


def _class_folders(root: Path) -> Iterator[os.DirEntry[str]]:
    with _scandir(root) as entries:
        yield from (entry for entry in entries if _is(entry.is_dir))


@contextlib.contextmanager
def _scandir(folder: Path) -> Iterator[Iterator[os.DirEntry[str]]]:
    try:
        entries = os.scandir(folder)
    except OSError as error:
        raise UsageError(f"{folder}: cannot be read ({os_reason(error)})") from None
    with entries:
        yield entries


def _is(test: Callable[[], bool]) -> bool:
    """``entry.is_file`` or ``entry.is_dir``; False for a symbolic link loop, which is neither."""
    try:
        return test()
    except OSError:
        return False


def _is_image_tree(root: Path) -> bool:
    """A folder with class subfolders, at least one of which holds an image (stops at the first one found)."""
    return root.is_dir() and any(_has_images(Path(entry.path)) for entry in _class_folders(root))


def open_source(path: str | Path) -> DataSource:
    """Describe a data folder; a missing folder or one holding no usable data is a UsageError naming it."""
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"data directory {path} does not exist or is not a folder")
    train, validation = _shards(folder, TRAIN), _shards(folder, VALIDATION)
    if train or validation:
        return DataSource(folder, TFRECORDS, train or validation, validation or train)
    root = folder / TRAIN if _is_image_tree(folder / TRAIN) else folder
    if not _is_image_tree(root):
        raise UsageError(f"data directory {path} holds neither TFRecord shards (train-*, validation-*) "
                         "nor an image-folder tree (<class>/<image>, optionally under train/ and val/)")
    evaluation = next((folder / name for name in _EVAL_FOLDERS if _is_image_tree(folder / name)), root)
    return DataSource(folder, IMAGE_FOLDER, (root,), (evaluation,))


def tfrecords_only(source: DataSource) -> DataSource:
    """TensorFlow's pipeline reads shards only: an image-folder tree is a UsageError saying what to do."""
    if not source.is_tfrecords:
        raise UsageError(f"{source.folder}: TensorFlow reads TFRecord shards only (train-*, validation-*); convert "
                         "the image folders with 'trainbench data convert', or use --framework torch")
    return source


# --- record counts and classes --------------------------------------------------------------------------------


def _manifest(folder: Path) -> dict[str, Any]:
    """The converter's manifest.json: {"num_classes": N, ..., "shards": {name: {"records": n, "bytes": size}}}."""
    try:
        raw = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def manifest_counts(folder: Path) -> dict[str, int]:
    """Records per shard file name as the manifest lists them ({} without a readable manifest).

    A shard whose size differs from the manifest's ``bytes`` is left out: the file is not the one listed.
    """
    shards = _manifest(folder).get("shards")
    counts = {}
    for name, entry in shards.items() if isinstance(shards, dict) else ():
        if not (isinstance(entry, dict) and isinstance(entry.get("records"), int)):
            continue
        path = folder / Path(name).name
        if "bytes" not in entry or (path.is_file() and path.stat().st_size == entry["bytes"]):
            counts[path.name] = entry["records"]
    return counts


def record_count(files: Iterable[Path]) -> int:
    """Records in these shards: from the folder's manifest where it lists a shard, else by reading the headers."""
    files = list(files)
    known = manifest_counts(files[0].parent) if files else {}
    return sum(known[path.name] if path.name in known else count_records(path) for path in files)


def count_examples(source: DataSource, train: bool) -> int:
    """Examples in the training (or evaluation) split: records of the shards, or image files of the tree."""
    paths = source.train if train else source.evaluation
    if source.is_tfrecords:
        return record_count(paths)
    return sum(1 for folder in _class_folders(paths[0]) for _, _, names in os.walk(folder.path, followlinks=True)
               for name in names if name.lower().endswith(IMAGE_EXTENSIONS))


def _max_label(files: Iterable[Path]) -> int:
    """The largest ``image/class/label`` in the shards (payload checksums are left to the training run)."""
    largest = 0
    for path in files:
        for payload in read_records(path, verify=False):
            try:
                labels = parse_example(payload).get("image/class/label", [])
            except ValueError as error:
                raise UsageError(f"{path}: {error}") from None
            largest = max([largest, *(label for label in labels if isinstance(label, int))])
    return largest


def num_classes(source: DataSource) -> int:
    """Classes of a data set: the class folders of a tree; for TFRecords the manifest's count, else the largest
    label of the evaluation shards (labels run 1..N, 0 unused). Scanning reads those shards once."""
    if source.is_image_folder:
        return sum(1 for _ in _class_folders(source.train[0]))
    manifest = _manifest(source.folder)
    declared = manifest.get("num_classes", manifest.get("classes"))
    if isinstance(declared, list):
        declared = len(declared)
    if isinstance(declared, int) and declared > 0:
        return declared
    return _max_label(source.evaluation)


# --- what the records are -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordFormat:
    """The kind of a TFRecord folder's records and the settings a reader needs (``record_schemas``)."""

    kind: RecordKind
    settings: dict[str, int]  # seq_len, max_predictions_per_seq, block_len, vocab_size, ... (kind-specific)

    @property
    def spec(self) -> RecordKindSpec:
        """The kind's facts (``record_kinds``)."""
        return record_kind(self.kind)


def record_format(source: DataSource) -> RecordFormat:
    """The folder's record kind from its manifest (``"kind"`` and ``"settings"``, written by every converter); a
    folder without them (the first manifest format, or no manifest) holds ImageNet records, as an image tree does."""
    manifest = _manifest(source.folder) if source.is_tfrecords else {}
    kind = manifest.get("kind", unnamed_kind().name)
    if kind not in RECORD_KINDS:
        raise UsageError(f"{source.folder / MANIFEST}: unknown record kind {kind!r} (known: {', '.join(RECORD_KINDS)})")
    settings = manifest.get("settings", {})
    if not (isinstance(settings, dict) and all(isinstance(value, int) for value in settings.values())):
        raise UsageError(f"{source.folder / MANIFEST}: 'settings' must map names to whole numbers")
    return RecordFormat(kind, settings)
