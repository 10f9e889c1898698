"""The ImageNet folder layout: ``train/<synset>/*``, ``val/<synset>/*`` and the optional ``Annotation/`` XML.

Labels are 1..N in sorted order of the training synsets (0 unused), as the original converter numbers them.
Every regular file of a synset folder is a candidate image, whatever its name: the converter decides by content.
A layout that cannot give a correct data set (no train/, an empty synset folder, an unsorted val/) is a
UsageError naming the folder, raised before anything is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainbench.errors import UsageError

TRAIN, VAL, ANNOTATION = "train", "val", "Annotation"


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


def scan_tree(root: Path) -> ImageTree:
    """Every image file of the tree, with its label and annotation; UsageError for an unusable layout."""
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (expected an ImageNet folder with train/ and val/)")
    train_folders = _synset_folders(root / TRAIN, required=True)
    synsets = tuple(entry.name for entry in train_folders)
    labels = {synset: label for label, synset in enumerate(synsets, start=1)}
    annotations = _annotation_index(root / ANNOTATION)
    train = _sources(root, TRAIN, train_folders, labels, annotations)
    validation: tuple[Source, ...] = ()
    if (root / VAL).is_dir():
        val_folders = _synset_folders(root / VAL, required=False)
        _check_val(root / VAL, val_folders, labels)
        validation = _sources(root, VAL, val_folders, labels, annotations)
    return ImageTree(root, synsets, train, validation)


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError as error:
        raise UsageError(f"{folder}: cannot be read ({error.strerror or error})") from None


def _synset_folders(split: Path, required: bool) -> list[os.DirEntry[str]]:
    if not split.is_dir():
        raise UsageError(f"{split}: missing (expected {split.name}/<synset>/<image files>, the ImageNet layout)")
    folders = [entry for entry in _scandir(split) if entry.is_dir() and not entry.name.startswith(".")]
    if required and not folders:
        raise UsageError(f"{split}: no synset folders (expected {split.name}/<synset>/<image files>; "
                         "extract the per-synset archives first)")
    return folders


def _check_val(val: Path, folders: list[os.DirEntry[str]], labels: dict[str, int]) -> None:
    loose = sum(1 for entry in _scandir(val) if entry.is_file())
    if loose:
        raise UsageError(f"{val}: {loose} files are not in synset folders; sort them first with "
                         f"'trainbench data valprep {val} --solution LOC_val_solution.csv' (or --ground-truth)")
    unknown = [entry.name for entry in folders if entry.name not in labels]
    if unknown:
        raise UsageError(f"{val / unknown[0]}: synset {unknown[0]} has no folder in train/ "
                         f"({len(unknown)} such synset folders in val/)")


def _sources(root: Path, split: str, folders: list[os.DirEntry[str]], labels: dict[str, int],
             annotations: frozenset[str]) -> tuple[Source, ...]:
    sources = []
    for folder in folders:
        files = [entry for entry in _scandir(Path(folder.path)) if entry.is_file()]
        if not files:
            raise UsageError(f"{folder.path}: synset folder without files (an incomplete download? restore its "
                             "images or remove the folder, which renumbers the labels)")
        for entry in files:
            path = f"{split}/{folder.name}/{entry.name}"
            sources.append(Source(path, entry.stat().st_size, folder.name, labels[folder.name],
                                  _annotation_for(path, annotations)))
    return tuple(sources)


def _annotation_index(folder: Path) -> frozenset[str]:
    """Relative paths of every XML file under Annotation/ (one walk, instead of a lookup per image)."""
    found = set()
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
