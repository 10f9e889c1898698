"""GPU telemetry through the worker's real measurement (``bench.worker.measure``), on the stand-in NVML module.

A timed window of known length runs on a stand-in step (a sleep: no GPU here) while the stand-in NVML reports a
GPU drawing a constant power, so energy, power, clocks and throttled time have known values. What a real GPU
answers is checked on a GPU machine (benchmarks/telemetry_overhead.py, benchmarks/results/); this checks that the
suite reads, combines and writes it right, and degrades cleanly without it.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.standins.engine import StandInEngine
from trainbench.bench.worker import measure
from trainbench.config import BenchConfig, ModelConfig
from trainbench.telemetry import counters
from trainbench.telemetry.nvml import gpu_report, visible_gpu_count
from trainbench.telemetry.schema import EVENT_SAMPLE, GPU_TELEMETRY, REASON_BITS, TELEMETRY_VALUES

STANDIN = Path(__file__).parent / "standins" / "nvml" / "pynvml.py"
STEP_S = 0.02


def _standin_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("standin_pynvml", STANDIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def h100(index: int, **changes: Any) -> dict[str, Any]:
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e1{index}",
           "memory_total": 85_520_809_984, "sm_clock": 1980, "memory_clock": 2619, "power_limit_mw": 700_000,
           "power_w": 300.0 + 10 * index, "temperature": 40 + index, "gpu_util": 97, "memory_util": 41,
           "clock_event_reasons": REASON_BITS["sw_power_cap"], "violation_ns_per_s": {"0": 2.5e8, "1": 0},
           "energy_start_mj": 123_456_789}
    return {**gpu, **changes}


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ModuleType]:
    """nvml(gpus) installs a fresh stand-in NVML answering for ``gpus`` as the ``pynvml`` imported next."""
    module = _standin_module()

    def install(gpus: list[dict[str, Any]], **spec: Any) -> ModuleType:
        standin = module.fresh({"driver": "550.54.15", "cuda": 12040, "gpus": gpus, **spec})
        monkeypatch.setitem(sys.modules, "pynvml", standin)
        return standin

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Windows of 20 x STEP_S keep these tests fast: energy is reported from one counter period on here (the rule of
    # ten periods is test_telemetry_counters').
    monkeypatch.setattr(counters, "MIN_ENERGY_WINDOW_S", counters.ENERGY_UPDATE_S)
    return install


def sleeping() -> StandInEngine:
    """An engine whose training step takes a fixed wall time."""
    return StandInEngine("sleep", lambda: time.sleep(STEP_S), samples_per_step=16)


def config(device: str = "cuda", steps: int = 20, windows: int = 1, interval: float = 0.02) -> BenchConfig:
    return BenchConfig(model=ModelConfig(framework="torch", precision="fp32", device=device), batch_size=16,
                       warmup_steps=2, steps=steps, windows=windows, telemetry_interval_s=interval)


def timeline_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as rows:
        return list(csv.DictReader(rows))


def test_energy_power_clock_and_throttling_of_a_window(nvml: Callable[..., ModuleType], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    standin = nvml([h100(0)])
    timeline = tmp_path / "telemetry" / "batch_16.csv"
    done = measure(config(steps=20, windows=2), sleeping(), timeline)  # type: ignore[arg-type]
    values = done.result.values
    assert set(TELEMETRY_VALUES) <= set(values)
    seconds = values["window_s"]  # both windows: about 2 x 20 x 0.02 s
    images = 16 * 20 * 2
    # the counters are read just outside the timed interval: energy / power agrees with the window within 5 %
    assert values["energy_j"] == pytest.approx(300.0 * seconds, rel=0.05)
    assert values["mean_power_w"] == pytest.approx(300.0, rel=0.05)
    assert values["sampled_power_w"] == pytest.approx(300.0)
    assert values["joules_per_sample"] == pytest.approx(values["energy_j"] / images)
    assert values["samples_per_joule"] == pytest.approx(images / values["energy_j"])
    assert values["sm_clock_median_mhz"] == 1980
    assert values["temperature_max_c"] == 40
    assert values["throttle_power_fraction"] == pytest.approx(0.25, abs=0.02)  # 2.5e8 ns per s of violation
    assert values["throttle_thermal_fraction"] == 0.0
    assert values["telemetry_note"] is None
    (gpu,) = values[GPU_TELEMETRY]
    assert gpu["uuid"] == h100(0)["uuid"] and gpu["throttle_source"] == "counters+samples"
    rows = timeline_rows(timeline)
    samples = [row for row in rows if row["event"] == EVENT_SAMPLE and row["phase"] == "timed"]
    assert values["telemetry_samples"] == len(samples) >= 10
    assert {row["window"] for row in samples} == {"0", "1"}
    assert standin.open_count == 0  # every nvmlInit matched by a shutdown
    # the trust signals: the two windows' agreement and the machine's other load (read at the windows' edges)
    assert all(math.isfinite(values[name]) and values[name] >= 0
               for name in ("window_cv_pct", "window_spread_pct", "other_cpu_cores", "load_average"))
    assert values["window_spread_pct"] >= values["window_cv_pct"]  # two windows: range / median >= std / mean
    assert re.search(r"batch 16: trust: windows of 0\.\d+ s, under the 5 s minimum", capsys.readouterr().out)


def test_the_worker_reads_the_gpu_cuda_shows_it(nvml: Callable[..., ModuleType], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    nvml([h100(0), h100(1), h100(2)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", h100(2)["uuid"])
    values = measure(config(), sleeping(), tmp_path / "t.csv").result.values  # type: ignore[arg-type]
    assert [gpu["index"] for gpu in values[GPU_TELEMETRY]] == [2]
    assert values["sampled_power_w"] == pytest.approx(320.0)
    assert {row["gpu"] for row in timeline_rows(tmp_path / "t.csv") if row["event"] == EVENT_SAMPLE} == {"2"}


def test_a_gpu_without_energy_counter_or_new_reason_names_still_gives_the_rest(
        nvml: Callable[..., ModuleType], tmp_path: Path) -> None:
    thermal = REASON_BITS["hw_thermal_slowdown"]
    nvml([h100(0, unsupported=["nvmlDeviceGetTotalEnergyConsumption"], violation_ns_per_s={},
               clock_event_reasons=thermal)], missing=["nvmlDeviceGetCurrentClocksEventReasons"])
    values = measure(config(), sleeping(), tmp_path / "t.csv").result.values  # type: ignore[arg-type]
    assert values["energy_j"] is values["joules_per_sample"] is values["mean_power_w"] is None
    assert "no energy counter" in values["telemetry_note"]
    assert values["sampled_power_w"] == pytest.approx(300.0)
    # the older name of the reasons function answered; no violation counters, so the samples' bits are used
    assert values["throttle_thermal_fraction"] == 1.0
    assert values[GPU_TELEMETRY][0]["throttle_source"] == "samples"


def test_a_window_shorter_than_the_energy_counter_period_gives_no_energy(
        nvml: Callable[..., ModuleType], tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measure(config(steps=2), sleeping(), tmp_path / "t.csv").result.values  # type: ignore[arg-type]
    assert values["energy_j"] is None
    assert "shorter than the energy counter's update period" in values["telemetry_note"]


def test_without_a_timeline_path_or_interval_energy_is_still_read(nvml: Callable[..., ModuleType],
                                                                 tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measure(config(interval=0), sleeping(), tmp_path / "t.csv").result.values  # type: ignore[arg-type]
    assert values["mean_power_w"] == pytest.approx(300.0, rel=0.05)
    assert values["telemetry_samples"] == 0 and values["sm_clock_median_mhz"] is None
    assert not (tmp_path / "t.csv").exists()


def test_on_the_cpu_there_is_no_gpu_telemetry_and_no_timeline(nvml: Callable[..., ModuleType],
                                                             tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measure(config(device="cpu"), sleeping(), tmp_path / "t.csv").result.values  # type: ignore[arg-type]
    assert values["telemetry_note"] == "no GPU telemetry: the run is on the cpu"
    assert all(values[name] is None for name in TELEMETRY_VALUES if name != "telemetry_note")
    assert not (tmp_path / "t.csv").exists()


def test_without_nvml_the_worker_measures_and_says_why(nvml: Callable[..., ModuleType], tmp_path: Path) -> None:
    nvml([h100(0)], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    done = measure(config(), sleeping(), tmp_path / "t.csv")  # type: ignore[arg-type]
    assert done.result.ok and done.result.values["samples_per_sec"] > 0
    assert done.result.values["telemetry_note"].startswith("no GPU telemetry: NVML: ")
    assert done.result.values["energy_j"] is None


def test_a_lost_gpu_is_recorded_and_the_others_are_read(nvml: Callable[..., ModuleType]) -> None:
    nvml([h100(0), h100(1, lost=True), h100(2)])
    report = gpu_report()
    assert [gpu["index"] for gpu in report["gpus"]] == [0, 1, 2]
    assert "unavailable" in report["gpus"][1] and report["gpus"][2]["uuid"] == h100(2)["uuid"]
    assert visible_gpu_count() == 3
    assert json.dumps(report)  # env.json can hold it


def test_a_timeline_that_cannot_be_written_leaves_the_energy(nvml: Callable[..., ModuleType],
                                                             tmp_path: Path) -> None:
    nvml([h100(0)])
    (tmp_path / "afile").write_text("")
    values = measure(config(), sleeping(), tmp_path / "afile" / "t.csv").result.values  # type: ignore[arg-type]
    assert values["mean_power_w"] == pytest.approx(300.0, rel=0.05)
    assert f"no timeline: {tmp_path / 'afile' / 't.csv'}" in values["telemetry_note"]
