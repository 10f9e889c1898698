"""``trainbench data valprep``: sort ImageNet's flat validation folder into synset folders.

The ground truth comes in one of the forms ImageNet users have:

- Kaggle's ``LOC_val_solution.csv``: ``ImageId,PredictionString`` rows such as
  ``ILSVRC2012_val_00008726,n02119789 255 142 454 329 ...`` (the first token is the synset);
- the devkit's ``ILSVRC2012_validation_ground_truth.txt``: line k holds the class of ``ILSVRC2012_val_<k>``, a
  number 1..1000 in the devkit's synset order (``--synset-order``: one synset per line, line 1 = class 1), or
  directly a synset (as TF-slim's ``imagenet_2012_validation_synset_labels.txt``).

Files are moved (renamed) inside the folder, so a rerun after an interruption sorts only what is left; files the
ground truth does not name stay in place and are counted.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from trainbench.errors import UsageError

_DEVKIT_STEM = "ILSVRC2012_val_{:08d}"


@dataclass(frozen=True)
class ValprepSummary:
    folder: Path
    moved: int
    synsets: int
    unmatched: int  # files the ground truth does not name, left in place
    missing: int  # ground-truth entries without a file
    conflicts: int  # files whose destination already exists, left in place


def read_solution_csv(path: Path) -> dict[str, str]:
    """Image id (file name without extension) -> synset, from a LOC_val_solution.csv-style file."""
    truth = {}
    with _open_text(path) as file:
        rows = csv.reader(file)
        header = next(rows, None)
        if header is None or [cell.strip() for cell in header[:2]] != ["ImageId", "PredictionString"]:
            raise UsageError(f"{path}: not a LOC_val_solution.csv file (its first line must be "
                             "'ImageId,PredictionString')")
        for line, row in enumerate(rows, start=2):
            if len(row) < 2 or not row[1].split():
                raise UsageError(f"{path}:{line}: expected 'ImageId,<synset> <box> ...', got {','.join(row)!r}")
            truth[row[0].strip()] = row[1].split()[0]
    return truth


def read_devkit_ground_truth(path: Path, synset_order: Path | None) -> dict[str, str]:
    """Image id -> synset from the devkit's per-line classes (numbers with ``synset_order``, or synsets)."""
    with _open_text(path) as file:
        values = [line.strip() for line in file if line.strip()]
    order = _synset_order(synset_order) if synset_order is not None else None
    truth = {}
    for number, value in enumerate(values, start=1):
        truth[_DEVKIT_STEM.format(number)] = _synset_of(value, order, path, number)
    return truth


def _synset_of(value: str, order: list[str] | None, path: Path, line: int) -> str:
    if not value.isdigit():
        return value  # already a synset
    if order is None:
        raise UsageError(f"{path}: holds class numbers; give the devkit's synset order with --synset-order FILE "
                         "(one synset per line, line 1 = class 1)")
    if not 1 <= int(value) <= len(order):
        raise UsageError(f"{path}:{line}: class {value} outside 1..{len(order)} of the synset order")
    return order[int(value) - 1]


def _synset_order(path: Path) -> list[str]:
    with _open_text(path) as file:
        return [line.split()[0] for line in file if line.strip()]


def _open_text(path: Path) -> TextIO:
    try:
        return open(path, encoding="utf-8", newline="")
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({error.strerror or error})") from None


def sort_validation(folder: Path, truth: dict[str, str]) -> ValprepSummary:
    """Move every file named in ``truth`` into ``folder/<synset>/``; refuses when it names none of them."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder")
    with os.scandir(folder) as entries:
        files = sorted((entry for entry in entries if entry.is_file()), key=lambda entry: entry.name)
    named = [entry for entry in files if _stem(entry.name) in truth]
    if files and not named:
        raise UsageError(f"{folder}: the ground truth names none of its {len(files)} files "
                         f"(expected names like {_DEVKIT_STEM.format(1)}.JPEG)")
    moved = conflicts = 0
    for entry in named:
        target = folder / truth[_stem(entry.name)] / entry.name
        if target.exists():
            conflicts += 1
            continue
        _move(Path(entry.path), target)
        moved += 1
    synsets = [path for path in folder.iterdir() if path.is_dir()]
    present = {_stem(path.name) for path in folder.iterdir() if path.is_file()}
    present |= {_stem(path.name) for synset in synsets for path in synset.iterdir()}
    return ValprepSummary(folder, moved, len(synsets), len(files) - len(named),
                          sum(1 for stem in truth if stem not in present), conflicts)


def _move(source: Path, target: Path) -> None:
    try:
        target.parent.mkdir(exist_ok=True)
        os.rename(source, target)  # atomic: a file is either still in place or sorted, never lost
    except OSError as error:
        raise UsageError(f"{source}: cannot move it to {target.parent} ({error.strerror or error}); "
                         "the files moved so far stay sorted, rerun to continue") from None


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]
