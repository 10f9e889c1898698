"""What the suite benchmarks: one descriptor per workload, registered by name, importing no framework.

A bottom layer, just above ``errors`` and ``frameworks`` (``results`` reads the descriptors): a descriptor says
what a workload is (category, what one sample is, its record kind, its shape settings and sizes, which frameworks
implement it and with which reference implementation) so that the command line, campaigns and the report can ask
about it without loading TensorFlow or torch. Names are registered once (a second registration is an error, as
tf-models' ``registry.register`` refuses one) and looked up by name (an unknown name is a one-line UsageError
listing the known ones, as timm's ``create_model`` refuses one).

Descriptors register themselves when this package is imported, from the explicit list at the bottom: a module
that is not listed is not a workload, instead of a scan that would skip a broken one in silence. Workloads from
outside the package come the same way, from the modules the environment variable ``TRAINBENCH_WORKLOADS`` names
(comma-separated, importable: on PYTHONPATH): each registers its descriptor, whose ``builders`` name its own builder
modules. The variable reaches every worker process, so a worker finds the workload its parent ran; a module that
cannot be imported is a one-line UsageError when the registry is first asked.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from trainbench.errors import UsageError


@dataclass(frozen=True)
class Param:
    """One shape setting of a workload: its default and bounds, and what it means."""

    default: int
    minimum: int
    maximum: int
    help: str


SIZES = ("full", "tiny")  # every workload has both: the published network, and a small one for CPU tests and the demo
# The one record kind the image pipelines read (a folder tree of JPEG images, or ImageNet's records), decoded in CPU
# workers or (--loader gpu) on the GPU; every other kind is read by the record pipelines of its engine.
IMAGE_RECORDS = "imagenet"
LearnableSet = Literal["images", "tokens"]


@dataclass(frozen=True)
class Size:
    """One size of a workload: what it is, the architecture numbers both frameworks build from (so the two
    builders make the same network), and the param defaults that differ at this size (tiny: shorter sequences)."""

    about: str
    dims: Mapping[str, int] = field(default_factory=dict)
    defaults: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReferenceOptimizer:
    """The optimizer a workload's reference trains with: what ``throughput``, ``profile``, ``variability`` and
    campaigns time by default, so a step is the reference's step (the update is bandwidth-bound: SGD's momentum reads
    and writes 3 values a parameter, AdamW's 4, and leaving it out flatters GPUs of low bandwidth)."""

    name: str  # one of config.OPTIMIZERS: "sgd", "adam", "adamw"
    base_learning_rate: float  # per 256 samples, scaled linearly with the global batch (config.OptimizerConfig)
    weight_decay: float  # on matrices, kernels and embeddings only (engines.base.is_decayed)
    label_smoothing: float = 0.0  # the classifier's cross-entropy target smoothing, where the reference smooths
    momentum: float = 0.9  # SGD's
    beta2: float = 0.999  # Adam's and AdamW's second-moment decay (beta1 is 0.9 in every reference here)
    source: str = ""  # whose recipe the numbers are


# The original suite's ResNet-50 step: SGD with momentum 0.9, 0.1 per 256 images, weight decay 1e-4.
SGD_REFERENCE = ReferenceOptimizer("sgd", 0.1, 1e-4)


@dataclass(frozen=True)
class Workload:
    name: str  # the registry key: what a user types, and summary.json's "workload"
    title: str  # "ResNet-50": titles of plots and report sections
    category: str  # "image classification"
    sample_unit: str  # what one sample is ("image", "sequence"): the unit of samples_per_sec
    params: Mapping[str, Param]  # the shape settings a user may set (image_size, seq_len, ...)
    sizes: Mapping[str, Size]  # "full" (the published network) and "tiny"
    references: Mapping[str, str]  # framework -> the reference implementation built for it
    record_kind: str  # the records --data holds for it ("imagenet", "bert", ...; data.record_schemas describes them)
    # framework -> the module defining BUILDER (engines/<framework>_workloads/): imported only in a worker, so a
    # descriptor never loads a framework.
    builders: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)  # framework -> why it has no builder (one line)
    # The param whose value is the tokens per sample that tokens/s counts (seq_len: a translation pair counts its
    # target tokens, the wps of fairseq and NVIDIA's references); None: no tokens/s.
    tokens_param: str | None = None
    unsupported: Mapping[str, str] = field(default_factory=dict)  # setting -> why it does not apply
    data: frozenset[str] = frozenset()  # frameworks that read --data for it; the others refuse --data in one line
    untrainable: str | None = None  # why `train` refuses it, when it has no learnable synthetic set (learnable_set)
    # Trainable parameters at --size full, as published (what each framework's builder makes is held exactly by the
    # engines' tests and compared with this by tests/test_workloads.py; 0: none published).
    published_parameters: float = 0.0
    optimizer: ReferenceOptimizer = SGD_REFERENCE  # the reference's optimizer: the default of every timed run

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks that build it (those with a builder module)."""
        return tuple(self.references)

    @property
    def image_input(self) -> bool:
        """Whether its --data is ImageNet's images, read by the image pipelines (--loader cpu or gpu), rather than
        converted records read by its engine's record pipeline."""
        return self.record_kind == IMAGE_RECORDS

    @property
    def learnable_set(self) -> LearnableSet | None:
        """The learnable synthetic set `train` draws it from: labelled images for a workload reading images,
        token sequences for one with tokens; None for neither (``untrainable`` says why `train` refuses it)."""
        if self.image_input:
            return "images"
        return "tokens" if self.tokens_param is not None else None

    @property
    def trains_on_data(self) -> bool:
        """Whether `train --data` reads its records end to end: the image pipelines feed training and evaluation;
        the record pipelines feed throughput, profile and input-bench so far."""
        return self.image_input

    def default(self, name: str, size: str = "full") -> int:
        """A param's default at a size: the size's own, else the param's (the published value)."""
        return self.sizes[size].defaults.get(name, self.params[name].default)

    def bounds(self, name: str, size: str = "full") -> tuple[int, int]:
        """A param's (minimum, maximum) at a size: the param's own, and a sequence no longer than the network's
        positions (tiny BERT and GPT-2 have 64: a longer one would index past them, a device assert on CUDA)."""
        param = self.params[name]
        positions = self.sizes[size].dims.get("positions") if size in self.sizes else None
        if name == self.tokens_param and positions is not None:
            return param.minimum, min(param.maximum, positions)
        return param.minimum, param.maximum

    def dims(self, size: str) -> Mapping[str, int]:
        return self.sizes[size].dims

    def tokens_per_sample(self, params: Mapping[str, int]) -> int | None:
        """Tokens one sample holds, for tokens/s; None for a workload without tokens."""
        if self.tokens_param is None:
            return None
        return params[self.tokens_param]

    @property
    def image_tensors(self) -> bool:
        """Whether its network takes image tensors (a layout to choose: NCHW or NHWC); the sequence workloads mark
        channels_last unsupported for having none."""
        return "channels_last" not in self.unsupported

    def train_problem(self) -> str | None:
        """Why end-to-end training refuses this workload, in one line; None when it trains."""
        if self.untrainable is None and self.learnable_set is not None:
            return None
        why = self.untrainable or "no learnable synthetic set (it has neither images nor tokens)"
        return (f"train --workload {self.name}: end-to-end training is not there yet: {why}; "
                f"measure its throughput with 'throughput --workload {self.name}'")

    def framework_problem(self, framework: str) -> str | None:
        """Why this workload cannot run on ``framework``, in one line; None when it can."""
        if framework in self.references:
            return None
        why = self.refused.get(framework, "no implementation")
        return f"--workload {self.name} has no {framework} implementation: {why}"


_WORKLOADS: dict[str, Workload] = {}
_READERS: dict[str, str] = {}  # record kind -> the first workload registered that reads it
# What a command runs when no --workload is named, and the workload of every result file written before the header
# named one (results.header reads such files as this).
DEFAULT = "resnet50"


def register(workload: Workload) -> Workload:
    if workload.name in _WORKLOADS:
        raise ValueError(f"workload {workload.name!r} registered twice")
    _WORKLOADS[workload.name] = workload
    _READERS.setdefault(workload.record_kind, workload.name)
    return workload


PLUGINS_VARIABLE = "TRAINBENCH_WORKLOADS"
_imported_plugins: set[str] = set()
_plugins_seen = ""  # the variable's value once every module it names was imported: a lookup then does nothing more


def _import_plugins() -> None:
    """Import the modules ``TRAINBENCH_WORKLOADS`` names that are not imported yet (read at every lookup: a process
    that sets it later, as a test does, still sees them); each registers its workloads."""
    global _plugins_seen
    value = os.environ.get(PLUGINS_VARIABLE, "")
    if value == _plugins_seen:
        return
    for name in (part.strip() for part in value.split(",")):
        if not name or name in _imported_plugins:
            continue
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise UsageError(f"{PLUGINS_VARIABLE}: cannot import {name!r} ({error}); each name must be a module "
                             "on PYTHONPATH that registers workloads") from None
        _imported_plugins.add(name)
    _plugins_seen = value


def get(name: str) -> Workload:
    _import_plugins()
    if name not in _WORKLOADS:
        raise UsageError(f"unknown workload {name!r}: choose one of {', '.join(names())}")
    return _WORKLOADS[name]


def names() -> tuple[str, ...]:
    _import_plugins()
    return tuple(sorted(_WORKLOADS))


def all_workloads() -> tuple[Workload, ...]:
    return tuple(_WORKLOADS[name] for name in names())


def size_names() -> tuple[str, ...]:
    """Every size some workload has: full and tiny (every workload has them), then the others (llama's 1b) in the
    registry's order. Which sizes a given workload has, its descriptor says (ModelConfig refuses the others)."""
    others = [size for workload in all_workloads() for size in workload.sizes if size not in SIZES]
    return (*SIZES, *dict.fromkeys(others))


def reader_of(record_kind: str) -> Workload:
    """The first registered workload reading ``record_kind`` with --data (the input benchmark measures a folder's
    pipeline as it feeds that workload): a built-in one before any added later."""
    _import_plugins()
    if record_kind not in _READERS:
        raise UsageError(f"no workload reads {record_kind} records")
    return _WORKLOADS[_READERS[record_kind]]


# The registered workloads, listed explicitly.
from trainbench.workloads import bert, gpt2, llama, resnet50, retinanet, transformer  # noqa: E402, F401
