"""What a PyTorch training step holds in memory, by holder: parameters, gradients, the optimizer's state, and the
activations the forward pass keeps for the backward pass (measured with saved-tensor hooks on one probe step).

Bytes are counted by storage, each once: a view (a transposed weight saved for a matrix product's backward) adds
nothing to the storage it views, and a parameter saved for the backward pass is the parameter's memory, not an
activation's. Under FSDP a process holds its shard of each parameter, gradient and state tensor (``local``). A
checkpointed block (``--activation-checkpointing full``) keeps its inputs alone: PyTorch's non-reentrant checkpoint
saves them for the backward pass outside its own saved-tensor hooks, so the hooks here count them, and nothing the
block's forward saves (the checkpoint's hooks, innermost, drop that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trainbench.engines.torch.workloads.flops import untouched


def local(tensor: torch.Tensor) -> torch.Tensor:
    """What this process holds of ``tensor``: its shard of a sharded (FSDP) one, else all of it."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """The bytes of the distinct storages under ``tensors`` (this process's shards of sharded ones)."""
    storages = {}
    for tensor in tensors:
        storage = local(tensor).untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def _trainable(network: nn.Module) -> list[nn.Parameter]:
    return [parameter for parameter in network.parameters() if parameter.requires_grad]  # each shared one once


def parameter_bytes(network: nn.Module) -> int:
    return _storage_bytes(_trainable(network))


def gradient_bytes(network: nn.Module) -> int:
    """The gradients the last step left (set to None at each step's start, filled by its backward pass)."""
    return _storage_bytes(p.grad for p in _trainable(network) if p.grad is not None)


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> tuple[int, int]:
    """(everything the optimizer holds, its per-parameter state alone): a state tensor of its parameter's shape is
    per-parameter state (momentum, Adam's moments); the others are counters (Adam's step)."""
    every, per_parameter = [], []
    for parameter, state in optimizer.state.items():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                every.append(value)
                if value.shape == parameter.shape:
                    per_parameter.append(value)
    return _storage_bytes(every), _storage_bytes(per_parameter)


def activation_bytes(network: nn.Module, loss: Callable[[], torch.Tensor]) -> int:
    """The bytes of what ``loss()``'s forward pass saves for its backward pass, parameters left out, measured on
    one probe step that leaves the network ``untouched``."""
    parameters = {local(p).untyped_storage().data_ptr() for p in network.parameters()}
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> Any:
        # A parameter FSDP gathered for the forward is a parameter of the module then, not one of the shards.
        if tensor.untyped_storage().data_ptr() not in parameters and not isinstance(tensor, nn.Parameter):
            saved.append(tensor)
        return tensor

    with untouched(network):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            result = loss()
        result.backward()  # frees what was saved, as a step would
        return _storage_bytes(saved)
