"""What the harness must know about each framework, readable without importing it: one static record each.

A record here, not attributes of the loaded engine: the sweep, the launcher, the profiler session and the command
line read it in processes that must not import the framework (TensorFlow alone takes seconds to import, and a
torchrun parent or a TensorFlow process must not load the other framework). Each engine points at its record
(``Engine.capabilities``), and the contract test checks that they agree, so a framework's facts are written once.
Outside ``trainbench.engines`` code asks the record, never compares the framework's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from trainbench.config import FRAMEWORKS, Framework, LaunchConfig, Loader, check_choice
from trainbench.engines.input_batches import (
    BeforeInput,
    InputBatches,
    nothing_before_input,
    tf_batches,
    tf_before_input,
    torch_batches,
)
from trainbench.engines.launchers import no_launcher, torchrun

# How a process reaches cudaProfilerStart/Stop and NVTX (trainbench.profile.markers): through the framework's own
# API, or through the CUDA runtime library with ctypes when the framework exposes neither.
MarkersApi = Literal["torch.cuda", "cuda_runtime"]
# (launch, a name part telling a job's launches apart) -> the command that runs a module (named next) once per
# process of the launch, or None when one plain process runs it.
Launcher = Callable[[LaunchConfig, str], list[str] | None]


@dataclass(frozen=True)
class Capabilities:
    framework: Framework
    drives_every_gpu: bool  # one process computes on every GPU it sees (else one process per GPU, its local rank's)
    launcher: Launcher  # how several processes of it are started
    markers: MarkersApi  # how its processes tell an external profiler where the window is
    loaders: tuple[Loader, ...]  # the --loader choices its input pipeline offers
    input_batches: InputBatches  # its training input pipeline alone, every record kind (bench.input_bench)
    before_input: BeforeInput  # what its process sets up before that pipeline runs alone (bench.worker.input_rate)


TENSORFLOW = Capabilities(
    "tf",
    drives_every_gpu=True,  # MirroredStrategy; across nodes one process per node (MultiWorkerMirroredStrategy)
    launcher=no_launcher,  # the user's srun starts a node's one process; it finds the others itself
    markers="cuda_runtime",
    loaders=("cpu",),  # tf.data only
    input_batches=tf_batches,
    before_input=tf_before_input,  # a worker of several makes MultiWorkerMirroredStrategy before tf.data runs
)
TORCH = Capabilities(
    "torch",
    drives_every_gpu=False,  # DistributedDataParallel: a process per GPU
    launcher=torchrun,
    markers="torch.cuda",
    loaders=("cpu", "gpu"),
    input_batches=torch_batches,
    before_input=nothing_before_input,  # torch_batches itself picks this process's GPU
)
_BY_FRAMEWORK: dict[str, Capabilities] = {capabilities.framework: capabilities for capabilities in (TENSORFLOW, TORCH)}


def capabilities_of(framework: str) -> Capabilities:
    """The record of ``framework`` (as --framework spells it); an unknown name is a UsageError."""
    check_choice("framework", framework, FRAMEWORKS)
    return _BY_FRAMEWORK[framework]
