"""The environment record (env.json) and the GPU facts read through NVML.

This machine has no GPU: NVML's absence is tested for real. What a GPU machine answers is fed through a stand-in
for the ``pynvml`` module that answers with pynvml's own value types and raises its own errors, so the reading and
formatting in trainbench.telemetry.nvml run unchanged.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

import trainbench
from trainbench.telemetry.env import collect_env, cpu_class, cpu_model, suite_commit
from trainbench.telemetry.nvml import gpu_report, gpu_state, visible_gpu_count

MIB = 2**20
NOT_SUPPORTED = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)


def real_nvml_error() -> Exception | None:
    """Why NVML cannot start here, or None on a machine where it can."""
    try:
        pynvml.nvmlInit()
    except Exception as error:  # noqa: BLE001 - whatever pynvml raises is what gpu_report must report
        return error
    pynvml.nvmlShutdown()
    return None


@pytest.fixture
def no_nvml() -> Exception:
    error = real_nvml_error()
    if error is None:
        pytest.skip("NVML works on this machine; its absence is covered by the stand-in tests")
    return error


# An H100 SXM as NVML describes it (driver 550, CUDA 12.4), and an old board that supports almost no query.
H100 = {
    "name": b"NVIDIA H100 80GB HBM3",  # older pynvml returns bytes, newer str: both must come out as str
    "uuid": "GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e11",
    "memory": pynvml.c_nvmlMemory_t(total=85_520_809_984, free=84_000_000_000, used=1_520_809_984),
    "clock": {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619},
    "max_clock": {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619},
    "app_clock": {pynvml.NVML_CLOCK_SM: 1755},
    "power_limit_mw": 700_000,
    "power_mw": 71_234,
    "temperature": 34,
    "pstate": 0,
    "persistence": 1,
    "compute_capability": (9, 0),
}
OLD_BOARD = {"name": "Tesla K80"}


class StandInNVML:
    """The part of the pynvml module that trainbench.telemetry.nvml calls, answering for the given GPUs."""

    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, gpus: list[dict[str, Any]], driver: str | None = "550.54.15", cuda: int | None = 12040,
                 init_error: Exception | None = None) -> None:
        self.gpus, self.driver, self.cuda, self.init_error = gpus, driver, cuda, init_error
        self.open = 0  # nvmlInit calls not yet matched by nvmlShutdown

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.open += 1

    def nvmlShutdown(self) -> None:
        self.open -= 1

    @staticmethod
    def _answer(value: Any) -> Any:
        if value is None:
            raise NOT_SUPPORTED
        return value

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._answer(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._answer(self.cuda)

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self.gpus[index]

    def nvmlDeviceGetName(self, gpu: dict[str, Any]) -> Any:
        return self._answer(gpu.get("name"))

    def nvmlDeviceGetUUID(self, gpu: dict[str, Any]) -> Any:
        return self._answer(gpu.get("uuid"))

    def nvmlDeviceGetMemoryInfo(self, gpu: dict[str, Any]) -> Any:
        return self._answer(gpu.get("memory"))

    def nvmlDeviceGetClockInfo(self, gpu: dict[str, Any], clock: int) -> int:
        return self._answer(gpu.get("clock", {}).get(clock))

    def nvmlDeviceGetMaxClockInfo(self, gpu: dict[str, Any], clock: int) -> int:
        return self._answer(gpu.get("max_clock", {}).get(clock))

    def nvmlDeviceGetApplicationsClock(self, gpu: dict[str, Any], clock: int) -> int:
        return self._answer(gpu.get("app_clock", {}).get(clock))

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: dict[str, Any]) -> int:
        return self._answer(gpu.get("power_limit_mw"))

    def nvmlDeviceGetPowerUsage(self, gpu: dict[str, Any]) -> int:
        return self._answer(gpu.get("power_mw"))

    def nvmlDeviceGetTemperature(self, gpu: dict[str, Any], sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._answer(gpu.get("temperature"))

    def nvmlDeviceGetPerformanceState(self, gpu: dict[str, Any]) -> int:
        return self._answer(gpu.get("pstate"))

    def nvmlDeviceGetPersistenceMode(self, gpu: dict[str, Any]) -> int:
        return self._answer(gpu.get("persistence"))

    def nvmlDeviceGetCudaComputeCapability(self, gpu: dict[str, Any]) -> tuple[int, int]:
        return self._answer(gpu.get("compute_capability"))


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """install(StandInNVML(...)) makes it the pynvml that the next ``import pynvml`` finds."""
    installed: list[StandInNVML] = []

    def _install(standin: StandInNVML) -> StandInNVML:
        monkeypatch.setitem(sys.modules, "pynvml", standin)
        installed.append(standin)
        return standin

    yield _install
    for standin in installed:
        assert standin.open == 0, "nvmlInit without nvmlShutdown"


# --- no NVML: a CPU machine records "no GPU" and carries on


def test_without_nvml_the_report_is_empty_with_the_reason(no_nvml: Exception) -> None:
    assert gpu_report() == {"gpus": [], "unavailable": f"NVML: {no_nvml}"}


def test_without_nvml_there_is_no_gpu_state_and_no_visible_gpu(no_nvml: Exception,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu_state() == []
    for visible in (None, "0", "0,1,2,3"):
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert visible_gpu_count() == 0


def test_without_the_nvml_package_the_report_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # ``import pynvml`` raises ImportError
    report = gpu_report()
    assert report["gpus"] == []
    assert report["unavailable"].startswith("NVML: ")
    assert "pynvml" in report["unavailable"]


def test_a_driver_that_is_not_loaded_is_the_reason_given(install: Any) -> None:
    error = pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    install(StandInNVML([H100], init_error=error))
    assert gpu_report() == {"gpus": [], "unavailable": f"NVML: {error}"}  # pynvml's words: "Driver Not Loaded"
    assert gpu_state() == []


# --- a GPU machine: NVML's answers turned into env.json's fields


def test_report_converts_nvml_units(install: Any) -> None:
    standin = install(StandInNVML([H100, H100]))
    report = gpu_report()
    assert report["driver"] == standin.driver
    assert report["cuda_driver"] == "12.4"  # NVML's 12040 is CUDA 12.4
    assert [gpu["index"] for gpu in report["gpus"]] == [0, 1]
    gpu = report["gpus"][0]
    assert gpu["name"] == H100["name"].decode()
    assert gpu["uuid"] == H100["uuid"]
    assert gpu["memory_total_mib"] == H100["memory"].total // MIB == 81559
    assert gpu["sm_clock_mhz"] == H100["clock"][pynvml.NVML_CLOCK_SM]
    assert gpu["memory_clock_mhz"] == H100["clock"][pynvml.NVML_CLOCK_MEM]
    assert gpu["sm_clock_max_mhz"] == H100["max_clock"][pynvml.NVML_CLOCK_SM]
    assert gpu["memory_clock_max_mhz"] == H100["max_clock"][pynvml.NVML_CLOCK_MEM]
    assert gpu["sm_application_clock_mhz"] == H100["app_clock"][pynvml.NVML_CLOCK_SM]
    assert gpu["power_limit_w"] == pytest.approx(700.0)
    assert gpu["power_w"] == pytest.approx(71.234)
    assert gpu["temperature_c"] == H100["temperature"]
    assert gpu["performance_state"] == 0
    assert gpu["persistence_mode"] == 1
    assert gpu["compute_capability"] == "9.0"
    json.dumps(report)  # env.json: plain JSON values only


@pytest.mark.parametrize(("version", "text"), [(11080, "11.8"), (12020, "12.2"), (12090, "12.9"), (13000, "13.0")])
def test_cuda_driver_version_is_major_dot_minor(install: Any, version: int, text: str) -> None:
    install(StandInNVML([], cuda=version))
    assert gpu_report()["cuda_driver"] == text


def test_unsupported_queries_are_none_not_errors(install: Any) -> None:
    install(StandInNVML([H100, OLD_BOARD], driver=None, cuda=None))
    report = gpu_report()
    assert report["driver"] is None
    assert report["cuda_driver"] is None
    old = report["gpus"][1]
    assert old["index"] == 1
    assert old["name"] == "Tesla K80"
    assert old["compute_capability"] == ""
    unanswered = {key for key, value in old.items() if value is None}
    assert unanswered == set(old) - {"index", "name", "compute_capability"}
    assert report["gpus"][0]["name"] == H100["name"].decode()  # one poor board does not spoil the others


def test_an_idle_gpu_drawing_no_power_reads_zero_watts(install: Any) -> None:
    install(StandInNVML([{**H100, "power_mw": 0}]))
    assert gpu_report()["gpus"][0]["power_w"] == 0.0


def test_gpu_state_keeps_the_values_that_change_during_a_run(install: Any) -> None:
    install(StandInNVML([H100, {**H100, "temperature": 71, "clock": {pynvml.NVML_CLOCK_SM: 1410}}]))
    states = gpu_state()
    full = gpu_report()["gpus"]
    keys = {"index", "sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c", "performance_state"}
    assert [set(state) for state in states] == [keys, keys]
    assert states == [{key: gpu[key] for key in keys} for gpu in full]
    assert (states[1]["temperature_c"], states[1]["sm_clock_mhz"], states[1]["memory_clock_mhz"]) == (71, 1410, None)


@pytest.mark.parametrize(("visible", "expected"), [
    (None, 4),  # unset: every GPU
    ("", 0),  # set but empty: none
    ("0", 1),
    ("2,3", 2),
    ("0, 1", 2),
    ("1,,2", 2),  # empty entries are skipped
    ("0,1,2,3,4,5,6,7", 4),  # never more than there are
    ("-1", 0),  # CUDA stops at the first invalid entry
    ("0,-1,2", 1),
    ("GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e13,GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e10", 2),  # UUIDs
    ("GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e12", 1),
    ("GPU-5b1c1d7e", 0),  # a start of a UUID that names no single GPU ends the list, as in CUDA
    ("GPU-0a,0", 0),  # an unknown UUID ends it
    ("1,1", 1),  # a GPU named twice: CUDA refuses the second entry
])
def test_visible_gpu_count_follows_cuda_visible_devices(install: Any, monkeypatch: pytest.MonkeyPatch,
                                                       visible: str | None, expected: int) -> None:
    install(StandInNVML([{**H100, "uuid": f"GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e1{i}"} for i in range(4)]))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpu_count() == expected


# --- env.json


def test_collect_env_describes_this_machine_and_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    argv = ["trainbench", "throughput", "--batch-sizes", "1,2"]
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    env = collect_env(argv)
    after = dt.datetime.now(dt.UTC)
    assert env["command"] == argv
    assert env["trainbench_version"] == trainbench.__version__
    assert env["python"] == platform.python_version()
    assert env["platform"] == platform.platform()
    assert env["hostname"] == socket.gethostname()
    assert env["cpu_count"] == os.cpu_count()
    assert env["cpus_usable"] == len(os.sched_getaffinity(0))
    assert 1 <= env["cpus_usable"] <= env["cpu_count"]
    assert env["cuda_visible_devices"] == "3,1"
    assert env["cpu_model"] == cpu_model()
    assert env["cpu_class"] == cpu_class() and env["cpu_class"].startswith(cpu_model())
    assert env["suite_commit"] == suite_commit()
    when = dt.datetime.fromisoformat(env["time_utc"])
    assert when.utcoffset() == dt.timedelta(0)
    assert before <= when <= after
    assert set(env["gpu"]) >= {"gpus"}
    assert json.loads(json.dumps(env)) == env  # what env.json holds is exactly this record


def test_collect_env_records_an_unset_cuda_visible_devices_as_null(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert collect_env([])["cuda_visible_devices"] is None


def test_collect_env_carries_the_gpu_report(install: Any) -> None:
    install(StandInNVML([H100]))
    env = collect_env(["x"])
    assert env["gpu"] == gpu_report()
    assert env["gpu"]["gpus"][0]["name"] == H100["name"].decode()


def test_cpu_model_is_the_model_name_of_proc_cpuinfo() -> None:
    model = cpu_model()
    assert model and model == model.strip()
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")] if cpuinfo.exists() else []
    if names:
        assert model == names[0]
    else:
        assert model in (platform.processor(), platform.machine())


# --- suite_commit: a real git repository stands in for the suite's checkout (GIT_DIR and GIT_WORK_TREE)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "suite"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "tracked.py").write_text("x = 1\n")
    git(repo, "add", "tracked.py")
    git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    return repo


def test_suite_commit_of_a_clean_checkout_is_its_head(checkout: Path) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    assert len(head) == 40
    assert suite_commit() == head
    (checkout / "untracked.py").write_text("y = 2\n")  # untracked files are not local changes to the suite
    assert suite_commit() == head


def test_suite_commit_of_an_edited_checkout_is_marked_dirty(checkout: Path) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    (checkout / "tracked.py").write_text("x = 2\n")
    assert suite_commit() == f"{head}-dirty"
    git(checkout, "commit", "-q", "-am", "two")
    assert suite_commit() == git(checkout, "rev-parse", "HEAD") != head


def test_suite_commit_outside_a_git_checkout_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(tmp_path))  # an empty folder: "not a git repository"
    assert suite_commit() is None


def test_suite_commit_without_git_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git executable to run
    assert suite_commit() is None
