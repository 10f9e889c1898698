"""Reading a matrix file: the YAML (a key given twice refused), its axes, settings and exclude rules, the overrides
applied, and every experiment checked before anything runs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from trainbench.campaign.matrix.configs import bench_configs
from trainbench.campaign.matrix.legality import excluded, illegal
from trainbench.campaign.matrix.overrides import Override
from trainbench.campaign.matrix.plan import Matrix, combinations, experiments
from trainbench.campaign.matrix.values import (
    AXES,
    SETTINGS,
    TOP_LEVEL,
    Settings,
    axis_name,
    axis_values,
    fail,
    parsed,
    unknown_key,
    yaml_problem,
)
from trainbench.errors import UsageError


class _Loader(yaml.SafeLoader):
    """yaml.safe_load's loader, refusing a key given twice (PyYAML would silently keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: list[Any] = []
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.append(key)
        return super().construct_mapping(node, deep)


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise fail(str(path), f"cannot be read ({getattr(error, 'strerror', None) or error})") from None
    try:
        raw = yaml.load(text, Loader=_Loader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as error:
        raise fail(str(path), f"not valid YAML: {yaml_problem(error)}") from None
    if not isinstance(raw, dict):
        raise fail(str(path), f"must be a YAML mapping with an 'axes:' key, got {type(raw).__name__}")
    return raw


def _axes(raw: Any, where: str) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, dict):
        raise fail(f"{where}: axes", f"must be a mapping of axis names to lists of values, got {raw!r}")
    return {axis_name(key, f"{where}: axes"): axis_values(key, values, f"{where}: axes.{key}")
            for key, values in raw.items()}


def _exclude(raw: Any, axes: Mapping[str, tuple[Any, ...]], where: str) -> tuple[dict[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(f"{where}: exclude", f"must be a list of rules (mappings of axes to values), got {raw!r}")
    rules = []
    for i, rule in enumerate(raw):
        at = f"{where}: exclude[{i}]"
        if not isinstance(rule, dict) or not rule:
            raise fail(at, f"must be a mapping of axes to a value or a list of values, got {rule!r}")
        for key in rule:
            axis_name(key, at)
            if key == "batch_size":
                raise fail(f"{at}.{key}", "batch sizes are swept inside each experiment and cannot be excluded")
            if key not in axes:
                raise fail(f"{at}.{key}", f"not an axis of this matrix (its axes: {', '.join(axes)})")
        rules.append({key: axis_values(key, values, f"{at}.{key}") for key, values in rule.items()})
    return tuple(rules)


def load_matrix(path: str | Path, overrides: Sequence[Override] = ()) -> Matrix:
    """The matrix in ``path`` with ``overrides`` (parse_overrides') applied, every experiment checked."""
    path = Path(path)
    where = str(path)
    raw = _read(path)
    for key in raw:
        if key not in TOP_LEVEL:
            hint = "; axes go under 'axes:'" if key in AXES else ""
            raise fail(where, unknown_key(key, TOP_LEVEL, "key") + hint)
    if "axes" not in raw:
        raise fail(where, "axes: missing: list the axes to cross, batch_size among them")
    axes = _axes(raw["axes"], where)
    settings = {key: parsed(SETTINGS[key], raw[key], f"{where}: {key}") for key in SETTINGS if key in raw}
    origins: dict[str, str] = {}  # an overridden axis's messages name the override, not the file
    for override in overrides:
        if override.key in SETTINGS:
            settings[override.key] = override.values[0]
        else:
            axes[override.key] = override.values
            origins[override.key] = f"override {override.text!r}"
    if "batch_size" not in axes:
        raise fail(f"{where}: axes.batch_size", "missing: list the batch sizes each experiment sweeps")
    repeats = settings.pop("repeats", 1)
    matrix = Matrix(axes=axes, repeats=repeats, settings=Settings(**settings),
                    exclude=_exclude(raw.get("exclude"), axes, where), source=where)
    _check(matrix, origins)
    return matrix


def _check(matrix: Matrix, origins: Mapping[str, str]) -> None:
    """Refuse, before anything runs, a plan with no experiment or one the suite would refuse."""
    where = matrix.source
    every = combinations(matrix)
    allowed = [values for values in every if not excluded(values, matrix.exclude)]
    if not allowed:
        raise fail(f"{where}: exclude", f"excludes every one of the {len(every)} combinations")
    legal = [values for values in allowed if illegal(values) is None]
    if not legal:
        example = " ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}"  # true, not True
                           for key, value in allowed[0].items())
        raise fail(f"{where}: axes", f"no legal combination is left (e.g. {example}: {illegal(allowed[0])})")
    for experiment in experiments(matrix):
        try:
            bench_configs(matrix, experiment)
        except UsageError as error:  # the axes' own checks passed: what is left is the data folder's
            label = origins.get("data", f"{where}: axes.data") if "data" in experiment.values else where
            raise fail(f"{label}: experiment {experiment.index} ({experiment.name})", str(error)) from None
