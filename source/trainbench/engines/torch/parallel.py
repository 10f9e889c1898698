"""How a PyTorch step is spread over processes and memory: the process group a torchrun worker joins, the model
held as replicas (DistributedDataParallel) or as shards (FSDP2's ``fully_shard``), and activation checkpointing.

Both FSDP and checkpointing work per block (``TorchBuilder.blocks``: a transformer's layers), as torchtitan applies
them to Llama: each block checkpointed (``checkpoint_wrapper``, non-reentrant: its forward runs again in the
backward pass, keeping only its input), then each block sharded (its parameters gathered for its forward and again
for its backward, its gradients reduce-scattered), then the root for what is left (embeddings, heads, norms).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

from trainbench.config import ModelConfig
from trainbench.engines.launchers import process_place
from trainbench.engines.torch.memory import local
from trainbench.engines.torch.workloads import TorchBuilder

COLLECTIVE_TIMEOUT = dt.timedelta(minutes=10)  # a rank that died or hangs fails the others' collectives, not forever


def join_world(device: str) -> tuple[str, bool]:
    """Under torchrun (even with one process: ``--torchrun``): this process's device (its LOCAL_RANK-th GPU) in the
    process group (NCCL on GPUs, gloo on the CPU), and True; started alone: the device as it is, and False."""
    place = process_place()
    if place.world_size <= 1 and "TORCHELASTIC_RUN_ID" not in os.environ:
        return device, False
    cuda = torch.device(device).type == "cuda"
    if cuda:
        device = f"cuda:{place.local_rank}"
        torch.cuda.set_device(device)
    if not torch.distributed.is_initialized():
        # device_id: barrier() and NCCL's communicator use this GPU, and say so, rather than guess the current one.
        torch.distributed.init_process_group(backend="nccl" if cuda else "gloo", timeout=COLLECTIVE_TIMEOUT,
                                             device_id=torch.device(device) if cuda else None)
        atexit.register(leave_world)
    return device, True


def leave_world() -> None:
    """At the worker's exit: the process group torn down before the interpreter's (torch warns without it, and a
    peer can wait on a communicator left alive). A group already gone, or failing to close, ends nothing."""
    if torch.distributed.is_initialized():
        with contextlib.suppress(Exception):
            torch.distributed.destroy_process_group()


def world_record() -> dict[str, Any] | None:
    """The process group this process measured in, for env.json (None alone)."""
    if not torch.distributed.is_initialized():
        return None
    return {"backend": torch.distributed.get_backend(), "world_size": torch.distributed.get_world_size(),
            "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            "nodes": int(os.environ.get("GROUP_WORLD_SIZE", "1"))}


def recompute_blocks(builder: TorchBuilder, network: nn.Module, model: ModelConfig) -> bool:
    """``--activation-checkpointing full``: every block of ``network`` replaced in place by itself checkpointed
    (its parameters' names unchanged: the wrapper strips its own prefix from state dicts); whether it was."""
    if model.activation_checkpointing != "full":
        return False
    for blocks in builder.blocks(network):
        for index, block in enumerate(blocks):
            blocks[index] = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    return True


def distributed(network: nn.Module, builder: TorchBuilder, model: ModelConfig, device: str) -> nn.Module:
    """The module the step calls under a process group: ``network`` in DistributedDataParallel (a replica here,
    gradients all-reduced), or ``network`` itself sharded in place (``--shard fsdp``)."""
    if model.shard == "ddp":
        cuda = torch.device(device).type == "cuda"
        return nn.parallel.DistributedDataParallel(network, device_ids=[device] if cuda else None)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # bf16: parameters gathered in bf16 and gradients reduced in fp32, as torchtitan's default; the step's autocast
    # stays, so the operations it keeps in fp32 (softmax, norms, the loss) are fp32 as under DDP.
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if model.precision == "bf16" else MixedPrecisionPolicy())
    for blocks in builder.blocks(network):
        for block in blocks:
            fully_shard(block, mp_policy=policy)
    fully_shard(network, mp_policy=policy)
    return network


def held_parameters(network: nn.Module) -> int:
    """Trainable parameters this process holds: its shards under FSDP, every parameter otherwise."""
    return sum(local(parameter).numel() for parameter in network.parameters() if parameter.requires_grad)
