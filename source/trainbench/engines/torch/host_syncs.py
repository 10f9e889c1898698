"""Host syncs of a training step, found on the CPU: the aten operations that make the host wait for the device,
recorded by a ``TorchDispatchMode`` with the Python frames that asked for them.

On a GPU the host queues kernels ahead of the device; an operation whose answer Python needs now (a value read by
``.item()``, ``bool(tensor)`` or ``int(tensor)``, an output whose size depends on the values) stops that queue
until the device has caught up, every step. A CUDA graph cannot capture such a step at all. The same operations run
on the CPU, so a step's syncs are found without a GPU: the tensors' device is not looked at (a CPU tensor here
stands for the GPU's), except for copies to the host, which only a device tensor makes, and ``x[mask] = value``,
which aten runs as masked_fill_ (no sync) when the value is one element on the host: a one-element value that a
GPU run would hold on the device passes here too. What an operation runs inside its kernel is not seen: each
operation counts once.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

_READ = "reads a device value into Python (.item(), bool(), int(), float())"
_SIZED = "its output's size depends on the values (the host reads a count back)"
# The operations that sync whatever their arguments; boolean indexing and copies are judged by their arguments.
SYNCING: Mapping[Any, str] = {
    aten._local_scalar_dense.default: _READ,
    aten.is_nonzero.default: _READ,
    aten.equal.default: "answers a Python bool from two tensors' values",
    aten.allclose.default: "answers a Python bool from two tensors' values",
    aten.nonzero.default: _SIZED,
    aten.masked_select.default: _SIZED,
    aten.repeat_interleave.Tensor: _SIZED,  # unless output_size is given (checked below)
    aten._unique.default: _SIZED,
    aten._unique2.default: _SIZED,
    aten.unique_dim.default: _SIZED,
    aten.unique_consecutive.default: _SIZED,
    aten.bincount.default: "its output's size is the largest value (read back)",
}
_BOOLEAN_INDEX = "boolean-mask indexing (a nonzero inside: its size depends on the values)"
_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
_COPIES = {aten._to_copy.default, aten.copy_.default}

# Frames of these files are how an operation got dispatched, not why: left out of a sync's frames.
_PLUMBING = (os.path.dirname(torch.__file__) + os.sep, __file__)


@dataclass(frozen=True)
class HostSync:
    """One operation that made the host wait: the aten overload, why it syncs, the Python frames that asked for
    it, innermost first, as "path:line in function" (paths from their sys.path entry), and in the backward pass the
    autograd node that ran it (its frames are then only where backward was called)."""

    op: str
    why: str
    frames: tuple[str, ...]
    backward_of: str | None = None  # "IndexBackward0"

    @property
    def where(self) -> str:
        """The line that caused it (the innermost frame outside torch), or the backward node that did."""
        if self.backward_of is not None:
            return f"{self.backward_of} (backward)"
        return self.frames[0] if self.frames else "(no Python frame: inside torch)"

    def __str__(self) -> str:
        return f"{self.op} at {self.where}: {self.why}"


def _reason(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why ``func(*args, **kwargs)`` syncs, or None."""
    if func in SYNCING:
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is not None:
            return None
        return SYNCING[func]
    if func in _INDEXING:
        indices = [index for index in (args[1] if len(args) > 1 else kwargs.get("indices", ())) if index is not None]
        masks = [index for index in indices if isinstance(index, torch.Tensor)
                 and index.dtype in (torch.bool, torch.uint8)]
        if not masks:
            return None
        if func is not aten.index.Tensor and _is_masked_fill(args, kwargs, indices):
            return None
        return _BOOLEAN_INDEX
    if func in _COPIES:
        # A device tensor copied to the host: the copy waits for the device (never on a CPU run).
        source = args[1] if func is aten.copy_.default else args[0]
        target = args[0].device if func is aten.copy_.default else kwargs.get("device")
        if isinstance(source, torch.Tensor) and source.device.type not in ("cpu", "meta") and target is not None:
            return "copies a device tensor to the host" if torch.device(target).type == "cpu" else None
    return None


def _is_masked_fill(args: tuple[Any, ...], kwargs: dict[str, Any], indices: list[Any]) -> bool:
    """Whether index_put runs as masked_fill_, which syncs nothing: ``x[mask] = scalar`` (one mask, a one-element
    host value, no accumulation), as aten's index_put does (canDispatchToMaskedFill)."""
    value = args[2] if len(args) > 2 else kwargs.get("values")
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    return (len(indices) == 1 and not accumulate and isinstance(value, torch.Tensor) and value.numel() == 1
            and value.device.type == "cpu")


def _short(path: str) -> str:
    """``path`` from the longest sys.path entry holding it (transformers/masking_utils.py, trainbench/...)."""
    roots = sorted((os.path.join(os.path.abspath(root), "") for root in sys.path if root), key=len, reverse=True)
    for root in roots:
        if path.startswith(root):
            return path[len(root):]
    return path


def _frames() -> tuple[str, ...]:
    stack = traceback.extract_stack()
    return tuple(f"{_short(frame.filename)}:{frame.lineno} in {frame.name}" for frame in reversed(stack)
                 if not frame.filename.startswith(_PLUMBING))


class HostSyncMode(TorchDispatchMode):
    """Records every operation that syncs (``syncs``) while active; runs every operation as it would run."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[HostSync] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        why = _reason(func, args, kwargs)
        if why is not None:
            node = torch._C._current_autograd_node()  # None outside the backward pass
            self.syncs.append(HostSync(str(func), why, _frames(), None if node is None else node.name()))
        return func(*args, **kwargs)


def host_syncs(run: Callable[[], object]) -> list[HostSync]:
    """The host syncs of ``run()``, in the order they happened."""
    with HostSyncMode() as mode:
        run()
    return mode.syncs


def describe(syncs: list[HostSync]) -> str:
    """One line per distinct (operation, line) with how many times it ran: a report for people."""
    counts: dict[str, int] = {}
    for sync in syncs:
        counts[str(sync)] = counts.get(str(sync), 0) + 1
    return "\n".join(f"{count} x {line}" for line, count in counts.items()) or "no host sync"
