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
import io
import os
from dataclasses import dataclass
from pathlib import Path

from trainbench.data.imagenet_tree import sorted_entries
from trainbench.errors import UsageError, os_reason

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
    rows = csv.reader(io.StringIO(_read_text(path), newline=""))
    try:
        header = next(rows, None)
        if header is None or [cell.strip() for cell in header[:2]] != ["ImageId", "PredictionString"]:
            raise UsageError(f"{path}: not a LOC_val_solution.csv file (its first line must be "
                             "'ImageId,PredictionString')")
        for line, row in enumerate(rows, start=2):
            if len(row) < 2 or not row[1].split():
                raise UsageError(f"{path}:{line}: expected 'ImageId,<synset> <box> ...', got {','.join(row)!r}")
            truth[row[0].strip()] = _folder_name(row[1].split()[0], path, line)
    except csv.Error as error:
        raise UsageError(f"{path}:{rows.line_num}: not CSV ({error})") from None
    return truth


def read_devkit_ground_truth(path: Path, synset_order: Path | None) -> dict[str, str]:
    """Image id -> synset from the devkit's per-line classes (numbers with ``synset_order``, or synsets)."""
    values = [line.strip() for line in _read_text(path).splitlines() if line.strip()]
    order = _synset_order(synset_order) if synset_order is not None else None
    truth = {}
    for number, value in enumerate(values, start=1):
        truth[_DEVKIT_STEM.format(number)] = _synset_of(value, order, path, number)
    return truth


def _folder_name(synset: str, path: Path, line: int) -> str:
    """A synset becomes a folder name: one that would reach outside the folder ('..', 'a/b') is refused."""
    if synset in (".", "..") or "/" in synset or "\0" in synset:
        raise UsageError(f"{path}:{line}: {synset!r} is not a synset (files are moved into a folder of that name)")
    return synset


def _synset_of(value: str, order: list[str] | None, path: Path, line: int) -> str:
    if not value.isdigit():
        return _folder_name(value, path, line)  # already a synset
    if order is None:
        raise UsageError(f"{path}: holds class numbers; give the devkit's synset order with --synset-order FILE "
                         "(one synset per line, line 1 = class 1)")
    if not 1 <= int(value) <= len(order):
        raise UsageError(f"{path}:{line}: class {value} outside 1..{len(order)} of the synset order")
    return order[int(value) - 1]


def _synset_order(path: Path) -> list[str]:
    lines = [line for line in _read_text(path).splitlines() if line.strip()]
    return [_folder_name(line.split()[0], path, number) for number, line in enumerate(lines, start=1)]


def _read_text(path: Path) -> str:
    """A ground-truth file's text; unreadable or not UTF-8 (the byte is named) is a UsageError."""
    try:
        return path.read_bytes().decode("utf-8-sig")  # a byte-order mark (a spreadsheet's export) is dropped
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({os_reason(error)})") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not UTF-8 text (byte {error.start}: {error.object[error.start]:#04x})") from None


def sort_validation(folder: Path, truth: dict[str, str]) -> ValprepSummary:
    """Move every file named in ``truth`` into ``folder/<synset>/``; refuses when it names none of them."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder")
    files = [entry for entry in sorted_entries(folder) if _is_file(entry)]
    named = [entry for entry in files if _stem(entry.name) in truth]
    if files and not named:
        raise UsageError(f"{folder}: the ground truth names none of its {len(files)} files "
                         f"(expected names like {_DEVKIT_STEM.format(1)}.JPEG)")
    moved = conflicts = 0
    for entry in named:
        target = folder / truth[_stem(entry.name)] / entry.name
        if os.path.lexists(target):  # a dangling link there too: rename would replace it
            conflicts += 1
            continue
        _move(Path(entry.path), target)
        moved += 1
    synsets = [entry for entry in sorted_entries(folder) if _is_folder(entry)]
    present = {_stem(entry.name) for entry in sorted_entries(folder) if _is_file(entry)}
    present |= {_stem(entry.name) for synset in synsets for entry in sorted_entries(Path(synset.path))}
    return ValprepSummary(folder, moved, len(synsets), len(files) - len(named),
                          sum(1 for stem in truth if stem not in present), conflicts)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symbolic link loop: not a file to sort, left in place
        return False


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _move(source: Path, target: Path) -> None:
    try:
        target.parent.mkdir(exist_ok=True)
        os.rename(source, target)  # atomic: a file is either still in place or sorted, never lost
    except OSError as error:
        raise UsageError(f"{source}: cannot move it to {target.parent} ({os_reason(error)}); "
                         "the files moved so far stay sorted, rerun to continue") from None


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]
