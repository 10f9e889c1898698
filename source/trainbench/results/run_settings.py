"""What two measured settings differ in, and which pairs differ in exactly one setting.

A change measured between two runs is a change of that one setting only when everything else is the same: the report
and ``trainbench compare`` compare such pairs and mark the others. A setting is a flat name -> value mapping (the
framework, precision, batch size, data, GPU, ...). Versions are compared after their notation is made one: torch
reports cuDNN as 90100 and TensorFlow as "9"; CUDA 12.4 is "12.4", "12.4.0" or 12040.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORDERED = ("batch_size",)  # settings with an order: a pair is two neighbours, not every two values
_DOTTED = re.compile(r"^v?(\d+(?:\.\d+)*)")


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
    if any(word in name.lower() for word in ("version", "cuda", "cudnn")):
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
    """Every pair of rows that differ in exactly one setting; for an ``ordered`` setting only neighbours (no row
    that agrees with both otherwise lies between them), so a sweep of 5 batch sizes gives 4 pairs, not 10."""
    pairs = []
    for first in range(len(rows)):
        for second in range(first + 1, len(rows)):
            names = differing(rows[first], rows[second])
            if len(names) == 1 and not (names[0] in ordered and _between(rows, first, second, names[0])):
                pairs.append(Pair(first, second, names[0]))
    return pairs


def _between(rows: Sequence[Mapping[str, Any]], first: int, second: int, name: str) -> bool:
    low, high = sorted((rows[first].get(name), rows[second].get(name)), key=_sort_key)
    others = {key: value for key, value in rows[first].items() if key != name}
    for index, row in enumerate(rows):
        if index in (first, second) or differing(others, {k: v for k, v in row.items() if k != name}):
            continue
        if _sort_key(low) < _sort_key(row.get(name)) < _sort_key(high):
            return True
    return False
