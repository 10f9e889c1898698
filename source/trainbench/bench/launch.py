"""How a worker is started: one Python process, or a torchrun launch of one process per GPU (PyTorch).

TensorFlow needs no launcher: one process drives a node's GPUs (MirroredStrategy), and across nodes one process
per node joins the others through TF_CONFIG or Slurm's environment (MultiWorkerMirroredStrategy), started by the
user's ``srun`` (scripts/slurm/). PyTorch runs one process per GPU: torchrun (``torch.distributed.run``) starts
them on this node, ``--standalone`` alone or through a c10d rendezvous with the other nodes. When one process fails,
torchrun ends the others, so a rank out of memory fails its batch size instead of hanging the sweep.
"""

from __future__ import annotations

import os
import sys

from trainbench.config import BenchConfig, LaunchConfig
from trainbench.telemetry.nvml import visible_gpu_count

TORCHRUN = "torch.distributed.run"


def torchrun_options(launch: LaunchConfig, part: str = "") -> list[str]:
    """torchrun's options for ``launch``: this node's processes and how the nodes meet. ``part`` tells apart the
    launches of one job (a sweep's batch sizes), so a node late to one rendezvous never joins the next."""
    options = [f"--nproc-per-node={launch.processes_per_node}", f"--nnodes={launch.nodes}"]
    if launch.nodes == 1 and launch.rdzv_endpoint is None:
        return [*options, "--standalone"]  # a rendezvous of this node alone, on a free port
    rendezvous_id = (launch.rdzv_id or os.environ.get("SLURM_JOB_ID") or "trainbench") + part
    return [*options, "--rdzv-backend=c10d", f"--rdzv-endpoint={launch.rdzv_endpoint}", f"--rdzv-id={rendezvous_id}"]


def under_torchrun(config: BenchConfig) -> bool:
    """Whether the worker is a torchrun launch (PyTorch with several processes, or --torchrun): its processes
    write a result each. TensorFlow's worker is one process per node whatever the world."""
    return config.model.framework == "torch" and (config.launch.distributed or config.launch.torchrun)


def worker_command(config: BenchConfig, module: str) -> list[str]:
    """The command that runs ``python -m <module>`` for ``config``: under torchrun when PyTorch measures with
    several processes. (Its arguments follow.)"""
    if under_torchrun(config):
        options = torchrun_options(config.launch, f"-batch{config.batch_size}")
        return [sys.executable, "-m", TORCHRUN, *options, "--module", module]
    return [sys.executable, "-m", module]


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
