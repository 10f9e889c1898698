"""A stand-in for nvidia-ml-py's ``pynvml`` module: NVML answers from a spec, for tests on machines without a GPU.

What it is for: the suite reads GPUs through NVML (``import pynvml``). On a GPU-less machine the real module cannot
load libnvidia-ml, so every GPU path would go untested. This module answers the same calls with the same value
types (the real pynvml's ctypes structures, constants and ``NVMLError`` classes, re-exported from the installed
nvidia-ml-py, which it loads under another name), from a spec that says what each GPU is, supports and lacks. It
tests plumbing only: which calls are made, how their answers and errors are turned into results, whether energy
and power are combined correctly. Whether NVML on a real GPU answers this way is tested where there is one (the
real path runs on a GPU machine); nothing here is evidence about hardware.

How tests use it:

* A subprocess: put ``tests/standins/nvml`` at the front of PYTHONPATH, and this file is the ``pynvml`` that
  ``import pynvml`` finds. The spec is the JSON file named by the environment variable ``STANDIN_NVML``, read at
  each ``nvmlInit``. With ``STANDIN_RECORD`` (a folder, as for the profiler stand-ins), the process appends one JSON
  line to ``<folder>/nvml.jsonl`` at exit: its init/shutdown counts and how often each function was called.
* In-process: ``nvml = fresh(spec)`` (an independent copy of this module: its own spec, clock and counters), then
  ``monkeypatch.setitem(sys.modules, "pynvml", nvml)``; ``fresh(spec, clock_ns=...)`` reads time from the test's
  clock (nanoseconds, as ``time.monotonic_ns``). ``configure(spec)`` replaces a copy's spec (and restarts its
  clock); a spec given in-process wins over ``STANDIN_NVML``. Neither configured nor ``STANDIN_NVML`` set:
  ``nvmlInit`` raises ``NVMLError_LibraryNotFound``, as on a machine without the driver.

The spec::

    {"driver": "550.54.15", "cuda": 12040, "init_error": null,      # init_error: an NVML_ERROR_* number
     "missing": [],                  # functions no GPU has (an old driver): NVMLError_FunctionNotFound
     "reference_time_unit": "ns",    # nvmlViolationTime_t.referenceTime in "ns" (default) or "us"
     "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...", "memory_total": 85520809984, "memory_used": 0,
               "sm_clock": 1980, "memory_clock": 2619, "max_sm_clock": 1980, "max_memory_clock": 2619,
               "app_sm_clock": 1755, "power_limit_mw": 700000, "power_w": 310.5, "temperature": 34,
               "pstate": 0, "persistence": 1, "compute_capability": [9, 0], "gpu_util": 97, "memory_util": 41,
               "clock_event_reasons": 0, "violation_ns_per_s": {"0": 2.5e8, "1": 0},
               "energy_start_mj": 123456789,
               "unsupported": ["nvmlDeviceGetTotalEnergyConsumption"],  # this GPU: NVMLError_NotSupported
               "missing": ["nvmlDeviceGetCurrentClocksEventReasons"],   # this GPU: NVMLError_FunctionNotFound
               "lost": false}]}                                         # true: every call on it: GPU_IS_LOST

Every key is optional: a query whose key is absent raises ``NVMLError_NotSupported`` (so does a violation policy
absent from ``violation_ns_per_s``, and the energy counter without both ``energy_start_mj`` and ``power_w``).
Clocks: ``<prefix><kind>_clock`` with prefix "", "max_" or "app_" and kind ``sm``, ``memory``, ``graphics`` or
``video`` (NVML_CLOCK_*); graphics falls back to sm. Unknown keys and function names are refused (ValueError), so a
typo is not mistaken for an unsupported query.

Time: the clock starts at the first ``nvmlInit`` after the spec was set. Power is constant, so the energy counter
is ``energy_start_mj + power_mw * seconds`` (modulo 2**64, the real counter's width) and a violation counter is
``rate * seconds`` ns, both computed from the copy's clock, ``time.monotonic_ns()`` unless ``fresh`` was given
another: energy over any interval is exactly the reported power times that interval, to the millijoule.
``referenceTime`` is the same clock (ns, or µs with ``"reference_time_unit": "us"`` — NVML's documentation says µs,
so code that divides by it can be tested both ways). A test that gives the code under test the same clock, and
moves it itself, gets figures that do not depend on how fast or loaded the machine is.

Checks run in the real library's order: a missing function (FUNCTION_NOT_FOUND), NVML not initialised
(UNINITIALIZED, also for an unmatched ``nvmlShutdown``), a bad handle or argument (INVALID_ARGUMENT), a lost GPU
(GPU_IS_LOST), an unsupported query (NOT_SUPPORTED). Every other ``nvml*`` function of the real module exists here
and raises FUNCTION_NOT_FOUND. ``open_count`` is the number of ``nvmlInit`` calls not yet matched by
``nvmlShutdown``; ``init_calls``, ``shutdown_calls`` and ``calls`` (function name → count) are there for tests.
"""

from __future__ import annotations

import atexit
import collections
import copy
import importlib.machinery
import importlib.util
import inspect
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = Path(__file__).resolve().parent
_PRIVATE_NAME = "_standin_nvml_real_pynvml"


def _find_real() -> ModuleType:
    """The installed nvidia-ml-py's ``pynvml``: the one already imported if there is one, so its classes are the
    ones tests compare with; else loaded from site-packages (as ``pynvml`` when that name is free)."""
    path_entries = [entry for entry in sys.path if Path(entry or os.getcwd()).resolve() != _HERE]
    found = importlib.machinery.PathFinder.find_spec("pynvml", path_entries)
    if found is None or found.origin is None:
        raise ImportError("stand-in pynvml: nvidia-ml-py's pynvml is not installed; the stand-in re-exports its "
                          "constants, structures and error classes")
    origin = Path(found.origin).resolve()
    known = sys.modules.get(_PRIVATE_NAME)  # what an earlier copy of the stand-in found: the same classes for all
    if known is not None:
        return known
    module = sys.modules.get("pynvml")
    module_file = getattr(module, "__file__", None)
    if module is None or not module_file or Path(module_file).resolve() != origin:
        name = "pynvml" if "pynvml" not in sys.modules else _PRIVATE_NAME
        spec = importlib.util.spec_from_file_location(name, origin)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # pynvml builds its NVMLError_* classes through sys.modules[__name__]
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    sys.modules[_PRIVATE_NAME] = module
    return module


real = _find_real()

# Pure-Python helpers of the real module that need no library: re-exported as they are.
_PURE_HELPERS = {"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"}


def _is_library_call(name: str, value: Any) -> bool:
    return name.startswith("nvml") and inspect.isfunction(value) and name not in _PURE_HELPERS


# Constants, structures, NVMLError and its subclasses, ctypes names: the real module's own objects.
globals().update({name: value for name, value in vars(real).items()
                  if not name.startswith("_") and not inspect.ismodule(value) and not _is_library_call(name, value)})
NVMLError = real.NVMLError

_CLOCK_KINDS = {real.NVML_CLOCK_GRAPHICS: "graphics", real.NVML_CLOCK_SM: "sm", real.NVML_CLOCK_MEM: "memory",
                real.NVML_CLOCK_VIDEO: "video"}
_CLOCK_KEYS = {f"{prefix}{kind}_clock" for prefix in ("", "max_", "app_") for kind in _CLOCK_KINDS.values()}
_GPU_KEYS = {
    "name", "uuid", "memory_total", "memory_used", "power_limit_mw", "power_w", "temperature", "pstate",
    "persistence", "compute_capability", "gpu_util", "memory_util", "clock_event_reasons", "violation_ns_per_s",
    "energy_start_mj", "unsupported", "missing", "lost", *_CLOCK_KEYS,
}
_TOP_KEYS = {"driver", "cuda", "init_error", "gpus", "missing", "reference_time_unit"}
_VALID_POLICIES = {value for name, value in vars(real).items()
                   if name.startswith("NVML_PERF_POLICY_") and name != "NVML_PERF_POLICY_COUNT"}
COUNTER_MODULUS = 2**64  # energy and violation counters are unsigned 64-bit

# State of this copy of the module.
open_count = 0  # nvmlInit calls not yet matched by nvmlShutdown
init_calls = 0  # every nvmlInit call, failed ones included
shutdown_calls = 0  # every nvmlShutdown call, failed ones included
calls: collections.Counter[str] = collections.Counter()  # function name -> calls
_spec: dict[str, Any] | None = None  # the spec in force
_configured = False  # set in-process by configure(): STANDIN_NVML is then not read
_now_ns: Callable[[], int] = time.monotonic_ns  # this copy's clock (fresh's clock_ns)
_start_ns: int | None = None  # _now_ns() at the first nvmlInit under the current spec
_lock = threading.Lock()
_copies = itertools.count()


def _error(code: int) -> Exception:
    return real.NVMLError(code)  # the real class maps the code to its NVMLError_* subclass


class _Handle:
    """A device handle: which GPU of the spec (real handles are opaque pointers)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<stand-in nvmlDevice_t {self.index}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Handle) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("stand-in nvmlDevice_t", self.index))


# --- the spec -------------------------------------------------------------------------------------------------------


def _check_names(names: Any, where: str) -> None:
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"stand-in pynvml: {where} must be a list of function names, not {names!r}")
    unknown = [name for name in names if not _is_library_call(name, getattr(real, name, None))]
    if unknown:
        raise ValueError(f"stand-in pynvml: {where} names no pynvml function: {unknown}")


def _validated(spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ValueError(f"stand-in pynvml: the spec must be a JSON object, not {type(spec).__name__}")
    spec = copy.deepcopy(spec)
    unknown = set(spec) - _TOP_KEYS
    if unknown:
        raise ValueError(f"stand-in pynvml: unknown spec keys {sorted(unknown)} (known: {sorted(_TOP_KEYS)})")
    _check_names(spec.setdefault("missing", []), "missing")
    if spec.get("init_error") is not None and not isinstance(spec["init_error"], int):
        raise ValueError(f"stand-in pynvml: init_error must be an NVML_ERROR_* number, not {spec['init_error']!r}")
    if spec.setdefault("reference_time_unit", "ns") not in ("ns", "us"):
        raise ValueError(f"stand-in pynvml: reference_time_unit must be 'ns' or 'us', not "
                         f"{spec['reference_time_unit']!r}")
    gpus = spec.setdefault("gpus", [])
    if not isinstance(gpus, list):
        raise ValueError("stand-in pynvml: gpus must be a list")
    for index, gpu in enumerate(gpus):
        if not isinstance(gpu, dict):
            raise ValueError(f"stand-in pynvml: gpus[{index}] must be an object")
        unknown = set(gpu) - _GPU_KEYS
        if unknown:
            raise ValueError(f"stand-in pynvml: gpus[{index}] has unknown keys {sorted(unknown)} "
                             f"(known: {sorted(_GPU_KEYS)})")
        _check_names(gpu.setdefault("missing", []), f"gpus[{index}].missing")
        _check_names(gpu.setdefault("unsupported", []), f"gpus[{index}].unsupported")
        if "violation_ns_per_s" in gpu:
            rates = gpu["violation_ns_per_s"]
            if not isinstance(rates, dict):
                raise ValueError(f"stand-in pynvml: gpus[{index}].violation_ns_per_s must map policy numbers to ns/s")
            gpu["violation_ns_per_s"] = {int(policy): rate for policy, rate in rates.items()}
    return spec


def configure(spec: dict[str, Any]) -> None:
    """Answer from ``spec`` from now on (in-process; wins over STANDIN_NVML); the clock restarts at the next
    ``nvmlInit``, or now if NVML is open. Handles stay valid (they are indices), so a test can turn a GPU lost."""
    global _spec, _configured, _start_ns
    checked = _validated(spec)
    with _lock:
        _spec, _configured = checked, True
        _start_ns = _now_ns() if open_count else None


def reset() -> None:
    """Forget the spec, the clock and the counters."""
    global _spec, _configured, _start_ns, open_count, init_calls, shutdown_calls
    with _lock:
        _spec, _configured, _start_ns = None, False, None
        open_count = init_calls = shutdown_calls = 0
        calls.clear()


def fresh(spec: dict[str, Any] | None = None, clock_ns: Callable[[], int] | None = None) -> ModuleType:
    """An independent copy of this module (own spec, clock and counters), configured with ``spec`` if given, its
    time read from ``clock_ns`` if given: what an in-process test installs as ``sys.modules["pynvml"]``."""
    name = f"_standin_pynvml_{os.getpid()}_{next(_copies)}"
    module_spec = importlib.util.spec_from_file_location(name, __file__)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if clock_ns is not None:
        module._now_ns = clock_ns
    if spec is not None:
        module.configure(spec)
    return module


def _load_from_environment() -> None:
    global _spec, _start_ns
    path = os.environ.get("STANDIN_NVML")
    if not path:
        raise _error(real.NVML_ERROR_LIBRARY_NOT_FOUND)  # as on a machine without libnvidia-ml
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RuntimeError(f"stand-in pynvml: cannot read the spec STANDIN_NVML={path}: {error}") from error
    checked = _validated(loaded)
    if checked != _spec:
        _spec, _start_ns = checked, None


# --- checks every call makes ----------------------------------------------------------------------------------------


def _called(name: str, handle: Any = None) -> dict[str, Any] | None:
    """Count the call and run the checks in the real library's order; the GPU's spec for a device call."""
    with _lock:
        calls[name] += 1
    spec = _spec or {}
    gpus = spec.get("gpus", [])
    gpu = gpus[handle.index] if isinstance(handle, _Handle) and 0 <= handle.index < len(gpus) else None
    if name in spec.get("missing", ()) or (gpu is not None and name in gpu["missing"]):
        raise _error(real.NVML_ERROR_FUNCTION_NOT_FOUND)
    if open_count <= 0:
        raise _error(real.NVML_ERROR_UNINITIALIZED)
    if handle is None:
        return None
    if gpu is None:
        raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
    if gpu.get("lost"):
        raise _error(real.NVML_ERROR_GPU_IS_LOST)
    if name in gpu["unsupported"]:
        raise _error(real.NVML_ERROR_NOT_SUPPORTED)
    return gpu


def _value(source: dict[Any, Any], key: Any) -> Any:
    value = source.get(key)
    if value is None:
        raise _error(real.NVML_ERROR_NOT_SUPPORTED)
    return value


def _elapsed_ns(now_ns: int) -> int:
    return now_ns - (_start_ns if _start_ns is not None else now_ns)


# --- system ---------------------------------------------------------------------------------------------------------


def nvmlInit() -> None:
    global open_count, init_calls, _start_ns
    with _lock:
        calls["nvmlInit"] += 1
        init_calls += 1
        if not _configured:
            _load_from_environment()
        assert _spec is not None
        if _spec.get("init_error") is not None:
            raise _error(_spec["init_error"])
        if _start_ns is None:
            _start_ns = _now_ns()
        open_count += 1


def nvmlInitWithFlags(flags: int) -> None:
    nvmlInit()


def nvmlShutdown() -> None:
    global open_count, shutdown_calls
    with _lock:
        calls["nvmlShutdown"] += 1
        shutdown_calls += 1
        if open_count <= 0:
            raise _error(real.NVML_ERROR_UNINITIALIZED)
        open_count -= 1


def nvmlErrorString(result: int) -> str:
    return real.NVMLError._errcode_to_string.get(result, "Unknown Error")


def nvmlSystemGetDriverVersion() -> str:
    _called("nvmlSystemGetDriverVersion")
    return str(_value(_spec or {}, "driver"))


def nvmlSystemGetCudaDriverVersion() -> int:
    _called("nvmlSystemGetCudaDriverVersion")
    return int(_value(_spec or {}, "cuda"))


def nvmlSystemGetCudaDriverVersion_v2() -> int:
    _called("nvmlSystemGetCudaDriverVersion_v2")
    return int(_value(_spec or {}, "cuda"))


# --- devices --------------------------------------------------------------------------------------------------------


def nvmlDeviceGetCount() -> int:
    _called("nvmlDeviceGetCount")
    return len((_spec or {}).get("gpus", []))


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    handle = _Handle(int(index))
    _called("nvmlDeviceGetHandleByIndex", handle)
    return handle


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle:
    _called("nvmlDeviceGetHandleByUUID")
    wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
    for index, gpu in enumerate((_spec or {}).get("gpus", [])):
        if gpu.get("uuid") == wanted:
            if gpu.get("lost"):
                raise _error(real.NVML_ERROR_GPU_IS_LOST)
            return _Handle(index)
    raise _error(real.NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetName(handle: Any) -> str:
    return str(_value(_called("nvmlDeviceGetName", handle), "name"))


def nvmlDeviceGetUUID(handle: Any) -> str:
    return str(_value(_called("nvmlDeviceGetUUID", handle), "uuid"))


def nvmlDeviceGetMemoryInfo(handle: Any, version: int | None = None) -> Any:
    gpu = _called("nvmlDeviceGetMemoryInfo", handle)
    total = int(_value(gpu, "memory_total"))
    used = int(gpu.get("memory_used") or 0)
    if version:
        return real.c_nvmlMemory_v2_t(version=version, total=total, reserved=0, free=total - used, used=used)
    return real.c_nvmlMemory_t(total=total, free=total - used, used=used)


def _clock(name: str, prefix: str, handle: Any, clock_type: int) -> int:
    gpu = _called(name, handle)
    kind = _CLOCK_KINDS.get(clock_type)
    if kind is None:
        raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
    key = f"{prefix}{kind}_clock"
    if gpu.get(key) is None and kind == "graphics":
        key = f"{prefix}sm_clock"  # one clock domain on the GPUs the suite models
    return int(_value(gpu, key))


def nvmlDeviceGetClockInfo(handle: Any, type: int) -> int:
    return _clock("nvmlDeviceGetClockInfo", "", handle, type)


def nvmlDeviceGetMaxClockInfo(handle: Any, type: int) -> int:
    return _clock("nvmlDeviceGetMaxClockInfo", "max_", handle, type)


def nvmlDeviceGetApplicationsClock(handle: Any, type: int) -> int:
    return _clock("nvmlDeviceGetApplicationsClock", "app_", handle, type)


def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:
    return int(_value(_called("nvmlDeviceGetEnforcedPowerLimit", handle), "power_limit_mw"))


def _power_mw(gpu: dict[str, Any]) -> int:
    return round(float(_value(gpu, "power_w")) * 1000)


def nvmlDeviceGetPowerUsage(handle: Any) -> int:
    return _power_mw(_called("nvmlDeviceGetPowerUsage", handle))


def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:
    gpu = _called("nvmlDeviceGetTotalEnergyConsumption", handle)
    start_mj, power_mw = int(_value(gpu, "energy_start_mj")), _power_mw(gpu)
    return (start_mj + power_mw * _elapsed_ns(_now_ns()) // 10**9) % COUNTER_MODULUS


def nvmlDeviceGetTemperature(handle: Any, sensor: int) -> int:
    gpu = _called("nvmlDeviceGetTemperature", handle)
    if sensor != real.NVML_TEMPERATURE_GPU:
        raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
    return int(_value(gpu, "temperature"))


def nvmlDeviceGetPerformanceState(handle: Any) -> int:
    return int(_value(_called("nvmlDeviceGetPerformanceState", handle), "pstate"))


def nvmlDeviceGetPersistenceMode(handle: Any) -> int:
    return int(_value(_called("nvmlDeviceGetPersistenceMode", handle), "persistence"))


def nvmlDeviceGetCudaComputeCapability(handle: Any) -> tuple[int, int]:
    major, minor = _value(_called("nvmlDeviceGetCudaComputeCapability", handle), "compute_capability")
    return int(major), int(minor)


def nvmlDeviceGetCurrentClocksEventReasons(handle: Any) -> int:
    return int(_value(_called("nvmlDeviceGetCurrentClocksEventReasons", handle), "clock_event_reasons"))


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: Any) -> int:
    return int(_value(_called("nvmlDeviceGetCurrentClocksThrottleReasons", handle), "clock_event_reasons"))


def nvmlDeviceGetViolationStatus(device: Any, perfPolicyType: int) -> Any:
    gpu = _called("nvmlDeviceGetViolationStatus", device)
    if perfPolicyType not in _VALID_POLICIES:
        raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
    rate = _value(_value(gpu, "violation_ns_per_s"), perfPolicyType)
    now_ns = _now_ns()
    violation_ns = int(rate * _elapsed_ns(now_ns)) // 10**9 % COUNTER_MODULUS
    reference = now_ns if (_spec or {}).get("reference_time_unit", "ns") == "ns" else now_ns // 1000
    return real.c_nvmlViolationTime_t(referenceTime=reference, violationTime=violation_ns)


def nvmlDeviceGetUtilizationRates(handle: Any) -> Any:
    gpu = _called("nvmlDeviceGetUtilizationRates", handle)
    return real.c_nvmlUtilization_t(gpu=int(_value(gpu, "gpu_util")), memory=int(_value(gpu, "memory_util")))


# --- everything else ------------------------------------------------------------------------------------------------

IMPLEMENTED = frozenset(name for name, value in globals().items() if _is_library_call(name, value))


def _not_in_standin(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            calls[name] += 1
        raise _error(real.NVML_ERROR_FUNCTION_NOT_FOUND)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = "Not modelled by the stand-in: raises NVMLError_FunctionNotFound, as a driver without it would."
    return call


def __getattr__(name: str) -> Any:
    """The real module's other NVML functions: present (as in pynvml), raising FUNCTION_NOT_FOUND when called."""
    if _is_library_call(name, getattr(real, name, None)):
        return _not_in_standin(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _record_at_exit() -> None:
    folder = os.environ.get("STANDIN_RECORD")
    if not folder:
        return
    line = {"pid": os.getpid(), "init_calls": init_calls, "shutdown_calls": shutdown_calls,
            "open_count": open_count, "calls": dict(calls)}
    with open(Path(folder) / "nvml.jsonl", "a", encoding="utf-8") as record:
        record.write(json.dumps(line) + "\n")


if __name__ == "pynvml":  # the stand-in a subprocess imported: report its calls at exit
    atexit.register(_record_at_exit)
