"""Campaign matrices: a YAML file whose axes' cartesian product is the plan of a benchmark campaign.

The format (plain YAML; every key but ``axes`` is optional)::

    axes:                        # the product of every axis but batch_size is the campaign's experiments
      framework: [torch, tf]
      precision: [fp32]
      batch_size: [1, 2]         # required: swept inside each experiment, one worker per batch size
      image_size: [64]
    repeats: 2                   # runs of each experiment, interleaved: every experiment's run 0, then run 1...
    warmup: 1                    # run settings: one value each, the same for every experiment
    steps: 2
    exclude:                     # an experiment that matches every key of one rule is dropped
      - {framework: tf, precision: [fp16, bf16]}

Axes (a scalar counts as a one-value list; a value given twice is refused):
framework, precision, device (``trainbench throughput``'s names; "auto" is kept, resolved by the runner),
batch_size, image_size, num_classes (absent: the data's classes, else 1000, as ``--num-classes``), seed,
data ("synthetic" or a data folder, relative to the current folder, stored resolved), xla, channels_last,
cuda_graph (true/false), compile (true/false, or one of torch.compile's modes: ``reduce-overhead``...), loader
(cpu, gpu: where real images are decoded), profiler ("none" or one of ``trainbench profile``'s profilers), gpus
(whole number >= 1: PyTorch processes under torchrun, the batch size per process), nodes (1 here; several nodes:
scripts/slurm/).

Settings: repeats (campaign repetitions), warmup, steps, windows (timed windows per batch size: throughput's
``--repeats``), timeout (seconds per batch size, or null), sync_every_step, and for the profilers start_iteration,
iterations and clock_control ("base" or "none"). Defaults are the suite's own (config.field_default).

Built-in legality filter, applied after ``exclude`` (combinations the suite would refuse, dropped rather than
reported so that axes can be crossed freely): xla=true only with framework tf; compile, cuda_graph and
channels_last only with framework torch; compile and cuda_graph not together; the step settings and loaders that
``trainbench throughput`` refuses (CUDA graphs or the GPU loader on device cpu, cuda_graph with fp16, loader gpu
without data); precision fp16 not with device cpu; profiler torch or tf only with that framework;
profiler ncu, nsys or nvprof not with device cpu. A matrix that leaves no experiment is refused.

Overrides (``parse_overrides``), Hydra style: ``key=v1,v2`` replaces an axis's values (an axis the file lacks is
added), ``key=v`` sets a setting; each value is read as YAML (``true``, ``64``, ``fp32``), so a value cannot contain
a comma.

Every problem (an unknown key, a bad value, an empty list or product, a YAML syntax error) is a one-line
UsageError naming the file and the key, or the override; every experiment's BenchConfig is built at load time so
that config.py's checks speak before anything runs.

Config strings (run folders' names): framework, precision and image size always (``torch-fp32-img64``), then, in a
fixed axis order, every other axis that has more than one value or whose one value is not the default (``xla``,
``no_xla``, ``gpus2``, ``data_<folder name>_<8 hex digits of the path's sha256>``...). Tokens never contain "-",
"/" or white space, so two experiments of one matrix never share a string, and reordering keys changes nothing.

The fingerprint is the sha256 of a canonical JSON (sorted keys) of the axes, repeats, settings and exclude rules:
a resumed campaign can refuse a different matrix; the order of mapping keys does not change it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainbench.config import (
    COMPILE_MODES,
    FRAMEWORKS,
    LOADERS,
    PROFILERS,
    BenchConfig,
    LaunchConfig,
    ModelConfig,
    ProfileConfig,
    check_choice,
    choice,
    field_default,
    float_problem,
    int_problem,
    loader_problem,
)
from trainbench.data.source import DataSource, num_classes, open_source, tfrecords_only
from trainbench.errors import UsageError, printable_line
from trainbench.results.files import ABANDONED, IN_PROGRESS, REFUSED

SYNTHETIC = "synthetic"
NO_PROFILER = "none"
EXTERNAL_PROFILERS = ("ncu", "nsys", "nvprof")  # profile GPU kernels: nothing to see on the CPU
CLOCK_CONTROLS = ("base", "none")
FINGERPRINT_FORMAT = 1
UNFINISHED_MARKERS = (IN_PROGRESS, ABANDONED, REFUSED)  # never in a config string (see _data_token)

Parser = Callable[[Any], Any]


# --- value parsers: each returns the value to keep or raises UsageError saying what is wrong (no location) -------
# Where config.py has the check, a configuration is built with just that field so its own message speaks.

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


def _data(value: Any) -> str:
    """"synthetic", or a data folder as an absolute path (runs may start elsewhere); a folder the suite cannot
    read is refused now, with data.source's message."""
    if value == SYNTHETIC:
        return value
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"must be {SYNTHETIC!r} or a data folder, got {value!r}")
    _source(value)
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


# The known axes in config-string order, and the settings; their defaults are the suite's.
AXES: dict[str, Parser] = {
    "framework": _model_field("framework"),
    "precision": _model_field("precision"),
    "image_size": _model_field("image_size"),
    "device": _model_field("device"),
    "num_classes": _model_field("num_classes"),
    "data": _data,
    "xla": _flag,
    "compile": _compile,
    "cuda_graph": _flag,
    "channels_last": _flag,
    "loader": _loader,
    "seed": _model_field("seed"),
    "profiler": _profiler,
    "gpus": _count,
    "nodes": _count,
    "batch_size": _batch_size,
}
AXIS_DEFAULTS: dict[str, Any] = {
    **{name: field_default(ModelConfig, name) for name in ("framework", "precision", "image_size", "device",
                                                           "num_classes", "xla", "compile", "cuda_graph",
                                                           "channels_last", "seed")},
    "loader": field_default(BenchConfig, "loader"),
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
    windows: int = field_default(BenchConfig, "repeats")  # timed windows per batch size (throughput's --repeats)
    timeout: float | None = None  # seconds per batch size
    sync_every_step: bool = field_default(BenchConfig, "sync_every_step")
    start_iteration: int = field_default(ProfileConfig, "start_iteration")
    iterations: int = field_default(ProfileConfig, "iterations")
    clock_control: str = CLOCK_CONTROLS[0]


SETTINGS: dict[str, Parser] = {
    "repeats": _count,
    "warmup": _bench_field("warmup_steps"),
    "steps": _bench_field("steps"),
    "windows": _count,  # BenchConfig.repeats' bounds, but its message says "repeats": here, the campaign's
    "timeout": _timeout,
    "sync_every_step": _flag,
    "start_iteration": _window_field("start_iteration"),
    "iterations": _window_field("iterations"),
    "clock_control": _clock_control,
}
TOP_LEVEL = ("axes", "exclude", *SETTINGS)


# --- the matrix --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matrix:
    axes: dict[str, tuple[Any, ...]]  # in the file's order, overrides' new axes last; batch_size among them
    repeats: int = 1
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


@dataclass(frozen=True)
class Override:
    key: str
    values: tuple[Any, ...]
    text: str  # as given, for messages


def _fail(where: str, message: str) -> UsageError:
    return UsageError(printable_line(f"{where}: {message}"))


def _parsed(parse: Parser, value: Any, where: str) -> Any:
    try:
        return parse(value)
    except UsageError as error:
        raise _fail(where, str(error)) from None


def _values(name: str, raw: Any, where: str) -> tuple[Any, ...]:
    """An axis's values: a scalar is a one-value list; none, or one given twice, is refused."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise _fail(where, "empty list: give at least one value")
    values = tuple(_parsed(AXES[name], item, where) for item in items)
    for i, value in enumerate(values):
        if value in values[:i]:
            raise _fail(where, f"{value!r} is given more than once")
    return values


def _unknown_key(key: Any, allowed: Sequence[str], what: str) -> str:
    return f"unknown {what} {key!r}: choose one of {', '.join(allowed)}"


def _axis_name(key: Any, where: str) -> str:
    if key in AXES:
        return key
    if key in SETTINGS:
        raise _fail(where, f"{key} is a run setting, not an axis: give it at the top level")
    raise _fail(where, _unknown_key(key, list(AXES), "axis"))


# --- reading a file ------------------------------------------------------------------------------------------------


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


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None) or str(error)
    mark = getattr(error, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _fail(str(path), f"cannot be read ({getattr(error, 'strerror', None) or error})") from None
    try:
        raw = yaml.load(text, Loader=_Loader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as error:
        raise _fail(str(path), f"not valid YAML: {_yaml_problem(error)}") from None
    if not isinstance(raw, dict):
        raise _fail(str(path), f"must be a YAML mapping with an 'axes:' key, got {type(raw).__name__}")
    return raw


def _axes(raw: Any, where: str) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, dict):
        raise _fail(f"{where}: axes", f"must be a mapping of axis names to lists of values, got {raw!r}")
    return {_axis_name(key, f"{where}: axes"): _values(key, values, f"{where}: axes.{key}")
            for key, values in raw.items()}


def _exclude(raw: Any, axes: Mapping[str, tuple[Any, ...]], where: str) -> tuple[dict[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail(f"{where}: exclude", f"must be a list of rules (mappings of axes to values), got {raw!r}")
    rules = []
    for i, rule in enumerate(raw):
        at = f"{where}: exclude[{i}]"
        if not isinstance(rule, dict) or not rule:
            raise _fail(at, f"must be a mapping of axes to a value or a list of values, got {rule!r}")
        for key in rule:
            _axis_name(key, at)
            if key == "batch_size":
                raise _fail(f"{at}.{key}", "batch sizes are swept inside each experiment and cannot be excluded")
            if key not in axes:
                raise _fail(f"{at}.{key}", f"not an axis of this matrix (its axes: {', '.join(axes)})")
        rules.append({key: _values(key, values, f"{at}.{key}") for key, values in rule.items()})
    return tuple(rules)


def load_matrix(path: str | Path, overrides: Sequence[Override] = ()) -> Matrix:
    """The matrix in ``path`` with ``overrides`` (parse_overrides') applied, every experiment checked."""
    path = Path(path)
    where = str(path)
    raw = _read(path)
    for key in raw:
        if key not in TOP_LEVEL:
            hint = "; axes go under 'axes:'" if key in AXES else ""
            raise _fail(where, _unknown_key(key, TOP_LEVEL, "key") + hint)
    if "axes" not in raw:
        raise _fail(where, "axes: missing: list the axes to cross, batch_size among them")
    axes = _axes(raw["axes"], where)
    settings = {key: _parsed(SETTINGS[key], raw[key], f"{where}: {key}") for key in SETTINGS if key in raw}
    origins: dict[str, str] = {}  # an overridden axis's messages name the override, not the file
    for override in overrides:
        if override.key in SETTINGS:
            settings[override.key] = override.values[0]
        else:
            axes[override.key] = override.values
            origins[override.key] = f"override {override.text!r}"
    if "batch_size" not in axes:
        raise _fail(f"{where}: axes.batch_size", "missing: list the batch sizes each experiment sweeps")
    repeats = settings.pop("repeats", 1)
    matrix = Matrix(axes=axes, repeats=repeats, settings=Settings(**settings),
                    exclude=_exclude(raw.get("exclude"), axes, where), source=where)
    _check(matrix, origins)
    return matrix


# --- overrides -------------------------------------------------------------------------------------------------------


def _override_value(item: str, where: str) -> Any:
    if not item.strip():
        raise _fail(where, "empty value")
    try:
        return yaml.safe_load(item)
    except yaml.YAMLError as error:
        raise _fail(where, f"not a YAML value: {_yaml_problem(error)}") from None


def parse_override(text: str) -> Override:
    """``key=v1,v2``: an axis's new values, or ``key=v``: a setting; each value read as YAML and checked."""
    where = f"override {text!r}"
    key, equals, rest = text.partition("=")
    key = key.strip()
    if not equals:
        raise _fail(where, "expected KEY=VALUE or KEY=VALUE,VALUE...")
    if key not in AXES and key not in SETTINGS:
        raise _fail(where, _unknown_key(key, [*AXES, *SETTINGS], "key"))
    items = [_override_value(item, where) for item in rest.split(",")]
    if key in SETTINGS:
        if len(items) != 1:
            raise _fail(where, f"{key} is a setting and takes one value, not a list to sweep")
        return Override(key, (_parsed(SETTINGS[key], items[0], where),), text)
    return Override(key, _values(key, items, where), text)


def parse_overrides(texts: Sequence[str]) -> tuple[Override, ...]:
    overrides = tuple(parse_override(text) for text in texts)
    keys = [override.key for override in overrides]
    for override in overrides:
        if keys.count(override.key) > 1:
            raise _fail(f"override {override.text!r}", f"{override.key} is overridden more than once")
    return overrides


# --- the plan --------------------------------------------------------------------------------------------------------


def illegal(values: Mapping[str, Any]) -> str | None:
    """Why the suite would refuse this combination of axis values (the built-in legality filter), or None."""

    def value(axis: str) -> Any:
        return values.get(axis, AXIS_DEFAULTS[axis])

    framework, device, profiler = value("framework"), value("device"), value("profiler")
    if value("xla") and framework != "tf":
        return "xla needs framework tf"
    for flag in ("compile", "cuda_graph", "channels_last"):
        if value(flag) and framework != "torch":
            return f"{flag} needs framework torch"
    if value("precision") == "fp16" and device == "cpu":
        return "fp16 needs a GPU, not device cpu"
    if profiler in FRAMEWORKS and profiler != framework:
        return f"the {profiler} profiler needs framework {profiler}"
    if profiler in EXTERNAL_PROFILERS and device == "cpu":
        return f"{profiler} profiles GPU kernels, not device cpu"
    if problem := LaunchConfig(processes_per_node=value("gpus")).problem_for(framework):
        return f"gpus {value('gpus')}: {problem}"
    if value("nodes") > 1:
        return "nodes above 1: run multi-node sweeps with scripts/slurm/throughput.sbatch, not in a campaign"
    return _step_problem(value)


def _step_problem(value: Callable[[str], Any]) -> str | None:
    """What ModelConfig and the loader rule refuse among the step and input settings (config.py's one check)."""
    compiled = value("compile")
    try:
        ModelConfig(framework=value("framework"), precision=value("precision"), device=value("device"),
                    compile=compiled is not False, cuda_graph=value("cuda_graph"),
                    compile_mode=choice("compile mode", compiled, COMPILE_MODES) if isinstance(compiled, str)
                    else "default")
    except UsageError as error:
        return str(error)
    data = None if value("data") == SYNTHETIC else value("data")
    return loader_problem(value("loader"), value("framework"), data, value("device"))


def excluded(values: Mapping[str, Any], rules: Sequence[Mapping[str, tuple[Any, ...]]]) -> bool:
    """Whether one rule matches every one of its keys."""
    return any(all(values[key] in allowed for key, allowed in rule.items()) for rule in rules)


def _combinations(matrix: Matrix) -> list[dict[str, Any]]:
    names = [name for name in matrix.axes if name != "batch_size"]
    return [dict(zip(names, point, strict=True))
            for point in itertools.product(*(matrix.axes[name] for name in names))]


def experiments(matrix: Matrix) -> list[Experiment]:
    kept = [values for values in _combinations(matrix)
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
    prefixes = {"image_size": "img", "num_classes": "cls", "seed": "seed", "gpus": "gpus", "nodes": "nodes"}
    return f"{prefixes.get(axis, '')}{value}"


def _data_token(path: str) -> str:
    """The folder's name, made safe and short, with a hash of the whole path: two folders named alike differ. A name
    holding an unfinished run's marker (``results.files``: a data folder named ``x_inprogress``) is left out, else
    the finished run's folder would read as unfinished and be skipped by every reader."""
    name = re.sub(r"[^A-Za-z0-9.]+", "_", Path(path).name)[:32] or "root"
    digest = hashlib.sha256(path.encode()).hexdigest()[:8]
    token = f"data_{name}_{digest}"
    return f"data_{digest}" if any(marker in token for marker in UNFINISHED_MARKERS) else token


def config_string(matrix: Matrix, values: Mapping[str, Any]) -> str:
    """``torch-fp32-img64[-...]``: see the module's docstring for the rule."""
    always = ("framework", "precision", "image_size")
    tokens = []
    for axis in AXES:
        if axis == "batch_size":
            continue
        value = values.get(axis, AXIS_DEFAULTS[axis])
        shown = matrix.axes.get(axis, (value,))
        if axis in always or len(shown) > 1 or value != AXIS_DEFAULTS[axis]:
            tokens.append(_token(axis, value))
    return "-".join(tokens)


def planned_runs(matrix: Matrix, shuffle_seed: int | None = None) -> list[tuple[int, Experiment]]:
    """(repetition, experiment) pairs: every experiment's repetition 0, then repetition 1...; with a seed, a
    random order that the seed repeats (drift over the campaign then spreads over every experiment evenly)."""
    runs = [(repetition, experiment) for repetition in range(matrix.repeats) for experiment in experiments(matrix)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(runs)
    return runs


# --- configurations ----------------------------------------------------------------------------------------------


@functools.cache
def _source(path: str) -> DataSource:
    return open_source(path)


@functools.cache
def _data_classes(path: str) -> int:
    return num_classes(_source(path))  # a TFRecord folder without a manifest is scanned: once


def _model(experiment: Experiment) -> ModelConfig:
    """As the throughput command's model_config, without resolving the device: the runner does, where it runs."""
    value = experiment.value
    data = value("data")
    if data != SYNTHETIC and value("framework") == "tf":
        tfrecords_only(_source(data))
    classes = value("num_classes")
    if "num_classes" not in experiment.values and data != SYNTHETIC:
        classes = _data_classes(data)
    return ModelConfig(framework=value("framework"), precision=value("precision"), image_size=value("image_size"),
                       num_classes=classes, device=value("device"), xla=value("xla"),
                       compile=value("compile") is not False,
                       compile_mode=value("compile") if isinstance(value("compile"), str) else "default",
                       cuda_graph=value("cuda_graph"), channels_last=value("channels_last"), seed=value("seed"))


def bench_configs(matrix: Matrix, experiment: Experiment) -> list[BenchConfig]:
    """One BenchConfig per batch size, as ``trainbench throughput`` (or ``profile``, with a profiler) builds them."""
    settings, value = matrix.settings, experiment.value
    data = None if value("data") == SYNTHETIC else value("data")
    timing: dict[str, Any] = {"warmup_steps": settings.warmup, "steps": settings.steps, "repeats": settings.windows,
                              "sync_every_step": settings.sync_every_step, "profile": None}
    if value("profiler") != NO_PROFILER:
        window = ProfileConfig(tool=value("profiler"), start_iteration=settings.start_iteration,
                               iterations=settings.iterations)
        # the window replaces the timed steps: the placeholders `trainbench profile` uses
        timing = {"warmup_steps": 0, "steps": 1, "repeats": 1, "sync_every_step": False, "profile": window}
    model = _model(experiment)
    launch = LaunchConfig(processes_per_node=value("gpus"), nodes=value("nodes"))  # torchrun for gpus > 1
    return [BenchConfig(model=model, batch_size=size, data=data, loader=value("loader"), launch=launch, **timing)
            for size in matrix.batch_sizes]


def _check(matrix: Matrix, origins: Mapping[str, str]) -> None:
    """Refuse, before anything runs, a plan with no experiment or one the suite would refuse."""
    where = matrix.source
    combinations = _combinations(matrix)
    allowed = [values for values in combinations if not excluded(values, matrix.exclude)]
    if not allowed:
        raise _fail(f"{where}: exclude", f"excludes every one of the {len(combinations)} combinations")
    legal = [values for values in allowed if illegal(values) is None]
    if not legal:
        example = " ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}"  # true, not True
                           for key, value in allowed[0].items())
        raise _fail(f"{where}: axes", f"no legal combination is left (e.g. {example}: {illegal(allowed[0])})")
    for experiment in experiments(matrix):
        try:
            bench_configs(matrix, experiment)
        except UsageError as error:  # the axes' own checks passed: what is left is the data folder's
            label = origins.get("data", f"{where}: axes.data") if "data" in experiment.values else where
            raise _fail(f"{label}: experiment {experiment.index} ({experiment.name})", str(error)) from None


# --- the dry run -----------------------------------------------------------------------------------------------------


def format_plan(matrix: Matrix, shuffle_seed: int | None = None) -> str:
    """One line per planned run in the order they would run, then the counts."""
    sizes = ",".join(str(size) for size in matrix.batch_sizes)
    runs = planned_runs(matrix, shuffle_seed)
    width = len(str(len(runs)))
    lines = [f"{n:>{width}}  rep {repetition}  exp {experiment.index}  {experiment.name}  batch sizes {sizes}"
             for n, (repetition, experiment) in enumerate(runs)]
    total = len(_combinations(matrix))
    count = len(runs) // matrix.repeats
    dropped = f" ({total - count} of {total} combinations excluded or illegal)" if total > count else ""
    lines.append(f"{count} experiments x {matrix.repeats} repeats = {len(runs)} runs{dropped}")
    return "\n".join(lines)
