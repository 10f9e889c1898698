"""A run's shape settings as run, what two measured settings differ in, and which pairs differ in exactly one.

``settings_as_run`` answers what a run's shape settings were (``workloads.settings`` declares them), read from its
header the one way every reader reads them; ``workloads.settings.shape_words`` says them in words. ``step_as_run``
answers how its step ran (``STEP``: the fp32 products' matmul precision, the optimizer's name, None where a file
from before format 5 does not say: unknown, never "highest" or the reference optimizer; and whether the blocks were
recomputed and how several processes held the model, which a file from before format 6 did not choose: "none" and
"ddp", known).

A change measured between two runs is a change of that one setting only when everything else is the same: the report
and ``trainbench compare`` compare such pairs and mark the others. A setting is a flat name -> value mapping (the
framework, precision, batch size, data, GPU, ...). Versions are compared after their notation is made one: torch
reports cuDNN as 90100 and TensorFlow as "9"; CUDA 12.4 is "12.4", "12.4.0" or 12040.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainbench.results.header import RunHeader
from trainbench.workloads import settings as shape_settings

ORDERED = ("batch_size",)  # settings with an order: a pair is two neighbours, not every two values
_VERSION_WORDS = ("version", "cuda", "cudnn")  # a setting with one of these in its name is read as a version
_DOTTED = re.compile(r"^v?(\d+(?:\.\d+)*)")


def settings_as_run(header: Mapping[str, Any] | RunHeader) -> dict[str, Any]:
    """Each declared shape setting as the run recorded it (None: not recorded, or the workload has none), in
    declaration order, taken as the file holds it: one the header repeats at its top level from there (an older
    profile's from inside its ``model``, as ``RunHeader`` reads it), the others from its ``params``."""
    read = header if isinstance(header, RunHeader) else RunHeader.read(header)
    params = read.params or {}
    return {setting.name: getattr(read, setting.name) if setting.in_header else params.get(setting.name)
            for setting in shape_settings.SETTINGS}


# How the step ran: settings like the others, which compare and the report hold equal across a comparison. Format 5's
# (STEP_SINCE_5) are unknown, None, in a file from before it; format 6's (STEP_SINCE_6) read as what every run before
# it ran (RunHeader's BEFORE_FORMAT_6: no recomputation, DDP), never None but for a value that is no text.
STEP_SINCE_5 = ("matmul_precision", "optimizer")
STEP_SINCE_6 = ("activation_checkpointing", "shard")
STEP = (*STEP_SINCE_5, *STEP_SINCE_6)


def step_as_run(header: Mapping[str, Any] | RunHeader) -> dict[str, str | None]:
    """``STEP``'s values as the run recorded them: the model's ``matmul_precision``, the optimizer's name, the
    model's ``activation_checkpointing`` and ``shard``; None: not recorded (a file from before format 5, whose run
    took its framework's default: unknown, not "highest"). A file from before format 6 reads "none" and "ddp"."""
    read = header if isinstance(header, RunHeader) else RunHeader.read(header)
    return {"matmul_precision": read.matmul_precision, "optimizer": read.optimizer_name,
            "activation_checkpointing": read.activation_checkpointing, "shard": read.shard}


def recorded_at(name: str) -> str:
    """Where a run's header records a shape setting, for messages: ``image_size``, ``params.seq_len``."""
    return name if shape_settings.named(name).in_header else f"params.{name}"


def version_parts(name: str, value: Any) -> tuple[int, ...] | None:
    """A version as numbers, whatever its notation; None when ``value`` is no version. ``name`` says how to read a
    packed integer: cuDNN's (9.1.0 = 90100, 8.9.2 = 8902) or CUDA's (12.4 = 12040)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit() and len(value) >= 4):
        packed = int(value)
        if "cudnn" in name.lower():
            return (packed // 10000, packed // 100 % 100, packed % 100) if packed >= 90000 else \
                (packed // 1000, packed // 100 % 10, packed % 100)
        if "cuda" in name.lower():
            return packed // 1000, packed // 10 % 100
        return (packed,)
    found = _DOTTED.match(str(value).strip())
    return tuple(int(part) for part in found[1].split(".")) if found else None


def same_value(name: str, a: Any, b: Any) -> bool:
    """Equal values, versions equal in any notation: "9" is 9.1.0 as far as it says (one is the other's prefix)."""
    if a == b:
        return True
    if any(word in name.lower() for word in _VERSION_WORDS):
        parts_a, parts_b = version_parts(name, a), version_parts(name, b)
        if parts_a is not None and parts_b is not None:
            shorter = min(len(parts_a), len(parts_b))
            return parts_a[:shorter] == parts_b[:shorter]
    return False


def differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The settings whose values differ, a setting only one side records included (as a difference from None)."""
    names = list(dict.fromkeys([*a, *b]))
    return [name for name in names if not same_value(name, a.get(name), b.get(name))]


@dataclass(frozen=True)
class Pair:
    """Two rows (by index) that differ in exactly ``setting``."""

    first: int
    second: int
    setting: str


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) and not isinstance(value, bool) else (1, str(value))


def one_setting_pairs(rows: Sequence[Mapping[str, Any]], ordered: Sequence[str] = ORDERED) -> list[Pair]:
    """Every pair of rows that differ in exactly one setting, by index; for an ``ordered`` setting only neighbours
    (no row that agrees with both otherwise lies between them), so a sweep of 5 batch sizes gives 4 pairs, not 10.
    Found by grouping, setting by setting, the rows that agree on every other setting: time grows with the rows and
    the pairs found, not with every two rows (a report of 200 runs compared 180,000 pairs, each against every row)."""
    names, keys = _keys(rows)
    pairs: list[Pair] = []
    for column, name in enumerate(names):
        alike: dict[tuple[Hashable, ...], dict[Hashable, list[int]]] = {}
        for index, key in enumerate(keys):
            alike.setdefault(key[:column] + key[column + 1:], {}).setdefault(key[column], []).append(index)
        for by_value in alike.values():
            members = list(by_value.values())
            if name in ordered:
                members.sort(key=lambda indices: _sort_key(rows[indices[0]].get(name)))
                neighbours: Iterable[tuple[list[int], list[int]]] = itertools.pairwise(members)
            else:
                neighbours = itertools.combinations(members, 2)
            pairs.extend(Pair(min(a, b), max(a, b), name) for low, high in neighbours for a in low for b in high)
    return sorted(pairs, key=lambda pair: (pair.first, pair.second))


@dataclass(frozen=True)
class Apart:
    """The pairs of rows that differ in exactly ``settings`` (none: the same settings measured twice): how many,
    and the first of them by index."""

    settings: tuple[str, ...]
    pairs: int
    example: tuple[int, int]


def pairs_by_difference(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, ...], Apart]:
    """Every pair of rows counted by the settings its two rows differ in. Rows of the same settings are counted as a
    class, so the work grows with the square of the distinct settings, not of the rows (200 copies of a run of
    3 batch sizes are 3 classes)."""
    names, keys = _keys(rows)
    classes: dict[tuple[Hashable, ...], list[int]] = {}
    for index, key in enumerate(keys):
        classes.setdefault(key, []).append(index)
    found: dict[tuple[str, ...], Apart] = {}

    def count(settings: tuple[str, ...], pairs: int, example: tuple[int, int]) -> None:
        known = found.get(settings)
        found[settings] = Apart(settings, pairs + (known.pairs if known else 0), known.example if known else example)

    members = list(classes.items())  # in the order of each class's first row
    for position, (key, indices) in enumerate(members):
        if len(indices) > 1:
            count((), len(indices) * (len(indices) - 1) // 2, (indices[0], indices[1]))
        for other_key, other in members[position + 1:]:
            apart = tuple(name for name, mine, theirs in zip(names, key, other_key, strict=True) if mine != theirs)
            count(apart, len(indices) * len(other), (indices[0], other[0]))
    return found


def _keys(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[tuple[Hashable, ...]]]:
    """The settings any row records, and each row's values as one hashable key (a setting a row lacks is None)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return names, [tuple(_canonical(name, row.get(name)) for name in names) for row in rows]


def _canonical(name: str, value: Any) -> Hashable:
    """A value that is equal exactly where ``same_value`` says so, as grouping needs an equality that is transitive:
    a version as its numbers without trailing zeros ("12.4" is "12.4.0" and 12040). One that gives only a prefix
    ("9" for cuDNN 9.1.0), which ``same_value`` calls the same, differs here."""
    if any(word in name.lower() for word in _VERSION_WORDS):
        parts = version_parts(name, value)
        if parts is not None:
            while len(parts) > 1 and parts[-1] == 0:
                parts = parts[:-1]
            return ("version", parts)
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return ("value", value)

