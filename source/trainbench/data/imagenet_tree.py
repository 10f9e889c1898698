"""The ImageNet folder layout: ``train/<synset>/*``, ``val/<synset>/*`` and the optional ``Annotation/`` XML.

Labels are 1..N in sorted order of the training synsets (0 unused), as the original converter numbers them.
Every regular file of a synset folder is a candidate image, whatever its name: the converter decides by content.
A layout that cannot give a correct data set (no train/, an empty synset folder, an unsorted val/, two class
folders that are one folder through a symbolic link) is a UsageError naming the folder, raised before anything is
written. Entries that are neither a synset folder nor a file in one (a file loose in train/, a folder inside a
synset folder, a dangling symbolic link or a loop, a pipe) are listed in ``ImageTree.skipped`` with the reason,
never dropped in silence. File names are taken as the bytes they are (non-UTF-8 ones as surrogate escapes).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainbench.errors import UsageError, os_reason

TRAIN, VAL, ANNOTATION = "train", "val", "Annotation"
_FILE, _FOLDER = "file", "folder"  # what _kind returns for usable entries; anything else is a reason to skip
Skipped = tuple[str, str]  # (path relative to the data folder, reason)


@dataclass(frozen=True)
class Source:
    path: str  # relative to the data folder, with '/'
    size: int
    synset: str
    label: int
    annotation: str | None  # relative path of its bounding-box XML


@dataclass(frozen=True)
class ImageTree:
    root: Path
    synsets: tuple[str, ...]
    train: tuple[Source, ...]
    validation: tuple[Source, ...]  # empty when there is no val/
    skipped: tuple[Skipped, ...] = ()  # entries that are neither synset folders nor files in one


def scan_tree(root: Path) -> ImageTree:
    """Every image file of the tree, with its label and annotation; UsageError for an unusable layout."""
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (expected an ImageNet folder with train/ and val/)")
    skipped: list[Skipped] = []
    train_folders = _synset_folders(root, TRAIN, skipped, required=True)
    synsets = tuple(entry.name for entry in train_folders)
    labels = {synset: label for label, synset in enumerate(synsets, start=1)}
    annotations = _annotation_index(root / ANNOTATION)
    val_folders = []
    if _has_val(root):
        val_folders = _synset_folders(root, VAL, skipped, required=False)
        _check_val(root / VAL, val_folders, labels)
    _refuse_shared_folders(train_folders + val_folders)
    train = _sources(root, TRAIN, train_folders, labels, annotations, skipped)
    validation = _sources(root, VAL, val_folders, labels, annotations, skipped) if val_folders else ()
    return ImageTree(root, synsets, train, validation, tuple(skipped))


def _has_val(root: Path) -> bool:
    val = root / VAL
    if os.path.lexists(val) and not val.is_dir():  # a dangling link or a loop: not "no validation set"
        raise UsageError(f"{val}: not a folder ({_kind_of_path(val)})")
    return val.is_dir()


def _kind_of_path(path: Path) -> str:
    try:
        path.stat()
    except OSError as error:
        return _reason(error)
    return "a file"


def _kind(entry: os.DirEntry[str]) -> str:
    """_FILE, _FOLDER, or why the entry is neither (the reason listed in skipped.csv)."""
    try:
        if entry.is_file():
            return _FILE
        if entry.is_dir():
            return _FOLDER
    except OSError as error:
        return _reason(error)
    if entry.is_symlink():
        return "dangling symbolic link (its target does not exist)"
    return "not a regular file (a device, pipe or socket)"


def _reason(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symbolic link loop"
    if error.errno == errno.ENOENT:
        return "dangling symbolic link (its target does not exist)"
    return f"cannot be read ({os_reason(error)})"


def sorted_entries(folder: Path) -> list[os.DirEntry[str]]:
    """A folder's entries by name; a folder that cannot be read is one UsageError naming it."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError as error:
        raise UsageError(f"{folder}: cannot be read ({os_reason(error)})") from None


def _synset_folders(root: Path, split: str, skipped: list[Skipped], required: bool) -> list[os.DirEntry[str]]:
    """The synset folders of ``root/split``; its other entries go to ``skipped`` (loose val/ files are refused
    later, by _check_val)."""
    if not (root / split).is_dir():
        raise UsageError(f"{root / split}: missing (expected {split}/<synset>/<image files>, the ImageNet layout)")
    folders = []
    for entry in sorted_entries(root / split):
        kind = _kind(entry)
        if kind == _FOLDER and not entry.name.startswith("."):
            folders.append(entry)
        elif kind == _FOLDER:
            skipped.append((f"{split}/{entry.name}", "hidden folder: not a synset"))
        elif kind != _FILE or split == TRAIN or entry.name.startswith("."):
            skipped.append((f"{split}/{entry.name}", "not in a synset folder" if kind == _FILE else kind))
    if required and not folders:
        raise UsageError(f"{root / split}: no synset folders (expected {split}/<synset>/<image files>; "
                         "extract the per-synset archives first)")
    return folders


def _check_val(val: Path, folders: list[os.DirEntry[str]], labels: dict[str, int]) -> None:
    loose = sum(1 for entry in sorted_entries(val) if _kind(entry) == _FILE and not entry.name.startswith("."))
    if loose:
        raise UsageError(f"{val}: {loose} files are not in synset folders; sort them first with "
                         f"'trainbench data valprep {val} --solution LOC_val_solution.csv' (or --ground-truth)")
    unknown = [entry.name for entry in folders if entry.name not in labels]
    if unknown:
        raise UsageError(f"{val / unknown[0]}: synset {unknown[0]} has no folder in train/ "
                         f"({len(unknown)} such synset folders in val/)")


def _refuse_shared_folders(folders: list[os.DirEntry[str]]) -> None:
    """Two class folders that are one folder (one a symbolic link to the other) would convert its images twice:
    under two labels, or into training and validation both."""
    seen: dict[str, os.DirEntry[str]] = {}
    for entry in folders:
        other = seen.setdefault(os.path.realpath(entry.path), entry)
        if other is not entry:
            link, target = (other, entry) if other.is_symlink() else (entry, other)
            raise UsageError(f"{link.path}: the same folder as {target.path} (through a symbolic link): its images "
                             "would be converted twice, as two classes or as training and validation images; "
                             "remove the link, or make it a copy if that is meant")


def _sources(root: Path, split: str, folders: list[os.DirEntry[str]], labels: dict[str, int],
             annotations: frozenset[str], skipped: list[Skipped]) -> tuple[Source, ...]:
    sources = []
    for folder in folders:
        found = _class_files(split, folder, skipped)
        if not found:
            raise UsageError(f"{folder.path}: synset folder without files (an incomplete download? restore its "
                             "images or remove the folder, which renumbers the labels; files in its subfolders "
                             "are not searched)")
        sources += [Source(path, size, folder.name, labels[folder.name], _annotation_for(path, annotations))
                    for path, size in found]
    return tuple(sources)


def _class_files(split: str, folder: os.DirEntry[str], skipped: list[Skipped]) -> list[tuple[str, int]]:
    """(relative path, size) of each file of one synset folder; its other entries go to ``skipped``."""
    found = []
    for entry in sorted_entries(Path(folder.path)):
        path, kind = f"{split}/{folder.name}/{entry.name}", _kind(entry)
        if kind == _FOLDER:
            skipped.append((path, "folder inside a synset folder: not searched (images belong directly in "
                                  f"{split}/{folder.name}/)"))
            continue
        if kind != _FILE:
            skipped.append((path, kind))
            continue
        try:
            found.append((path, entry.stat().st_size))
        except OSError as error:  # gone or changed since the listing
            skipped.append((path, _reason(error)))
    return found


def _annotation_index(folder: Path) -> frozenset[str]:
    """Relative paths of every XML file under Annotation/ (one walk, instead of a lookup per image)."""
    found: set[str] = set()
    for directory, _, names in os.walk(folder):
        base = PurePosixPath(ANNOTATION, Path(directory).relative_to(folder).as_posix())
        found.update(str(base / name) for name in names if name.lower().endswith(".xml"))
    return frozenset(found)


def _annotation_for(path: str, annotations: frozenset[str]) -> str | None:
    # train boxes come as Annotation/<synset>/<stem>.xml, validation boxes as Annotation/val/<stem>.xml
    split, synset, name = path.split("/")
    stem = name.rsplit(".", 1)[0]
    candidates = (f"{ANNOTATION}/{synset}/{stem}.xml", f"{ANNOTATION}/{split}/{stem}.xml", f"{ANNOTATION}/{stem}.xml")
    return next((candidate for candidate in candidates if candidate in annotations), None)
