"""The stand-in NVML module (tests/standins/nvml/pynvml.py) answers like nvidia-ml-py's pynvml: same calls, same
value types, the real error classes, and energy that agrees with power. Plumbing only: the real NVML path is
tested on a GPU machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pynvml  # the real nvidia-ml-py: its classes are what the stand-in must hand out
import pytest

from tests.conftest import REPO
from tests.standins.clock import StandInClock
from tests.standins.nvml import pynvml as standin

STANDIN_DIR = REPO / "tests" / "standins" / "nvml"

H100: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
    "memory_total": 85_520_809_984, "memory_used": 520_809_984,
    "sm_clock": 1980, "memory_clock": 2619, "max_sm_clock": 1980, "max_memory_clock": 2619, "app_sm_clock": 1755,
    "power_limit_mw": 700_000, "power_w": 312.5, "temperature": 34, "pstate": 0, "persistence": 1,
    "compute_capability": [9, 0], "gpu_util": 97, "memory_util": 41, "clock_event_reasons": 0x4,
    "violation_ns_per_s": {"0": 2.5e8, "1": 0}, "energy_start_mj": 1_000_000,
}
SPEC: dict[str, Any] = {"driver": "550.54.15", "cuda": 12040, "gpus": [H100]}


def opened(spec: dict[str, Any], clock: StandInClock | None = None) -> Any:
    nvml = standin.fresh(spec, clock_ns=clock.ns if clock is not None else None)
    nvml.nvmlInit()
    return nvml


def raises(code: int, call: Any, *args: Any) -> pynvml.NVMLError:
    with pytest.raises(pynvml.NVMLError) as caught:
        call(*args)
    assert type(caught.value) is pynvml.nvmlExceptionClass(code)  # the real subclass, e.g. NVMLError_NotSupported
    assert caught.value.value == code
    return caught.value


def test_answers_with_the_real_modules_types() -> None:
    nvml = opened(SPEC)
    assert nvml.NVMLError is pynvml.NVMLError and nvml.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert nvml.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM and nvml.c_nvmlMemory_t is pynvml.c_nvmlMemory_t
    assert nvml.nvmlSystemGetDriverVersion() == "550.54.15" and nvml.nvmlSystemGetCudaDriverVersion() == 12040
    assert nvml.nvmlDeviceGetCount() == 1
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetHandleByUUID(H100["uuid"]) == handle
    assert nvml.nvmlDeviceGetName(handle) == H100["name"] and nvml.nvmlDeviceGetUUID(handle) == H100["uuid"]
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    assert isinstance(memory, pynvml.c_nvmlMemory_t)
    assert (memory.total, memory.used, memory.free) == (85_520_809_984, 520_809_984, 85_000_000_000)
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) == 1980
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_GRAPHICS) == 1980  # falls back to the SM clock
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM) == 2619
    assert nvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM) == 2619
    assert nvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_SM) == 1755
    assert nvml.nvmlDeviceGetEnforcedPowerLimit(handle) == 700_000
    assert nvml.nvmlDeviceGetPowerUsage(handle) == 312_500
    assert nvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU) == 34
    assert nvml.nvmlDeviceGetPerformanceState(handle) == 0 and nvml.nvmlDeviceGetPersistenceMode(handle) == 1
    assert nvml.nvmlDeviceGetCudaComputeCapability(handle) == (9, 0)
    assert nvml.nvmlDeviceGetCurrentClocksEventReasons(handle) == 0x4
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == 0x4
    utilization = nvml.nvmlDeviceGetUtilizationRates(handle)
    assert isinstance(utilization, pynvml.c_nvmlUtilization_t) and (utilization.gpu, utilization.memory) == (97, 41)
    violation = nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER)
    assert isinstance(violation, pynvml.c_nvmlViolationTime_t)
    assert nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_THERMAL).violationTime == 0
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(handle) >= 1_000_000
    nvml.nvmlShutdown()
    assert (nvml.open_count, nvml.init_calls, nvml.shutdown_calls) == (0, 1, 1)
    assert nvml.calls["nvmlDeviceGetHandleByIndex"] == 1


def test_absent_and_unsupported_queries_raise_not_supported() -> None:
    bare = {"name": "Tesla K80", "unsupported": ["nvmlDeviceGetName", "nvmlDeviceGetViolationStatus"]}
    nvml = opened({"gpus": [bare, {**H100, "unsupported": ["nvmlDeviceGetTotalEnergyConsumption"]}]})
    old, new = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    error = raises(pynvml.NVML_ERROR_NOT_SUPPORTED, nvml.nvmlDeviceGetName, old)  # listed, though "name" is given
    assert isinstance(error, pynvml.NVMLError_NotSupported) and str(error) == "Not Supported"
    for call, args in [(nvml.nvmlSystemGetDriverVersion, ()), (nvml.nvmlSystemGetCudaDriverVersion, ()),
                       (nvml.nvmlDeviceGetMemoryInfo, (old,)), (nvml.nvmlDeviceGetPowerUsage, (old,)),
                       (nvml.nvmlDeviceGetClockInfo, (old, pynvml.NVML_CLOCK_SM)),
                       (nvml.nvmlDeviceGetApplicationsClock, (new, pynvml.NVML_CLOCK_MEM)),
                       (nvml.nvmlDeviceGetViolationStatus, (old, pynvml.NVML_PERF_POLICY_POWER)),
                       (nvml.nvmlDeviceGetViolationStatus, (new, pynvml.NVML_PERF_POLICY_SYNC_BOOST)),
                       (nvml.nvmlDeviceGetTotalEnergyConsumption, (new,)),
                       (nvml.nvmlDeviceGetUtilizationRates, (old,))]:
        raises(pynvml.NVML_ERROR_NOT_SUPPORTED, call, *args)
    assert nvml.nvmlDeviceGetPowerUsage(new) == 312_500  # the other GPU still answers


def test_an_old_driver_lacks_functions() -> None:
    nvml = opened({**SPEC, "missing": ["nvmlSystemGetCudaDriverVersion"],
                   "gpus": [{**H100, "missing": ["nvmlDeviceGetCurrentClocksEventReasons"]}]})
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    error = raises(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
    assert isinstance(error, pynvml.NVMLError_FunctionNotFound)
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == 0x4  # the older name still answers
    raises(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, nvml.nvmlSystemGetCudaDriverVersion)
    # A function the stand-in does not model exists, as in pynvml, and answers like a driver without it.
    raises(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, nvml.nvmlDeviceGetFanSpeed, handle)
    assert "nvmlDeviceGetFanSpeed" not in nvml.IMPLEMENTED


def test_bad_handles_and_arguments() -> None:
    nvml = opened(SPEC)
    raises(pynvml.NVML_ERROR_INVALID_ARGUMENT, nvml.nvmlDeviceGetHandleByIndex, 1)
    raises(pynvml.NVML_ERROR_NOT_FOUND, nvml.nvmlDeviceGetHandleByUUID, "GPU-nobody")
    raises(pynvml.NVML_ERROR_INVALID_ARGUMENT, nvml.nvmlDeviceGetName, object())
    handle = nvml.nvmlDeviceGetHandleByUUID(H100["uuid"].encode())  # bytes too, as pynvml takes them
    raises(pynvml.NVML_ERROR_INVALID_ARGUMENT, nvml.nvmlDeviceGetClockInfo, handle, 99)
    raises(pynvml.NVML_ERROR_INVALID_ARGUMENT, nvml.nvmlDeviceGetViolationStatus, handle, 99)
    raises(pynvml.NVML_ERROR_INVALID_ARGUMENT, nvml.nvmlDeviceGetTemperature, handle, 7)


def test_a_lost_gpu_answers_nothing() -> None:
    nvml = opened({"gpus": [{**H100, "lost": True}, {**H100, "uuid": "GPU-2"}]})
    raises(pynvml.NVML_ERROR_GPU_IS_LOST, nvml.nvmlDeviceGetHandleByIndex, 0)
    raises(pynvml.NVML_ERROR_GPU_IS_LOST, nvml.nvmlDeviceGetHandleByUUID, H100["uuid"])
    assert nvml.nvmlDeviceGetCount() == 2
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetName(handle) == H100["name"]
    nvml.configure({"gpus": [{**H100, "lost": True}, {**H100, "lost": True}]})  # falls off the bus mid-run
    for call in (nvml.nvmlDeviceGetName, nvml.nvmlDeviceGetPowerUsage, nvml.nvmlDeviceGetTotalEnergyConsumption):
        error = raises(pynvml.NVML_ERROR_GPU_IS_LOST, call, handle)
        assert isinstance(error, pynvml.NVMLError_GpuIsLost)


def test_init_errors_and_balance() -> None:
    nvml = standin.fresh({**SPEC, "init_error": pynvml.NVML_ERROR_DRIVER_NOT_LOADED})
    assert str(raises(pynvml.NVML_ERROR_DRIVER_NOT_LOADED, nvml.nvmlInit)) == "Driver Not Loaded"
    assert (nvml.open_count, nvml.init_calls) == (0, 1)
    raises(pynvml.NVML_ERROR_UNINITIALIZED, nvml.nvmlDeviceGetCount)
    raises(pynvml.NVML_ERROR_UNINITIALIZED, nvml.nvmlShutdown)  # an unmatched shutdown is an error, as in NVML
    nvml.configure(SPEC)
    nvml.nvmlInit()
    nvml.nvmlInit()
    assert nvml.open_count == 2
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 1  # still open once
    nvml.nvmlShutdown()
    assert nvml.open_count == 0
    raises(pynvml.NVML_ERROR_UNINITIALIZED, nvml.nvmlDeviceGetHandleByIndex, 0)


def test_unconfigured_is_a_machine_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STANDIN_NVML", raising=False)
    nvml = standin.fresh()
    assert str(raises(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.nvmlInit)) == "NVML Shared Library Not Found"


def test_spec_typos_are_refused() -> None:
    with pytest.raises(ValueError, match="power_mw"):
        standin.fresh({"gpus": [{"power_mw": 300_000}]})
    with pytest.raises(ValueError, match="nvmlDeviceGetEnergy"):
        standin.fresh({"gpus": [{"unsupported": ["nvmlDeviceGetEnergy"]}]})
    with pytest.raises(ValueError, match="gpu"):
        standin.fresh({"gpu": []})


def test_energy_agrees_with_power_over_an_interval() -> None:
    clock = StandInClock()  # the test's time: exact however long the machine takes between the reads
    nvml = opened(SPEC, clock)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    before = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    clock.advance(0.2)
    after = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    assert after - before == nvml.nvmlDeviceGetPowerUsage(handle) * 0.2  # mW x s = mJ: 312.5 W over 0.2 s


def test_the_machines_clock_by_default() -> None:
    nvml = opened(SPEC)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    before = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    time.sleep(0.05)
    # at least 0.05 s of power (less 1 mJ: whole millijoules); no upper bound: a loaded machine may sleep far longer
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(handle) - before >= 312.5 * 0.05 * 1000 - 1


def test_violation_time_grows_at_its_rate() -> None:
    clock = StandInClock()
    nvml = opened(SPEC, clock)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    first = nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER)
    clock.advance(0.05)
    second = nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER)
    assert second.referenceTime - first.referenceTime == 50_000_000
    assert second.violationTime - first.violationTime == 12_500_000  # 2.5e8 ns per s
    nvml.configure({**SPEC, "reference_time_unit": "us"})
    third = nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER)
    assert third.referenceTime == clock.ns() // 1000


def test_energy_counter_wraps_at_64_bits() -> None:
    clock = StandInClock()
    nvml = opened({"gpus": [{**H100, "power_w": 300, "energy_start_mj": 2**64 - 60_000}]}, clock)  # 60 J to go
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    before = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    clock.advance(0.3)
    after = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    assert (before, after) == (2**64 - 60_000, 30_000)  # 90 J later: wrapped


def test_a_subprocess_imports_the_standin_and_reads_its_spec(tmp_path: Path) -> None:
    spec_file = tmp_path / "nvml.json"
    spec_file.write_text(json.dumps({**SPEC, "gpus": [H100, {**H100, "unsupported": ["nvmlDeviceGetName"]}]}))
    program = (
        "import json, pynvml\n"
        "pynvml.nvmlInit()\n"
        "handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]\n"
        "try:\n"
        "    pynvml.nvmlDeviceGetName(handles[1])\n"
        "except pynvml.NVMLError_NotSupported as error:\n"
        "    refused = [type(error).__name__, error.value, issubclass(type(error), pynvml.NVMLError)]\n"
        "print(json.dumps({'file': pynvml.__file__, 'driver': pynvml.nvmlSystemGetDriverVersion(),\n"
        "                  'name': pynvml.nvmlDeviceGetName(handles[0]), 'refused': refused}))\n"
        "pynvml.nvmlShutdown()\n"
    )
    python_path = os.pathsep.join([str(STANDIN_DIR), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": python_path, "STANDIN_NVML": str(spec_file), "STANDIN_RECORD": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", program], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert Path(answer["file"]).resolve() == (STANDIN_DIR / "pynvml.py").resolve()
    assert (answer["driver"], answer["name"]) == ("550.54.15", H100["name"])
    assert answer["refused"] == ["NVMLError_NotSupported", pynvml.NVML_ERROR_NOT_SUPPORTED, True]
    record = json.loads((tmp_path / "nvml.jsonl").read_text())
    assert (record["init_calls"], record["shutdown_calls"], record["open_count"]) == (1, 1, 0)
    assert record["calls"]["nvmlDeviceGetHandleByIndex"] == 2
