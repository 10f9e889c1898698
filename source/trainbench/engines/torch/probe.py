"""One eager training step of the plain network (no compile, no DDP, no graph), run once per batch size outside
every window and left ``untouched``: what its forward pass keeps for the backward pass (``memory``), the attention
kernel it ran (``attention``) and every read of a device value by the host (``host_syncs``), all in one pass.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainbench.engines.torch.attention import attention_kernel
from trainbench.engines.torch.host_syncs import HostSync, host_syncs
from trainbench.engines.torch.memory import activation_bytes
from trainbench.engines.torch.workloads import Batch, TorchBuilder


@dataclass(frozen=True)
class StepProbe:
    activation_bytes: int  # what the backward pass keeps, parameters left out
    attention_kernel: str | None  # the scaled_dot_product_attention backends it ran; None: no attention
    host_syncs: list[HostSync]  # each time the host waited to read a device value, forward and backward


def probe_step(builder: TorchBuilder, network: nn.Module, batch: Batch, smoothing: float,
               autocast: Callable[[], AbstractContextManager[Any]]) -> StepProbe:
    """Forward, loss and backward of one training step as the engine runs it (``builder.loss`` under the step's
    ``autocast``, training mode; no update), watched three ways; the network's state is left as it was."""

    def loss() -> torch.Tensor:
        with autocast():
            return builder.loss(network, batch, smoothing)

    kept: list[int] = []
    syncs: list[HostSync] = []

    def watched() -> None:
        syncs.extend(host_syncs(lambda: kept.append(activation_bytes(network, loss))))

    kernel = attention_kernel(watched)
    return StepProbe(kept[0], kernel, syncs)
