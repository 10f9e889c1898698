"""What the suite benchmarks: one descriptor per workload, registered by name, importing no framework.

The bottom layer beside ``config``: a descriptor says what a workload is (category, what one sample is, its shape
settings and sizes, which frameworks implement it and with which reference implementation) so that the command
line, campaigns and the report can ask about it without loading TensorFlow or torch. Names are registered once
(a second registration is an error, as tf-models' ``registry.register`` refuses one) and looked up by name (an
unknown name is a one-line UsageError listing the known ones, as timm's ``create_model`` refuses one).

Descriptors register themselves when this package is imported, from the explicit list at the bottom: a module
that is not listed is not a workload, instead of a scan that would skip a broken one in silence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainbench.errors import UsageError


@dataclass(frozen=True)
class Param:
    """One shape setting of a workload: its default and bounds, and what it means."""

    default: int
    minimum: int
    maximum: int
    help: str


@dataclass(frozen=True)
class Workload:
    name: str  # the registry key: what a user types, and summary.json's "workload"
    title: str  # "ResNet-50": titles of plots and report sections
    category: str  # "image classification"
    sample_unit: str  # what one sample is ("image", "sequence"): the unit of samples_per_sec
    params: Mapping[str, Param]  # the shape settings a user may set (image_size, seq_len, ...)
    sizes: Mapping[str, str]  # size name -> what it is ("full": the published network)
    references: Mapping[str, str]  # framework -> the reference implementation built for it
    tokens_param: str | None = None  # the param whose value is tokens per sample (seq_len); None: no tokens/s
    unsupported: Mapping[str, str] = field(default_factory=dict)  # setting -> why it does not apply

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(self.references)


_WORKLOADS: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    if workload.name in _WORKLOADS:
        raise ValueError(f"workload {workload.name!r} registered twice")
    _WORKLOADS[workload.name] = workload
    return workload


def get(name: str) -> Workload:
    if name not in _WORKLOADS:
        raise UsageError(f"unknown workload {name!r}: choose one of {', '.join(names())}")
    return _WORKLOADS[name]


def names() -> tuple[str, ...]:
    return tuple(sorted(_WORKLOADS))


def all_workloads() -> tuple[Workload, ...]:
    return tuple(_WORKLOADS[name] for name in names())


from trainbench.workloads import resnet50  # noqa: E402, F401  the registered workloads, listed explicitly
