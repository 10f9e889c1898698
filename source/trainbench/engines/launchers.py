"""The launchers an engine can run under, framework-free: the command that starts several processes, and where
each started process sits among them (from the environment the launcher gives it).

PyTorch runs one process per GPU: torchrun (``torch.distributed.run``) starts them on this node, ``--standalone``
alone or through a c10d rendezvous with the other nodes. When one process fails, torchrun ends the others, so a
rank out of memory fails its batch size instead of hanging the sweep. Nothing here imports torch: the sweep and the
command line build the launch in processes that never train.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import NamedTuple

from trainbench.config import LaunchConfig
from trainbench.frameworks import LauncherName, capabilities_of

TORCHRUN = "torch.distributed.run"


def torchrun_options(launch: LaunchConfig, part: str = "") -> list[str]:
    """torchrun's options for ``launch``: this node's processes and how the nodes meet. ``part`` tells apart the
    launches of one job (a sweep's batch sizes), so a node late to one rendezvous never joins the next."""
    options = [f"--nproc-per-node={launch.processes_per_node}", f"--nnodes={launch.nodes}"]
    if launch.nodes == 1 and launch.rdzv_endpoint is None:
        return [*options, "--standalone"]  # a rendezvous of this node alone, on a free port
    rendezvous_id = (launch.rdzv_id or os.environ.get("SLURM_JOB_ID") or "trainbench") + part
    return [*options, "--rdzv-backend=c10d", f"--rdzv-endpoint={launch.rdzv_endpoint}", f"--rdzv-id={rendezvous_id}"]


def torchrun(launch: LaunchConfig, part: str = "") -> list[str] | None:
    """The torchrun command that runs a Python module (its name and arguments follow) once per process of
    ``launch``; None when one plain process runs it (one process and no --torchrun)."""
    if not (launch.distributed or launch.torchrun):
        return None
    return [sys.executable, "-m", TORCHRUN, *torchrun_options(launch, part), "--module"]


def launcher_command(framework: str, launch: LaunchConfig, part: str = "") -> list[str] | None:
    """The command of ``framework``'s launcher (``Capabilities.launcher``) that runs a module once per process of
    ``launch``, or None for one plain process (always, for a framework whose one process per node drives every GPU
    of it: TensorFlow, whose processes across nodes the user's srun starts)."""
    named = capabilities_of(framework).launcher
    return None if named is None else _LAUNCHERS[named](launch, part)


_LAUNCHERS: dict[LauncherName, Callable[[LaunchConfig, str], list[str] | None]] = {"torchrun": torchrun}


class ProcessPlace(NamedTuple):
    """Where this process sits in a launch of several (its rank among all, its rank on this node, how many)."""

    rank: int
    local_rank: int
    world_size: int

    @property
    def ranked(self) -> bool:
        """One process of several: it writes files of its own (rank 0 included)."""
        return self.world_size > 1


def process_place(environ: Mapping[str, str] | None = None) -> ProcessPlace:
    """RANK, LOCAL_RANK and WORLD_SIZE as torchrun (torch.distributed's env:// convention) sets them; a process
    started alone is rank 0 of 1."""
    environ = os.environ if environ is None else environ
    return ProcessPlace(int(environ.get("RANK", "0")), int(environ.get("LOCAL_RANK", "0")),
                        int(environ.get("WORLD_SIZE", "1")))
