"""Training FLOPs of one step, counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix products,
convolutions and attention; a multiply-add counts 2; element-wise work is not counted)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils import flop_counter

from trainbench.engines.torch.workloads import Batch, TorchBuilder

aten = torch.ops.aten
# PyTorch counts the GPU kernels of scaled_dot_product_attention but not the CPU's: the same formulas apply. The
# registry holds them wrapped for its own call (out_shape given), and custom_mapping wraps again: the bare formula.
CPU_ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu:
        flop_counter.flop_registry[aten._scaled_dot_product_flash_attention].__wrapped__,
    aten._scaled_dot_product_flash_attention_for_cpu_backward:
        flop_counter.flop_registry[aten._scaled_dot_product_flash_attention_backward].__wrapped__,
}


# The fused attention kernels' backward passes (flash, memory-efficient, cuDNN, the CPU's flash) compute the
# attention scores again, one product of the five PyTorch counts for them, all of one size; the math kernel keeps the
# scores and runs four. The count here is the model's (PaLM's 12·layers·hidden·seq_len per token for attention),
# the same whichever kernel ran: a fused backward's count less its fifth. A kernel's own recomputation is how it
# runs, as a checkpointed block's is (hardware_flops_per_sample counts neither the kernel's).
FUSED_ATTENTION_BACKWARD = (
    aten._scaled_dot_product_flash_attention_backward, aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward, aten._flash_attention_backward,
    aten._efficient_attention_backward, aten._scaled_dot_product_flash_attention_for_cpu_backward,
)
SCORE_PRODUCTS_OF_FUSED_BACKWARD = 5


def count_step_flops(loss: Callable[[], torch.Tensor]) -> int:
    """The model's FLOPs of ``loss()`` and its backward pass (attention's backward as its math: see above)."""
    with flop_counter.FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION) as counter:
        loss().backward()
    counts = counter.get_flop_counts()["Global"]
    recomputed = sum(counts.get(op, 0) for op in FUSED_ATTENTION_BACKWARD) // SCORE_PRODUCTS_OF_FUSED_BACKWARD
    return counter.get_total_flops() - recomputed


@contextlib.contextmanager
def untouched(network: nn.Module) -> Iterator[None]:
    """Run a probe step (a count, a measurement) on ``network`` and leave its state as it was: gradients dropped,
    buffers (batch-norm statistics) and the random generators restored, so the steps that follow are the ones they
    would have been."""
    buffers = [(buffer, buffer.detach().clone()) for buffer in network.buffers()]
    devices = sorted({parameter.device for parameter in network.parameters() if parameter.device.type == "cuda"},
                     key=str)
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        network.zero_grad(set_to_none=True)
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)


def train_flops_per_sample(builder: TorchBuilder, network: nn.Module, batch: Batch, batch_size: int,
                           smoothing: float, autocast: Callable[[], Any]) -> tuple[float | None, str]:
    """One training step's forward and backward FLOPs over the batch, per sample, and how they were counted; the
    network's state is left ``untouched``. The optimizer update is not counted (a few operations per parameter, not
    per sample)."""

    def loss() -> torch.Tensor:
        with autocast():
            return builder.loss(network, batch, smoothing)

    try:
        with untouched(network):
            flops = count_step_flops(loss)
    except (RuntimeError, NotImplementedError, TypeError) as error:  # an operation the counter cannot follow
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return None, f"FlopCounterMode failed: {type(error).__name__}: {first}"[:300]
    if flops <= 0:
        return None, f"FlopCounterMode counted nothing at batch {batch_size}"
    return flops / batch_size, f"FlopCounterMode, one step (forward and backward) at batch {batch_size}"
