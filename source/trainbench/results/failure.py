"""Why a batch size failed: one out-of-memory classifier for both frameworks and the sweep, and one-line messages.

Framework-free on purpose: the worker, the sweep (which sees only a dead worker's log) and both engines classify
with the same rules, so a batch size that does not fit is ``oom`` whichever process noticed it.
"""

from __future__ import annotations

from trainbench.results.records import Status

# Exception classes that are allocation failures, by name so no framework is imported: Python's own, torch's
# (torch.OutOfMemoryError, also torch.cuda.OutOfMemoryError) and TensorFlow's (tf.errors.ResourceExhaustedError).
OOM_TYPES = frozenset({"MemoryError", "OutOfMemoryError", "ResourceExhaustedError"})
# Messages by which frameworks, CUDA libraries and the C library report an allocation failure (host or device).
# Host failures reach Python as plain RuntimeErrors in torch; only the message tells them apart.
OOM_MARKERS = (
    "out of memory",  # torch (CUDA and CPU), CUDA_ERROR_OUT_OF_MEMORY's text, cudaErrorMemoryAllocation's
    "OOM when allocating",  # TensorFlow
    "ResourceExhaustedError",  # TensorFlow, in a dead worker's traceback
    "failed to allocate",  # TensorFlow's BFC allocator, XLA scratch space
    "can't allocate memory",  # torch's DefaultCPUAllocator
    "not enough memory",  # torch on some allocators
    "CUDA_ERROR_OUT_OF_MEMORY",
    "CUBLAS_STATUS_ALLOC_FAILED",  # cuBLAS cannot get its workspace when the GPU is full
    "std::bad_alloc",  # C++ allocation failure
    "MemoryError",  # Python's, in a traceback
)
_LOWERED = tuple(marker.lower() for marker in OOM_MARKERS)


def says_out_of_memory(text: str) -> bool:
    """True when ``text`` (a message, a log) names an allocation failure."""
    lowered = text.lower()
    return any(marker in lowered for marker in _LOWERED)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and what caused it (``raise ... from``) or was being handled when it was raised, once each."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_oom_type(error: BaseException) -> bool:
    return any(cls.__name__ in OOM_TYPES for cls in type(error).__mro__)


def is_out_of_memory(error: BaseException) -> bool:
    """True when ``error``, or anything in its cause chain, is an allocation failure (host or device)."""
    if isinstance(error, KeyboardInterrupt | SystemExit):
        return False
    return any(_is_oom_type(link) or says_out_of_memory(str(link)) for link in _chain(error))


class DivergedError(Exception):
    """A timed step's loss was not finite, or fp16's loss scaler skipped a timed step: the window timed steps that
    did not train (a skipped update is cheaper), so its rate is no result."""


def failure_status(error: BaseException) -> Status:
    """The status recorded for a batch size that raised ``error``."""
    if isinstance(error, DivergedError):
        return Status.DIVERGED
    return Status.OOM if is_out_of_memory(error) else Status.ERROR


def one_line(error: BaseException) -> str:
    """The error as one line: its type and the first non-empty line of its message, cut at 300 characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text[:300]
