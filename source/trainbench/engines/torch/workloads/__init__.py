"""The PyTorch builders of the registered workloads: one module per workload defining ``BUILDER`` (an
``engines.builders.WorkloadBuilder``), named by the descriptor's ``builders["torch"]`` and imported only by the torch
engine, so a descriptor never loads torch.

A builder brings what is about the network: the module at the descriptor's dims, one synthetic batch, the loss.
The engine keeps precision (autocast, GradScaler), torch.compile, CUDA graphs, DDP and synchronisation.
"""

from __future__ import annotations

import torch


def generator(device: torch.device | str, seed: int) -> torch.Generator | None:
    """A generator on the device seeded with ``seed``; None on the meta device, which has none (shapes only:
    parameter and FLOP counts of the full sizes without allocating them)."""
    if torch.device(device).type == "meta":
        return None
    return torch.Generator(device=device).manual_seed(seed)
