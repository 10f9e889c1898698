"""A run's header: the settings a throughput run's ``summary.json`` and a profile's ``profile.json`` start with.

Both write one ``RunHeader`` (``run_header`` in bench.sweep builds it, ``to_json`` writes it), in one shape.
``RunHeader.read`` reads the header of a summary of any format so far, and ``results.store.read_summary`` hands
every reader the header in today's shape (``RunHeader.read(...).to_json()``), so no reader needs a fallback.

On disk the header is flat, as readers and scripts have always read it:

- ``workload`` (files from before it was written are read as ``workloads.DEFAULT``, ResNet-50), its ``sample_unit``
  (``"image"``, ``"sequence"``: what samples/s counts), ``size`` (``"full"``, ``"tiny"``; files from before sizes
  existed, with none at the top or in ``model``, are read as ``BEFORE_SIZES``, "full") and
  ``params`` (the workload's shape settings as run: ``{"seq_len": 128}``);
- what one sample costs, from the runner (the first batch size that measured it): ``parameters``,
  ``train_flops_per_sample`` and ``flops_note`` (how they were counted; format 4);
- ``framework``, ``precision``, ``image_size``, ``device`` (the model's own, repeated at the top: what every reader
  asks first), ``data`` (``"synthetic"`` or the data folder), ``model`` (the whole model configuration, its
  ``matmul_precision`` included) and ``optimizer`` (the optimizer configuration the step updates with: its
  ``name``, learning rate, weight decay...; format 5);
- a throughput run's timing (``Timing``): ``warmup_steps``, ``timed_steps``, ``windows``, ``sync_every_step``,
  ``telemetry_interval_s``;
- ``launch`` (how many processes measured together);
- a profile's ``Profiling``: ``profiler``, ``window`` (its profiler window), ``gpu``, ``settings`` (ncu's
  metrics), ``clock_control``.

Older shapes read: a profile.json written before this header holds its framework, precision, image size and device
inside ``model`` only, and no data, launch or workload (a value not recorded reads None, and is not written back);
a summary.json from before ``windows`` was recorded has none; one from before format 5 has no ``optimizer`` and no
``model.matmul_precision``: both read None (``optimizer_name``, ``matmul_precision``), unknown, never taken as the
reference optimizer or "highest" (those runs took each framework's own default: TF32 in TensorFlow). One from before
format 6 has no ``model.activation_checkpointing`` and no ``model.shard``: there the truth is known, since the suite
could neither recompute nor shard before, and they read as that (``BEFORE_FORMAT_6``: "none" and "ddp"). Keys this
module does not know are kept in ``extra`` and written back after the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from trainbench import workloads
from trainbench.errors import UsageError
from trainbench.results.records import FORMAT_KEY, RESULTS_KEY

WORKLOAD = workloads.DEFAULT  # the workload of every run written before the header named one
SAMPLE_UNIT = "image"  # and its sample unit
# The size of every run written before sizes existed (neither the header, format 4, nor its ``model``, the last
# format-3 files, names one): the suite built only the published ResNet-50 then, which is what "full" is (ModelConfig's
# default). Known, not guessed: ResNet-50's "tiny" is that same network with a 64 px input and 10 classes (its
# defaults), and an old file records its image size (and classes) as settings of their own, so a 64 px run from
# then reads "full" at 64 px, as it was asked. A header that holds a size (null included: no writer writes one) is
# read as it holds it.
BEFORE_SIZES = "full"
# What one sample costs: taken from the first ok result that holds them (``with_work``).
WORK = ("parameters", "train_flops_per_sample", "flops_note")
# How the step ran, as every run before format 6 ran it (ModelConfig's defaults): no recomputation, and replicas
# (DDP) wherever several processes measured. Known, unlike format 5's settings (a file from before format 5 took
# its framework's default matmul precision, which the file does not say): a file without these keys reads as these
# values, so that it pairs with and compares equal to a format-6 run of the same step rather than as unknown.
BEFORE_FORMAT_6: dict[str, str] = {"activation_checkpointing": "none", "shard": "ddp"}


@dataclass(frozen=True)
class Timing:
    """How a throughput run timed each batch size: a warm-up, then ``windows`` windows of ``timed_steps`` steps."""

    warmup_steps: int | None = None
    timed_steps: int | None = None
    windows: int | None = None
    sync_every_step: bool | None = None
    telemetry_interval_s: float | None = None


@dataclass(frozen=True)
class Profiling:
    """What a profile ran under: the profiler, its window (``ProfileConfig``'s fields), the GPU it targeted (None
    for a framework profiler), ncu's metric settings and clock control."""

    profiler: str
    window: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = None
    settings: Any = None
    clock_control: str | None = None


_OBJECTS = ("model", "launch", "optimizer")
_TIMING = tuple(f.name for f in fields(Timing))
_PROFILING = tuple(f.name for f in fields(Profiling))
_KNOWN = frozenset({"workload", "sample_unit", "size", "params", "framework", "precision", "image_size", "data",
                    "device", *_OBJECTS, *_TIMING, *_PROFILING, *WORK, FORMAT_KEY, RESULTS_KEY})


@dataclass(frozen=True)
class RunHeader:
    """A run's settings. ``model`` is the whole model configuration (``ModelConfig``'s fields), ``optimizer`` the
    optimizer's (``OptimizerConfig``'s); ``timing`` is set for a throughput run, ``profiling`` for a profile; None
    anywhere: not recorded (an older file)."""

    framework: str | None
    precision: str | None
    device: str | None
    image_size: int | None
    data: str | None
    model: dict[str, Any]
    launch: dict[str, Any] | None = None
    workload: str = WORKLOAD
    sample_unit: str = SAMPLE_UNIT
    size: str | None = None
    params: dict[str, Any] | None = None
    parameters: int | None = None
    train_flops_per_sample: float | None = None
    flops_note: str | None = None
    timing: Timing | None = None
    profiling: Profiling | None = None
    optimizer: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def matmul_precision(self) -> str | None:
        """fp32 products' precision as set ("highest", "high"); None: not recorded (a file from before format 5,
        whose run took its framework's default: unknown, not "highest")."""
        value = self.model.get("matmul_precision")
        return value if isinstance(value, str) else None

    @property
    def optimizer_name(self) -> str | None:
        """The optimizer the step updated with ("sgd", "adamw"); None: not recorded (a file from before format 5)."""
        value = (self.optimizer or {}).get("name")
        return value if isinstance(value, str) else None

    @property
    def activation_checkpointing(self) -> str | None:
        """Whether the blocks' forward ran again in the backward pass ("none", "full"); a file from before format 6
        ran without (``BEFORE_FORMAT_6``); None: a value that is no text."""
        return self._since_format_6("activation_checkpointing")

    @property
    def shard(self) -> str | None:
        """How several processes held the model ("ddp", "fsdp"): the model's setting as asked, also for one process
        (where the result field ``shard`` is None: nothing was spread); a file from before format 6 held replicas
        (``BEFORE_FORMAT_6``); None: a value that is no text."""
        return self._since_format_6("shard")

    def _since_format_6(self, name: str) -> str | None:
        value = self.model.get(name, BEFORE_FORMAT_6[name])
        return value if isinstance(value, str) else None

    def to_json(self) -> dict[str, Any]:
        """The flat header a summary file starts with; values not recorded are left out."""
        out: dict[str, Any] = {"workload": self.workload, "sample_unit": self.sample_unit, "size": self.size,
                               "params": self.params, "framework": self.framework, "precision": self.precision,
                               "image_size": self.image_size, "data": self.data, "device": self.device,
                               "model": self.model, "optimizer": self.optimizer,
                               **{name: getattr(self, name) for name in WORK}}
        if self.timing is not None:
            out.update({name: getattr(self.timing, name) for name in _TIMING})
        out["launch"] = self.launch
        if self.profiling is not None:
            out.update({name: getattr(self.profiling, name) for name in _PROFILING})
        kept = {name: value for name, value in out.items()
                if name in _PROFILING or (value is not None and not (name == "model" and value == {}))}
        return {**kept, **self.extra}

    @classmethod
    def read(cls, header: Mapping[str, Any]) -> RunHeader:
        """The header of a summary of any format so far (``RunSummary.header``, or the file's whole object). Never
        raises: values are taken as the file holds them, and each reader checks those it computes with (a text
        image size leaves a model's results out, naming it); a ``model``, ``launch`` or ``optimizer`` that is no
        object is kept in ``extra``, written back as it was."""
        model, launch, optimizer = (header.get(name) for name in _OBJECTS)
        inside = model if isinstance(model, dict) else {}
        extra = {name: value for name, value in header.items()
                 if name not in _KNOWN or (name in _OBJECTS and value is not None and not isinstance(value, dict))}
        return cls(framework=header.get("framework", inside.get("framework")),
                   precision=header.get("precision", inside.get("precision")),
                   device=header.get("device", inside.get("device")),
                   image_size=header.get("image_size", inside.get("image_size")), data=header.get("data"),
                   model=inside, launch=launch if isinstance(launch, dict) else None,
                   workload=header.get("workload") or WORKLOAD,
                   sample_unit=header.get("sample_unit") or _sample_unit(header.get("workload") or WORKLOAD),
                   size=_size(header, inside),
                   params=header.get("params") if isinstance(header.get("params"), dict) else None,
                   **{name: header.get(name) for name in WORK},
                   timing=_timing(header), profiling=_profiling(header),
                   optimizer=optimizer if isinstance(optimizer, dict) else None, extra=extra)


def _sample_unit(workload: Any) -> str:
    """What a header without a sample unit counts: its workload's unit (a BERT run's sequences), else images (every
    run written before the header named a workload was ResNet-50's)."""
    try:
        return workloads.get(str(workload)).sample_unit
    except UsageError:
        return SAMPLE_UNIT


def _size(header: Mapping[str, Any], inside: Mapping[str, Any]) -> Any:
    """The size as the file holds it (at the top, else inside ``model``); ``BEFORE_SIZES`` where it holds none."""
    if "size" in header:
        return header["size"]
    return inside.get("size", BEFORE_SIZES)


def _timing(header: Mapping[str, Any]) -> Timing | None:
    if not any(name in header for name in _TIMING):
        return None
    return Timing(**{name: header.get(name) for name in _TIMING})


def _profiling(header: Mapping[str, Any]) -> Profiling | None:
    profiler = header.get("profiler")
    if profiler is None:
        return None
    return Profiling(profiler, header.get("window"), header.get("gpu"), header.get("settings"),
                     header.get("clock_control"))


def with_work(header: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A header (``to_json``'s) with what one sample costs taken from a result's ``values``, when it has none yet:
    the engine counts them with every batch size, and they differ between batch sizes by noise at most."""
    if header.get("parameters") is not None or values.get("parameters") is None:
        return header
    return {**header, **{name: values.get(name) for name in WORK}}
