"""The attention kernel a PyTorch step runs: which backend ``scaled_dot_product_attention`` chose, read from the
aten operation it dispatched to (a ``TorchDispatchMode`` sees the chosen backend, not the SDPA call).

The choice depends on the device, the dtype (autocast's), the mask, dropout and the head size, so it is made on
the plain network with the step's autocast, in training mode: on a GPU flash attention needs fp16 or bf16 and no
explicit mask; on the CPU dropout sends training to the math fallback. A network whose step runs no attention
answers None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

MATH = "math"
# The forward operation each backend dispatches to, in the order kinds are named when several run.
KERNELS: dict[Any, str] = {
    aten._scaled_dot_product_flash_attention.default: "flash",
    aten._flash_attention_forward.default: "flash",
    aten._scaled_dot_product_efficient_attention.default: "memory-efficient",
    aten._efficient_attention_forward.default: "memory-efficient",
    aten._scaled_dot_product_cudnn_attention.default: "cudnn",
    aten._scaled_dot_product_fused_attention_overrideable.default: "fused (overrideable)",
    aten._scaled_dot_product_flash_attention_for_cpu.default: "flash (cpu)",
    # The math fallback decomposes before a dispatch mode sees it: its _safe_softmax is what shows. A plain
    # softmax is attention written out by hand (matmul, softmax, matmul); the losses here take log_softmax.
    aten._scaled_dot_product_attention_math.default: MATH,
    aten._safe_softmax.default: MATH,
    aten._softmax.default: MATH,
}
_ORDER = list(dict.fromkeys(KERNELS.values()))


class _KernelMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.kinds: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if func in KERNELS:
            self.kinds.add(KERNELS[func])
        return func(*args, **(kwargs or {}))


def attention_kernel(run_step: Callable[[], object]) -> str | None:
    """The attention kernels ``run_step()`` ran ("flash", "memory-efficient", "cudnn", "flash (cpu)", "math";
    several joined: "flash, math"), or None when it ran no attention."""
    with _KernelMode() as mode:
        run_step()
    return ", ".join(kind for kind in _ORDER if kind in mode.kinds) or None
