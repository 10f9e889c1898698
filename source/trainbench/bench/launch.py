"""How a worker is started: one Python process, or the engine's launcher starting one process per GPU.

Which launcher, if any, is the engine's to say (``Capabilities.launcher``, in ``trainbench.engines``): PyTorch
runs one process per GPU under torchrun; TensorFlow's one process per node drives the node's GPUs and needs none
(across nodes the user's ``srun`` starts them, scripts/slurm/). Where a started process sits among the others
(its rank) is read by ``trainbench.engines.launchers.process_place``, below this layer, as the engines need it too.
"""

from __future__ import annotations

import os
import sys

from trainbench.config import BenchConfig, LaunchConfig
from trainbench.engines.launchers import launcher_command as engine_launcher
from trainbench.telemetry.nvml import visible_gpu_count


def launcher_command(config: BenchConfig, part: str = "") -> list[str] | None:
    """The engine's command that starts ``config``'s processes (a module name follows), or None for one plain
    process. ``part`` tells apart the launches of one job."""
    return engine_launcher(config.model.framework, config.launch, part)


def under_launcher(config: BenchConfig) -> bool:
    """Whether the worker is started by the engine's launcher (PyTorch with several processes, or --torchrun): its
    processes write a result each. TensorFlow's worker is one process per node whatever the world."""
    return launcher_command(config) is not None


def worker_command(config: BenchConfig, module: str) -> list[str]:
    """The command that runs ``python -m <module>`` for ``config``: under the engine's launcher when it measures
    with several processes. (Its arguments follow.)"""
    launcher = launcher_command(config, f"-batch{config.batch_size}")
    return [*launcher, module] if launcher else [sys.executable, "-m", module]


def local_process_problem(launch: LaunchConfig, device: str) -> str | None:
    """Why this node should not start the launch's processes: one per GPU at most, and on the CPU no more than the
    cores this process may use (more would only share them, and a typo such as --gpus 1000 would exhaust memory)."""
    processes = launch.processes_per_node
    if processes == 1:
        return None
    if device == "cuda" and processes > (visible := visible_gpu_count()):
        return f"this node shows {visible} GPU(s) to CUDA"
    if device != "cuda" and processes > (cores := len(os.sched_getaffinity(0))):
        return f"more processes than the {cores} core(s) this process may use (a CPU run)"
    return None
