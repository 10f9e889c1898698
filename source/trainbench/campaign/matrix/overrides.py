"""Overrides, Hydra style: ``key=v1,v2`` replaces an axis's values (an axis the file lacks is added), ``key=v`` sets
a setting; each value is read as YAML (``true``, ``64``, ``fp32``) and checked as the file's would be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from trainbench.campaign.matrix.values import AXES, SETTINGS, axis_values, fail, parsed, unknown_key, yaml_problem


@dataclass(frozen=True)
class Override:
    key: str
    values: tuple[Any, ...]
    text: str  # as given, for messages


def _override_value(item: str, where: str) -> Any:
    if not item.strip():
        raise fail(where, "empty value")
    try:
        return yaml.safe_load(item)
    except yaml.YAMLError as error:
        raise fail(where, f"not a YAML value: {yaml_problem(error)}") from None


def parse_override(text: str) -> Override:
    """``key=v1,v2``: an axis's new values, or ``key=v``: a setting; each value read as YAML and checked."""
    where = f"override {text!r}"
    key, equals, rest = text.partition("=")
    key = key.strip()
    if not equals:
        raise fail(where, "expected KEY=VALUE or KEY=VALUE,VALUE...")
    if key not in AXES and key not in SETTINGS:
        raise fail(where, unknown_key(key, [*AXES, *SETTINGS], "key"))
    items = [_override_value(item, where) for item in rest.split(",")]
    if key in SETTINGS:
        if len(items) != 1:
            raise fail(where, f"{key} is a setting and takes one value, not a list to sweep")
        return Override(key, (parsed(SETTINGS[key], items[0], where),), text)
    return Override(key, axis_values(key, items, where), text)


def parse_overrides(texts: Sequence[str]) -> tuple[Override, ...]:
    overrides = tuple(parse_override(text) for text in texts)
    keys = [override.key for override in overrides]
    for override in overrides:
        if keys.count(override.key) > 1:
            raise fail(f"override {override.text!r}", f"{override.key} is overridden more than once")
    return overrides
