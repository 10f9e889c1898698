"""A matrix and its plan: the experiments left after exclusion and the legality filter, each one's config string,
the fingerprint, and the interleaved (optionally shuffled) order of runs."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainbench import workloads
from trainbench.campaign.matrix.legality import excluded, illegal
from trainbench.campaign.matrix.values import (
    AXES,
    AXIS_DEFAULTS,
    FINGERPRINT_FORMAT,
    SYNTHETIC,
    Settings,
)
from trainbench.results.layout import UNFINISHED_MARKERS  # never in a config string (see _data_token)
from trainbench.workloads import settings as shape_settings
from trainbench.workloads.settings import SHAPES


@dataclass(frozen=True)
class Matrix:
    axes: dict[str, tuple[Any, ...]]  # in the file's order, overrides' new axes last; batch_size among them
    repeats: int = 1  # the campaign's repetitions of every experiment
    settings: Settings = field(default_factory=Settings)
    exclude: tuple[dict[str, tuple[Any, ...]], ...] = ()
    source: str = field(default="", compare=False)  # the file, for messages

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return self.axes["batch_size"]

    def fingerprint(self) -> str:
        canonical = {
            "format": FINGERPRINT_FORMAT,
            "axes": {name: list(values) for name, values in self.axes.items()},
            "repeats": self.repeats,
            "settings": dataclasses.asdict(self.settings),
            "exclude": [{name: list(values) for name, values in rule.items()} for rule in self.exclude],
        }
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Experiment:
    index: int  # in product order, from 0, after exclusion
    values: dict[str, Any]  # every axis of the matrix but batch_size
    name: str  # the config string

    def value(self, axis: str) -> Any:
        return self.values.get(axis, AXIS_DEFAULTS[axis])


def combinations(matrix: Matrix) -> list[dict[str, Any]]:
    names = [name for name in matrix.axes if name != "batch_size"]
    return [dict(zip(names, point, strict=True))
            for point in itertools.product(*(matrix.axes[name] for name in names))]


def experiments(matrix: Matrix) -> list[Experiment]:
    kept = [values for values in combinations(matrix)
            if not excluded(values, matrix.exclude) and illegal(values) is None]
    return [Experiment(index, values, config_string(matrix, values)) for index, values in enumerate(kept)]


def _token(axis: str, value: Any) -> str:
    if isinstance(value, bool):
        return axis if value else f"no_{axis}"
    if axis == "data":
        return value if value == SYNTHETIC else _data_token(value)
    if axis == "profiler":
        return f"prof_{value}"
    if axis == "compile":  # a mode: compile_reduce_overhead (tokens hold no "-")
        return f"compile_{value.replace('-', '_')}"
    if axis == "loader":
        return f"loader_{value}"
    return f"{_PREFIXES.get(axis, '')}{value}"


# A number's token starts with its axis: the shape settings' declared prefixes ("img64"), the others' own names; so do
# the step's texts, which alone would not say what they set ("matmul_high", "opt_adamw", "recompute_full",
# "shard_fsdp").
_PREFIXES = {**{setting.name: setting.prefix for setting in shape_settings.SETTINGS}, "seed": "seed", "gpus": "gpus",
             "nodes": "nodes", "matmul_precision": "matmul_", "optimizer": "opt_",
             "activation_checkpointing": "recompute_", "shard": "shard_"}


def _data_token(path: str) -> str:
    """The folder's name, made safe and short, with a hash of the whole path: two folders named alike differ. A name
    holding an unfinished run's marker (``results.files``: a data folder named ``x_inprogress``) is left out, else
    the finished run's folder would read as unfinished and be skipped by every reader."""
    name = re.sub(r"[^A-Za-z0-9.]+", "_", Path(path).name)[:32] or "root"
    digest = hashlib.sha256(path.encode()).hexdigest()[:8]
    token = f"data_{name}_{digest}"
    return f"data_{digest}" if any(marker in token for marker in UNFINISHED_MARKERS) else token


# Shown in every config string: the framework and precision, and the workload's shape settings as run (SHAPES).
ALWAYS = ("framework", "precision")


def config_string(matrix: Matrix, values: Mapping[str, Any]) -> str:
    """``torch-fp32-img64[-...]``, ``bert-torch-fp32-seq128``: see the package's docstring for the rule."""
    workload = workloads.get(values.get("workload", AXIS_DEFAULTS["workload"]))
    size = values.get("size", AXIS_DEFAULTS["size"])
    tokens = []
    for axis in AXES:
        if axis == "batch_size" or (axis in SHAPES and axis not in workload.params):
            continue
        value = values.get(axis, AXIS_DEFAULTS[axis])
        shown = matrix.axes.get(axis, (value,))
        if axis in SHAPES and value is None:  # the workload's default at its size, as run
            tokens.append(_token(axis, workload.default(axis, size)))
        elif axis in ALWAYS or len(shown) > 1 or value != AXIS_DEFAULTS[axis]:
            tokens.append(_token(axis, value))
    return "-".join(tokens)


def planned_runs(matrix: Matrix, shuffle_seed: int | None = None) -> list[tuple[int, Experiment]]:
    """(repetition, experiment) pairs: every experiment's repetition 0, then repetition 1...; with a seed, a
    random order that the seed repeats (drift over the campaign then spreads over every experiment evenly)."""
    runs = [(repetition, experiment) for repetition in range(matrix.repeats) for experiment in experiments(matrix)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(runs)
    return runs


def format_plan(matrix: Matrix, shuffle_seed: int | None = None) -> str:
    """The dry run: one line per planned run in the order they would run, then the counts."""
    sizes = ",".join(str(size) for size in matrix.batch_sizes)
    runs = planned_runs(matrix, shuffle_seed)
    width = len(str(len(runs)))
    lines = [f"{n:>{width}}  rep {repetition}  exp {experiment.index}  {experiment.name}  batch sizes {sizes}"
             for n, (repetition, experiment) in enumerate(runs)]
    total = len(combinations(matrix))
    count = len(runs) // matrix.repeats
    dropped = f" ({total - count} of {total} combinations excluded or illegal)" if total > count else ""
    lines.append(f"{count} experiments x {matrix.repeats} repeats = {len(runs)} runs{dropped}")
    return "\n".join(lines)
