"""The CUDA profiler start/stop API and NVTX ranges, as the external profilers see them.

ncu (``--profile-from-start off``), nsys (``--capture-range=cudaProfilerApi``) and nvprof
(``--profile-from-start off``) record only between ``cudaProfilerStart`` and ``cudaProfilerStop``; NVTX ranges name
the steps on nsys' timeline. PyTorch exposes both; TensorFlow does not, so for it the CUDA runtime and the NVTX
library are called through ctypes.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from collections.abc import Callable
from typing import Protocol

from trainbench.frameworks import MarkersApi


class Markers(Protocol):
    def start_capture(self) -> None:
        """cudaProfilerStart: external profilers begin recording here."""

    def stop_capture(self) -> None:
        """cudaProfilerStop."""

    def push_range(self, name: str) -> None:
        """Open a nested NVTX range."""

    def pop_range(self) -> None:
        """Close the innermost NVTX range."""


class NoMarkers:
    """On the CPU there is no CUDA profiler to tell."""

    def start_capture(self) -> None:
        pass

    def stop_capture(self) -> None:
        pass

    def push_range(self, name: str) -> None:
        pass

    def pop_range(self) -> None:
        pass


class TorchMarkers:
    def __init__(self) -> None:
        import torch

        self._profiler = torch.cuda.profiler
        self._nvtx = torch.cuda.nvtx

    def start_capture(self) -> None:
        self._profiler.start()

    def stop_capture(self) -> None:
        self._profiler.stop()

    def push_range(self, name: str) -> None:
        self._nvtx.range_push(name)

    def pop_range(self) -> None:
        self._nvtx.range_pop()


# sonames of the CUDA runtime, newest first; TensorFlow 2.20 loads the CUDA 12 one from its pip packages.
CUDART_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")
# NVTX 2's library, else the NVTX 3 interop library that torch's nvidia-nvtx dependency installs (same entry points).
NVTX_NAMES = ("libnvToolsExt.so.1", "libnvToolsExt.so", "libnvtx3interop.so.1")


def _pip_library_dirs() -> list[str]:
    """lib folders of NVIDIA's pip packages (nvidia-cuda-runtime-cu12, nvidia-nvtx-cu12), which are not on the
    loader's search path."""
    dirs: list[str] = []
    for entry in sys.path:
        dirs.extend(glob.glob(os.path.join(entry, "nvidia", "*", "lib")))
    return dirs


def loaded_library(stem: str) -> str | None:
    """The path of a library ``stem.so*`` already mapped into this process: the framework's own CUDA runtime,
    which is the one whose context the profiler must be told about."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return None
    return next((path for path in sorted(paths) if os.path.basename(path).startswith(f"{stem}.so")), None)


def load_library(names: tuple[str, ...], stem: str = "") -> ctypes.CDLL | None:
    """The copy of ``stem`` already loaded, else the first of ``names`` that loads from the loader's path or
    NVIDIA's pip packages; None if none does."""
    loaded = loaded_library(stem) if stem else None
    candidates = ([loaded] if loaded else []) + list(names)
    candidates += [os.path.join(d, name) for d in _pip_library_dirs() for name in names]
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


class CudaRuntimeMarkers:
    """The same calls through ctypes, for frameworks that do not expose them (TensorFlow)."""

    def __init__(self) -> None:
        cudart = load_library(CUDART_NAMES, stem="libcudart")
        if cudart is None:
            raise RuntimeError(f"no CUDA runtime library found ({', '.join(CUDART_NAMES)})")
        self._cudart = cudart
        self._nvtx = load_library(NVTX_NAMES)
        if self._nvtx is None:
            print(f"profile: no NVTX library ({', '.join(NVTX_NAMES)}; pip install nvidia-nvtx): steps are not "
                  "named on the timeline", flush=True)

    def start_capture(self) -> None:
        self._check(self._cudart.cudaProfilerStart(), "cudaProfilerStart")

    def stop_capture(self) -> None:
        self._check(self._cudart.cudaProfilerStop(), "cudaProfilerStop")

    def push_range(self, name: str) -> None:
        if self._nvtx is not None:
            self._nvtx.nvtxRangePushA(name.encode())

    def pop_range(self) -> None:
        if self._nvtx is not None:
            self._nvtx.nvtxRangePop()

    @staticmethod
    def _check(status: int, call: str) -> None:
        if status != 0:
            raise RuntimeError(f"{call} returned CUDA error {status}")


# By the API the engine declares (``Capabilities.markers``): its framework's own, or the CUDA runtime's.
_MARKERS: dict[MarkersApi, Callable[[], Markers]] = {"torch.cuda": TorchMarkers, "cuda_runtime": CudaRuntimeMarkers}


def markers_for(api: MarkersApi, device: str) -> Markers:
    """The markers of a worker on ``device`` whose engine reaches the CUDA profiler API through ``api``."""
    if device != "cuda":
        return NoMarkers()
    return _MARKERS[api]()
