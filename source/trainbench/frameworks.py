"""What the harness must know about each framework, as plain data: one record each, importing nothing.

The bottom layer, beside ``errors``: the settings' rules (``config``), the sweep, the launcher, the profiler session
and the command line read it in processes that must not import the framework (TensorFlow alone takes seconds to
import, and a torchrun parent or a TensorFlow process must not load the other framework). Each engine points at its
record (``Engine.capabilities``) and the contract test checks that they agree, so a framework's facts are written
once. Outside ``trainbench.engines`` code asks the record, never compares the framework's name (a test scans for
such a comparison). What a record names (its launcher, its input pipeline) the engines layer resolves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from trainbench.errors import UsageError

Framework = Literal["tf", "torch"]
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)
Loader = Literal["cpu", "gpu"]  # PyTorch with --data: decode and augment in CPU workers, or on the GPU
# How a process reaches cudaProfilerStart/Stop and NVTX (trainbench.profile.markers): through the framework's own
# API, or through the CUDA runtime library with ctypes when the framework exposes neither.
MarkersApi = Literal["torch.cuda", "cuda_runtime"]
# The launcher that starts several processes of a framework on a node (engines.launchers resolves the name); None:
# its one process per node drives every GPU there.
LauncherName = Literal["torchrun"]


@dataclass(frozen=True)
class Capabilities:
    framework: Framework
    title: str  # "PyTorch": how messages name it
    drives_every_gpu: bool  # one process computes on every GPU it sees (else one process per GPU, its local rank's)
    multi_gpu: str  # what spreads its step over GPUs, as messages name it ("MirroredStrategy")
    launcher: LauncherName | None  # what starts several processes of it on a node
    markers: MarkersApi  # how its processes tell an external profiler where the window is
    loaders: tuple[Loader, ...]  # the --loader choices its input pipeline offers
    input_pipeline: str  # its training input pipeline, as messages name it ("tf.data")
    reads_image_folders: bool  # whether its pipeline reads a folder tree of images (else TFRecord shards only)


TENSORFLOW = Capabilities(
    "tf", title="TensorFlow",
    drives_every_gpu=True,  # across nodes one process per node (MultiWorkerMirroredStrategy), started by srun
    multi_gpu="MirroredStrategy",
    launcher=None,  # the user's srun starts a node's one process; it finds the others itself
    markers="cuda_runtime",
    loaders=("cpu",),
    input_pipeline="tf.data",
    reads_image_folders=False,
)
TORCH = Capabilities(
    "torch", title="PyTorch",
    drives_every_gpu=False,
    multi_gpu="DistributedDataParallel",  # a process per GPU
    launcher="torchrun",
    markers="torch.cuda",
    loaders=("cpu", "gpu"),
    input_pipeline="DataLoader",
    reads_image_folders=True,
)
_BY_FRAMEWORK: dict[str, Capabilities] = {capabilities.framework: capabilities for capabilities in (TENSORFLOW, TORCH)}


def capabilities_of(framework: str) -> Capabilities:
    """The record of ``framework`` (as --framework spells it); an unknown name is a one-line UsageError."""
    if not (isinstance(framework, str) and framework in _BY_FRAMEWORK):
        raise UsageError(f"unknown framework {framework!r}: choose one of {', '.join(FRAMEWORKS)}")
    return _BY_FRAMEWORK[framework]


def owner_of(loader: str) -> Capabilities:
    """The first framework offering ``loader`` (messages name it when another framework is asked for it)."""
    return next(capabilities for capabilities in _BY_FRAMEWORK.values() if loader in capabilities.loaders)
