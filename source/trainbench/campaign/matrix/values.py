"""A matrix's vocabulary: the axes and the settings, their defaults (the suite's own) and the parser of each value.

A parser returns the value to keep or raises a UsageError saying what is wrong (no location: ``parsed`` adds it).
Where config.py has the check, a configuration is built with just that field so that its own message speaks.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainbench import workloads
from trainbench.config import (
    ACTIVATION_CHECKPOINTINGS,
    COMPILE_MODES,
    LOADERS,
    OPTIMIZERS,
    PARAM_FIELDS,
    PROFILERS,
    SHARDS,
    BenchConfig,
    ModelConfig,
    ProfileConfig,
    check_choice,
    field_default,
    float_problem,
    int_problem,
)
from trainbench.data.source import DataSource, open_source
from trainbench.errors import UsageError, printable_line
from trainbench.workloads.settings import SHAPES, checked_bounds

SYNTHETIC = "synthetic"
NO_PROFILER = "none"
CLOCK_CONTROLS = ("base", "none")
# 2: the step's matmul precision is set explicitly (format 5: "highest" unless an axis says otherwise), so a matrix
# resumed from before measures another step than its finished runs did (TensorFlow's fp32 ran TF32 then): refused as
# another matrix, unless --replace-matrix.
# Still 2 with the axes activation_checkpointing and shard (format 6): absent, they are the defaults ("none", "ddp"),
# which are the step every run before them ran (DDP's wrapper unchanged), so a matrix begun before measures the same
# step when resumed; a matrix that names them has them in its axes, which the fingerprint holds already.
FINGERPRINT_FORMAT = 2

Parser = Callable[[Any], Any]


# --- one-line errors naming where ------------------------------------------------------------------------------


def fail(where: str, message: str) -> UsageError:
    return UsageError(printable_line(f"{where}: {message}"))


def parsed(parse: Parser, value: Any, where: str) -> Any:
    try:
        return parse(value)
    except UsageError as error:
        raise fail(where, str(error)) from None


def yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None) or str(error)
    mark = getattr(error, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def unknown_key(key: Any, allowed: Sequence[str], what: str) -> str:
    return f"unknown {what} {key!r}: choose one of {', '.join(allowed)}"


# --- value parsers -------------------------------------------------------------------------------------------------

_MODEL = ModelConfig()


def _model_field(name: str) -> Parser:
    def parse(value: Any) -> Any:
        ModelConfig(**{name: value})
        return value

    return parse


def _bench_field(name: str) -> Parser:
    def parse(value: Any) -> Any:
        BenchConfig(model=_MODEL, batch_size=1, **{name: value})
        return value

    return parse


def _window_field(name: str) -> Parser:
    def parse(value: Any) -> Any:
        ProfileConfig(tool=PROFILERS[0], **{name: value})
        return value

    return parse


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"must be true or false, got {value!r}")
    return value


def _compile(value: Any) -> bool | str:
    """true/false, or a torch.compile mode (compiled, in that mode)."""
    if isinstance(value, bool) or value in COMPILE_MODES:
        return value
    raise UsageError(f"must be true, false or one of {', '.join(COMPILE_MODES)}, got {value!r}")


def _workload(value: Any) -> str:
    check_choice("workload", value, workloads.names())
    return value


def _size(value: Any) -> str:
    check_choice("size", value, workloads.size_names())
    return value


def _widest(name: str) -> Parser:
    """Within the widest bounds of the workloads that have the shape setting; ModelConfig checks the workload's
    own (an experiment it refuses is dropped by the legality filter, with its reason)."""
    def parse(value: Any) -> int:
        problem = int_problem(value, *checked_bounds(name))
        if problem is not None:
            raise UsageError(problem)
        return value

    return parse


def _shape_setting(name: str) -> Parser:
    """A shape setting's parser: where the default workload has the setting, ModelConfig's own check and message
    (its bounds: ``workloads.settings.checked_bounds``, as the command line's option), else the widest bounds."""
    return _model_field(name) if name in workloads.get(workloads.DEFAULT).params else _widest(name)


def _optimizer(value: Any) -> str:
    """sgd, adam or adamw: the step updates with that optimizer (``OptimizerConfig.reference``: the workload's
    reference settings where it names the reference's, else the optimizer's usual ones)."""
    check_choice("optimizer", value, OPTIMIZERS)
    return value


def _step_choice(name: str, choices: tuple[str, ...]) -> Parser:
    """A step setting of the model checked as a name alone (``ModelConfig`` would judge it with the default
    workload: ``activation_checkpointing: full`` is refused for ResNet-50); a combination the suite refuses
    (recomputation on ResNet-50, FSDP with one process or on TensorFlow) is dropped by the legality filter."""
    def parse(value: Any) -> str:
        check_choice(name.replace("_", " "), value, choices)
        return value

    return parse


def _loader(value: Any) -> str:
    check_choice("loader", value, LOADERS)
    return value


def _count(value: Any) -> int:
    problem = int_problem(value)
    if problem is not None:
        raise UsageError(problem)
    return value


def _batch_size(value: Any) -> int:
    BenchConfig(model=_MODEL, batch_size=value)
    return value


@functools.cache
def data_source(path: str) -> DataSource:
    return open_source(path)


def _data(value: Any) -> str:
    """"synthetic", or a data folder as an absolute path (runs may start elsewhere); a folder the suite cannot
    read is refused now, with data.source's message."""
    if value == SYNTHETIC:
        return value
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"must be {SYNTHETIC!r} or a data folder, got {value!r}")
    data_source(value)
    return str(Path(value).resolve())


def _profiler(value: Any) -> str:
    check_choice("profiler", value, (NO_PROFILER, *PROFILERS))
    return value


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    problem = float_problem(value, 0.0, above=True)
    if problem is not None:
        raise UsageError(problem)
    return float(value)  # 60 and 60.0 are one setting, and one fingerprint


def _clock_control(value: Any) -> str:
    check_choice("clock control", value, CLOCK_CONTROLS)
    return value


# --- the axes and the settings ---------------------------------------------------------------------------------

# The known axes in config-string order; their defaults are the suite's. The workload's shape settings
# (``workloads.settings``) come after its size, the others after the device.
AXES: dict[str, Parser] = {
    "workload": _workload,
    "framework": _model_field("framework"),
    "precision": _model_field("precision"),
    "size": _size,
    **{name: _shape_setting(name) for name in SHAPES},
    "device": _model_field("device"),
    **{name: _shape_setting(name) for name in PARAM_FIELDS if name not in SHAPES},
    "data": _data,
    "xla": _flag,
    "compile": _compile,
    "cuda_graph": _flag,
    "channels_last": _flag,
    "matmul_precision": _model_field("matmul_precision"),
    "optimizer": _optimizer,
    "activation_checkpointing": _step_choice("activation_checkpointing", ACTIVATION_CHECKPOINTINGS),
    "shard": _step_choice("shard", SHARDS),
    "loader": _loader,
    "seed": _model_field("seed"),
    "profiler": _profiler,
    "gpus": _count,
    "nodes": _count,
    "batch_size": _batch_size,
}
_MODEL_FIELDS = frozenset(item.name for item in dataclasses.fields(ModelConfig))
AXIS_DEFAULTS: dict[str, Any] = {
    **{name: field_default(ModelConfig, name) for name in AXES if name in _MODEL_FIELDS},
    "loader": field_default(BenchConfig, "loader"),
    "optimizer": None,  # absent: each workload's reference optimizer (BenchConfig's default)
    "data": SYNTHETIC,
    "profiler": NO_PROFILER,
    "gpus": 1,
    "nodes": 1,
}


@dataclass(frozen=True)
class Settings:
    """What every experiment shares: BenchConfig's and ProfileConfig's defaults where they have one."""

    warmup: int = field_default(BenchConfig, "warmup_steps")
    steps: int = field_default(BenchConfig, "steps")
    windows: int = field_default(BenchConfig, "windows")  # timed windows per batch size (throughput's --windows)
    timeout: float | None = None  # seconds per batch size
    sync_every_step: bool = field_default(BenchConfig, "sync_every_step")
    start_iteration: int = field_default(ProfileConfig, "start_iteration")
    iterations: int = field_default(ProfileConfig, "iterations")
    clock_control: str = CLOCK_CONTROLS[0]


SETTINGS: dict[str, Parser] = {
    "repeats": _count,  # the campaign's repetitions of every experiment
    "warmup": _bench_field("warmup_steps"),
    "steps": _bench_field("steps"),
    "windows": _bench_field("windows"),
    "timeout": _timeout,
    "sync_every_step": _flag,
    "start_iteration": _window_field("start_iteration"),
    "iterations": _window_field("iterations"),
    "clock_control": _clock_control,
}
TOP_LEVEL = ("axes", "exclude", *SETTINGS)


def axis_values(name: str, raw: Any, where: str) -> tuple[Any, ...]:
    """An axis's values: a scalar is a one-value list; none, or one given twice, is refused."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise fail(where, "empty list: give at least one value")
    values = tuple(parsed(AXES[name], item, where) for item in items)
    for i, value in enumerate(values):
        if value in values[:i]:
            raise fail(where, f"{value!r} is given more than once")
    return values


def axis_name(key: Any, where: str) -> str:
    if key in AXES:
        return key
    if key in SETTINGS:
        raise fail(where, f"{key} is a run setting, not an axis: give it at the top level")
    raise fail(where, unknown_key(key, list(AXES), "axis"))
