"""GPU telemetry through the worker's real measurement (``bench.worker.measure``), on the stand-in NVML module.

A timed window of known length runs on a stand-in step (no GPU here) while the stand-in NVML reports a GPU drawing
a constant power, so energy, power, clocks and throttled time have known values. One stand-in clock is the window's
clock, the telemetry's clock and the stand-in NVML's: only the step (STEP_S each) and a counter read (COUNTER_READ_S)
move it, so the figures are exact on any machine, however slow or loaded. What a real GPU answers is checked on a
GPU machine (benchmarks/telemetry_overhead.py, benchmarks/results/); this checks that the suite reads, combines and
writes it right, and degrades cleanly without it.
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

from tests.standins.clock import StandInClock
from tests.standins.engine import StandInEngine
from trainbench.bench.worker import Measurement, measure
from trainbench.config import BenchConfig, ModelConfig
from trainbench.telemetry import counters
from trainbench.telemetry.nvml import gpu_report, visible_gpu_count
from trainbench.telemetry.schema import EVENT_SAMPLE, GPU_TELEMETRY, REASON_BITS, TELEMETRY_VALUES

STANDIN = Path(__file__).parent / "standins" / "nvml" / "pynvml.py"
STEP_S = 0.02
# An NVML counter read takes time (here 1 % of a step, the counter read halfway through): a read inside the timed
# window would lengthen it; the reads just outside it add one read's time to each window's energy, 0.05 % here.
COUNTER_READ_S = 0.0002
# Real time, only to end a wait that never ends: the sampler's thread samples every 0.02 s on an idle machine.
SAMPLE_WAIT_S = 60.0


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
def clock() -> StandInClock:
    return StandInClock()


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch, clock: StandInClock) -> Callable[..., ModuleType]:
    """nvml(gpus) installs a fresh stand-in NVML answering for ``gpus`` as the ``pynvml`` imported next, on the
    test's clock; each energy counter read takes COUNTER_READ_S of it."""
    module = _standin_module()

    def install(gpus: list[dict[str, Any]], **spec: Any) -> ModuleType:
        standin = module.fresh({"driver": "550.54.15", "cuda": 12040, "gpus": gpus, **spec}, clock_ns=clock.ns)
        read_energy = standin.nvmlDeviceGetTotalEnergyConsumption

        def slow_read(handle: Any) -> int:
            clock.advance(COUNTER_READ_S / 2)
            value = int(read_energy(handle))
            clock.advance(COUNTER_READ_S / 2)
            return value

        monkeypatch.setattr(standin, "nvmlDeviceGetTotalEnergyConsumption", slow_read)
        monkeypatch.setitem(sys.modules, "pynvml", standin)
        return standin

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Windows of 20 x STEP_S keep these tests fast: energy is reported from one counter period on here (the rule of
    # ten periods is test_telemetry_counters').
    monkeypatch.setattr(counters, "MIN_ENERGY_WINDOW_S", counters.ENERGY_UPDATE_S)
    return install


def stepping(clock: StandInClock, sampled_by: ModuleType | None = None) -> StandInEngine:
    """An engine whose training step takes STEP_S on the stand-in clock. With ``sampled_by`` (the stand-in NVML),
    each step also waits until the sampler's thread has read a power (in real time): every step has its sample,
    however slowly the machine runs that thread."""

    def step() -> None:
        clock.advance(STEP_S)
        if sampled_by is not None:
            seen, deadline = sampled_by.calls["nvmlDeviceGetPowerUsage"], time.monotonic() + SAMPLE_WAIT_S
            while sampled_by.calls["nvmlDeviceGetPowerUsage"] == seen:
                assert time.monotonic() < deadline, f"the sampler read no power in {SAMPLE_WAIT_S:g} s"
                time.sleep(0.001)

    return StandInEngine("stand-in clock", step, samples_per_step=16)


def measured(clock: StandInClock, config: BenchConfig, engine: StandInEngine, timeline: Path) -> Measurement:
    """The worker's measurement with the stand-in clock as both its clocks."""
    return measure(config, engine, timeline, window_clock=clock, telemetry_clock=clock)  # type: ignore[arg-type]


def config(device: str = "cuda", steps: int = 20, windows: int = 1, interval: float = 0.02) -> BenchConfig:
    return BenchConfig(model=ModelConfig(framework="torch", precision="fp32", device=device), batch_size=16,
                       warmup_steps=2, steps=steps, windows=windows, telemetry_interval_s=interval)


def timeline_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as rows:
        return list(csv.DictReader(rows))


def test_energy_power_clock_and_throttling_of_a_window(nvml: Callable[..., ModuleType], clock: StandInClock,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    standin = nvml([h100(0)])
    timeline = tmp_path / "telemetry" / "batch_16.csv"
    done = measured(clock, config(steps=20, windows=2), stepping(clock, standin), timeline)
    values = done.result.values
    assert set(TELEMETRY_VALUES) <= set(values)
    images = 16 * 20 * 2
    # no counter read is timed: the windows are their steps alone (a read inside one adds COUNTER_READ_S)
    assert values["window_s"] == pytest.approx(2 * 20 * STEP_S)
    assert values["samples_per_sec"] == pytest.approx(images / (2 * 20 * STEP_S))
    # the counters are read just outside the timed interval: each window's energy spans it and one read, to the
    # millijoule (a read a step early or late, or before the warm-up, is 300 W x 0.02 s = 6 J off)
    assert values["energy_j"] == pytest.approx(300.0 * 2 * (20 * STEP_S + COUNTER_READ_S), abs=0.0015)
    assert values["mean_power_w"] == pytest.approx(300.0, rel=1e-3)
    assert values["sampled_power_w"] == pytest.approx(300.0)
    assert values["joules_per_sample"] == pytest.approx(values["energy_j"] / images)
    assert values["samples_per_joule"] == pytest.approx(images / values["energy_j"])
    assert values["sm_clock_median_mhz"] == 1980
    assert values["temperature_max_c"] == 40
    assert values["throttle_power_fraction"] == pytest.approx(0.25, rel=1e-4)  # 2.5e8 ns per s of violation
    assert values["throttle_thermal_fraction"] == 0.0
    assert values["telemetry_note"] is None
    (gpu,) = values[GPU_TELEMETRY]
    assert gpu["uuid"] == h100(0)["uuid"] and gpu["throttle_source"] == "counters+samples"
    rows = timeline_rows(timeline)
    samples = [row for row in rows if row["event"] == EVENT_SAMPLE and row["phase"] == "timed"]
    # a sample in every step; the one in a window's first step may carry the phase read before the window began
    assert values["telemetry_samples"] == len(samples) >= 2 * (20 - 1)
    assert {row["window"] for row in samples} == {"0", "1"}
    assert standin.open_count == 0  # every nvmlInit matched by a shutdown
    # the trust signals: the two windows' agreement (equal windows) and the machine's other load (read at the
    # windows' edges on the machine's own clock: whatever it is, a finite number)
    assert values["window_cv_pct"] == values["window_spread_pct"] == pytest.approx(0.0, abs=1e-6)
    assert all(math.isfinite(values[name]) and values[name] >= 0 for name in ("other_cpu_cores", "load_average"))
    assert re.search(r"batch 16: trust: windows of 0\.\d+ s, under the 5 s minimum", capsys.readouterr().out)


def test_the_worker_reads_the_gpu_cuda_shows_it(nvml: Callable[..., ModuleType], clock: StandInClock, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    standin = nvml([h100(0), h100(1), h100(2)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", h100(2)["uuid"])
    values = measured(clock, config(), stepping(clock, standin), tmp_path / "t.csv").result.values
    assert [gpu["index"] for gpu in values[GPU_TELEMETRY]] == [2]
    assert values["sampled_power_w"] == pytest.approx(320.0)
    assert {row["gpu"] for row in timeline_rows(tmp_path / "t.csv") if row["event"] == EVENT_SAMPLE} == {"2"}


def test_a_gpu_without_energy_counter_or_new_reason_names_still_gives_the_rest(
        nvml: Callable[..., ModuleType], clock: StandInClock, tmp_path: Path) -> None:
    thermal = REASON_BITS["hw_thermal_slowdown"]
    standin = nvml([h100(0, unsupported=["nvmlDeviceGetTotalEnergyConsumption"], violation_ns_per_s={},
                         clock_event_reasons=thermal)], missing=["nvmlDeviceGetCurrentClocksEventReasons"])
    values = measured(clock, config(), stepping(clock, standin), tmp_path / "t.csv").result.values
    assert values["energy_j"] is values["joules_per_sample"] is values["mean_power_w"] is None
    assert "no energy counter" in values["telemetry_note"]
    assert values["sampled_power_w"] == pytest.approx(300.0)
    # the older name of the reasons function answered; no violation counters, so the samples' bits are used
    assert values["throttle_thermal_fraction"] == 1.0
    assert values[GPU_TELEMETRY][0]["throttle_source"] == "samples"


def test_a_window_shorter_than_the_energy_counter_period_gives_no_energy(
        nvml: Callable[..., ModuleType], clock: StandInClock, tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measured(clock, config(steps=2), stepping(clock), tmp_path / "t.csv").result.values
    assert values["energy_j"] is None
    assert "shorter than the energy counter's update period" in values["telemetry_note"]


def test_without_a_timeline_path_or_interval_energy_is_still_read(nvml: Callable[..., ModuleType],
                                                                 clock: StandInClock, tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measured(clock, config(interval=0), stepping(clock), tmp_path / "t.csv").result.values
    assert values["mean_power_w"] == pytest.approx(300.0, rel=1e-3)  # 20 steps and one counter read
    assert values["telemetry_samples"] == 0 and values["sm_clock_median_mhz"] is None
    assert not (tmp_path / "t.csv").exists()


def test_on_the_cpu_there_is_no_gpu_telemetry_and_no_timeline(nvml: Callable[..., ModuleType], clock: StandInClock,
                                                             tmp_path: Path) -> None:
    nvml([h100(0)])
    values = measured(clock, config(device="cpu"), stepping(clock), tmp_path / "t.csv").result.values
    assert values["telemetry_note"] == "no GPU telemetry: the run is on the cpu"
    assert all(values[name] is None for name in TELEMETRY_VALUES if name != "telemetry_note")
    assert not (tmp_path / "t.csv").exists()


def test_without_nvml_the_worker_measures_and_says_why(nvml: Callable[..., ModuleType], clock: StandInClock,
                                                      tmp_path: Path) -> None:
    nvml([h100(0)], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    done = measured(clock, config(), stepping(clock), tmp_path / "t.csv")
    assert done.result.ok and done.result.values["samples_per_sec"] == pytest.approx(16 / STEP_S)
    assert done.result.values["telemetry_note"].startswith("no GPU telemetry: NVML: ")
    assert done.result.values["energy_j"] is None


def test_a_lost_gpu_is_recorded_and_the_others_are_read(nvml: Callable[..., ModuleType]) -> None:
    nvml([h100(0), h100(1, lost=True), h100(2)])
    report = gpu_report()
    assert [gpu["index"] for gpu in report["gpus"]] == [0, 1, 2]
    assert "unavailable" in report["gpus"][1] and report["gpus"][2]["uuid"] == h100(2)["uuid"]
    assert visible_gpu_count() == 3
    assert json.dumps(report)  # env.json can hold it


def test_a_timeline_that_cannot_be_written_leaves_the_energy(nvml: Callable[..., ModuleType], clock: StandInClock,
                                                             tmp_path: Path) -> None:
    nvml([h100(0)])
    (tmp_path / "afile").write_text("")
    values = measured(clock, config(), stepping(clock), tmp_path / "afile" / "t.csv").result.values
    assert values["mean_power_w"] == pytest.approx(300.0, rel=1e-3)  # 20 steps and one counter read
    assert f"no timeline: {tmp_path / 'afile' / 't.csv'}" in values["telemetry_note"]
