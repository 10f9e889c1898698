"""The arithmetic of GPU telemetry: energy from counter edges, throttled shares, the per-batch summary, and the
sampler thread's timeline file. No NVML here: edges and samples are built by hand, so every number is known."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest

from trainbench.bench.timing import run_window
from trainbench.telemetry.counters import (
    ENERGY_COUNTER_MODULUS,
    counter_delta,
    share_with_bits,
    violation_fraction,
    window_energy_j,
)
from trainbench.telemetry.probe import Edge, GpuIdentity, worker_gpu_indices
from trainbench.telemetry.sampler import Sampler
from trainbench.telemetry.schema import (
    EVENT_SAMPLE,
    EVENT_STEP_END,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    GPU_TELEMETRY,
    REASON_BITS,
    TELEMETRY_FIELDS,
    TELEMETRY_VALUES,
)
from trainbench.telemetry.summary import no_telemetry, summarize

# --- energy


def test_energy_is_the_sum_of_counter_differences_in_joules() -> None:
    measured = window_energy_j([1_000_000, 2_000_000], [1_350_000, 2_300_000], [1.0, 1.0], 700.0)
    assert measured.value == pytest.approx(650.0)  # 350 J + 300 J
    assert measured.note is None


def test_a_counter_that_wraps_between_the_edges_still_gives_the_energy() -> None:
    start = ENERGY_COUNTER_MODULUS - 100_000  # 100 J before the wrap
    assert counter_delta(start, 250_000) == 350_000
    assert window_energy_j([start], [250_000], [1.0], 700.0).value == pytest.approx(350.0)


def test_a_counter_reset_is_refused_not_reported_as_energy() -> None:
    # A reset to 0 reads as a wrap of almost 2**64 mJ: far beyond twice the power limit.
    measured = window_energy_j([5_000_000], [1_000], [1.0], 700.0)
    assert measured.value is None
    assert "jumped" in measured.note
    # without a power limit the ceiling is 5 kW: 4.9 kJ in a second passes, 5.1 does not
    assert window_energy_j([0], [4_900_000], [1.0], None).value == pytest.approx(4900.0)
    assert window_energy_j([0], [5_100_000], [1.0], None).value is None


def test_windows_shorter_than_the_counter_period_give_no_energy() -> None:
    measured = window_energy_j([0, 0], [10_000, 10_000], [1.5, 0.05], 700.0)
    assert measured.value is None
    assert "0.050 s is shorter than the energy counter's update period x 10 (about 1 s)" in measured.note


def test_windows_under_ten_counter_periods_give_no_energy() -> None:
    # One update period either way would be up to 20 % of a 0.5 s window; from 1 s on it is at most 10 %.
    assert window_energy_j([0], [100_000], [0.5], 700.0).note is not None
    assert window_energy_j([0], [200_000], [1.0], 700.0).value == pytest.approx(200.0)


def test_a_gpu_without_an_energy_counter_gives_none_and_the_reason() -> None:
    measured = window_energy_j([None], [None], [1.0], 250.0)
    assert measured.value is None
    assert "no energy counter" in measured.note
    assert window_energy_j([], [], [], 250.0).note == "no timed window"


# --- throttling


def test_violation_fraction_is_throttled_time_over_the_time_between_the_reads() -> None:
    # 0.25 s of power violation in the first 1 s window, 0.5 s in the second 2 s one
    assert violation_fraction([3_000_000_000, 4_000_000_000], [3_250_000_000, 4_500_000_000],
                              [1.0, 2.0]) == pytest.approx(0.75 / 3.0)


def test_violation_fraction_never_exceeds_one_and_needs_both_reads() -> None:
    assert violation_fraction([0], [1_100_000_000], [1.0]) == 1.0
    assert violation_fraction([5], [5], [1.0]) == 0.0
    assert violation_fraction([None], [1], [1.0]) is None
    assert violation_fraction([], [], []) is None


def test_share_of_samples_with_a_reason_bit() -> None:
    power = REASON_BITS["sw_power_cap"]
    masks = [0, power, power | REASON_BITS["gpu_idle"], None, REASON_BITS["hw_thermal_slowdown"]]
    assert share_with_bits(masks, power) == pytest.approx(2 / 4)  # None is not a sample
    assert share_with_bits([None, None], power) is None


# --- one batch size's summary

H100 = GpuIdentity(index=3, uuid="GPU-3", name="NVIDIA H100 80GB HBM3", power_limit_w=700.0)

def edge(time_s: float, energy_mj: int | None, power_ns: int | None = None) -> Edge:
    violations = {0: power_ns, 1: None}
    return Edge(time_s, (energy_mj,), (violations,))


def sample(sm_clock: int, power_w: float, reasons: int = 0, temperature: int = 60) -> dict[str, float | int]:
    return {"gpu": 3, "sm_clock_mhz": sm_clock, "memory_clock_mhz": 2619, "power_w": power_w,
            "temperature_c": temperature, "gpu_util_pct": 100, "memory_util_pct": 40,
            "clock_event_reasons": reasons}


def test_summary_of_two_windows_on_one_gpu() -> None:
    starts = [edge(10.0, 1_000_000, 0), edge(12.5, 1_900_000, 100_000_000)]
    ends = [edge(12.0, 1_800_000, 100_000_000), edge(14.5, 2_700_000, 500_000_000)]
    samples = [sample(1980, 390.0), sample(1755, 410.0, REASON_BITS["sw_power_cap"], 71), sample(1830, 400.0)]
    values = summarize([H100], starts, ends, [2.0, 2.0], images=1600, samples=samples)
    assert set(values) == {*TELEMETRY_VALUES, GPU_TELEMETRY}
    assert values["energy_j"] == pytest.approx(1600.0)  # 800 J + 800 J
    assert values["joules_per_sample"] == pytest.approx(1.0)
    assert values["samples_per_joule"] == pytest.approx(1.0)
    assert values["mean_power_w"] == pytest.approx(400.0)  # 1600 J in 4 s
    assert values["sampled_power_w"] == pytest.approx(400.0)
    assert values["sm_clock_median_mhz"] == 1830
    assert values["temperature_max_c"] == 71
    assert values["throttle_power_fraction"] == pytest.approx(0.5 / 4.0)  # counters win over the samples' 1/3
    assert values["throttle_thermal_fraction"] == 0.0  # no thermal counter: the samples' bits say never
    assert values["telemetry_samples"] == 3
    assert values["telemetry_note"] is None
    (gpu,) = values[GPU_TELEMETRY]
    assert (gpu["index"], gpu["uuid"], gpu["throttle_source"]) == (3, "GPU-3", "counters+samples")
    assert gpu["throttle"]["sw_power_cap"] == pytest.approx(1 / 3)  # the bits are kept beside the counters


def test_summary_takes_throttling_from_the_samples_without_counters() -> None:
    starts, ends = [edge(0.0, 0)], [edge(1.0, 300_000)]
    thermal = REASON_BITS["sw_thermal_slowdown"]
    samples = [sample(1400, 300.0, thermal), sample(1400, 300.0, thermal), sample(1980, 300.0),
               sample(1980, 300.0, REASON_BITS["hw_power_brake_slowdown"])]
    values = summarize([H100], starts, ends, [1.0], images=100, samples=samples)
    assert values["throttle_thermal_fraction"] == pytest.approx(0.5)
    assert values["throttle_power_fraction"] == pytest.approx(0.25)
    assert values[GPU_TELEMETRY][0]["throttle_source"] == "samples"
    assert values[GPU_TELEMETRY][0]["throttle"]["sw_thermal_slowdown"] == pytest.approx(0.5)


def test_two_gpus_sum_energy_and_take_the_worst_throttling() -> None:
    other = GpuIdentity(index=5, uuid="GPU-5", name="NVIDIA H100 80GB HBM3", power_limit_w=700.0)
    starts = [Edge(0.0, (0, 0), ({0: 0}, {0: 0}))]
    ends = [Edge(2.0, (700_000, 900_000), ({0: 0}, {0: 1_000_000_000}))]
    values = summarize([H100, other], starts, ends, [2.0], images=400, samples=[])
    assert values["energy_j"] == pytest.approx(1600.0)
    assert values["mean_power_w"] == pytest.approx(800.0)
    assert values["throttle_power_fraction"] == pytest.approx(0.5)
    assert values["sm_clock_median_mhz"] is None
    assert "no timeline samples" in values["telemetry_note"]


def test_an_unusable_energy_reading_is_none_with_its_reason_in_the_note() -> None:
    values = summarize([H100], [edge(0.0, 0)], [edge(0.05, 20_000)], [0.05], images=10, samples=[sample(1980, 400)])
    assert values["energy_j"] is values["joules_per_sample"] is values["samples_per_joule"] is None
    assert values["mean_power_w"] is None
    assert values["sampled_power_w"] == pytest.approx(400.0)
    assert "shorter than the energy counter's update period" in values["telemetry_note"]


def test_no_telemetry_sets_every_field_to_none_and_says_why() -> None:
    values = no_telemetry("no GPU telemetry: the run is on the cpu")
    assert {name for name, value in values.items() if value not in (None, [])} == {"telemetry_note"}
    assert values["telemetry_note"] == "no GPU telemetry: the run is on the cpu"


# --- which GPU a worker computes on


def test_a_worker_uses_the_first_gpu_cuda_shows_it() -> None:
    gpus = [{"index": i, "uuid": f"GPU-{i}aaa"} for i in range(4)]
    assert worker_gpu_indices("cuda", gpus, None) == [0]
    assert worker_gpu_indices("cuda", gpus, "2,3") == [2]
    assert worker_gpu_indices("cuda", gpus, "GPU-3aaa") == [3]
    assert worker_gpu_indices("cuda", gpus, "") == []
    assert worker_gpu_indices("cpu", gpus, None) == []
    assert worker_gpu_indices("cuda", gpus, "3,1,2", local_rank=1) == [1]  # torchrun: its local rank's GPU
    assert worker_gpu_indices("cuda", gpus, "3,1", every_gpu=True) == [3, 1]  # one process driving them all
    assert worker_gpu_indices("cuda", gpus, "3", local_rank=1) == []


# --- the sampler thread and the timeline file


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as rows:
        return list(csv.DictReader(rows))


class StepClock:
    """A clock that only the steps move: one unit per step, read alike by the loop and the sampler's thread."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LockStep:
    """Samples and steps taken in turn: each step moves the clock only while the sampler's thread waits inside
    ``sample()`` (its time and phase already read), so every sample is of one known clock value."""

    samples_per_step = 8

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock
        self.held = False  # False: samples run freely (the first one is taken by start(), in this thread)
        self.inside, self.go = threading.Semaphore(0), threading.Semaphore(0)
        self.readings = iter(range(10_000))

    def sample(self) -> list[dict[str, float]]:
        if self.held:
            self.inside.release()
            self.go.acquire()
        return [{"gpu": 0, "sm_clock_mhz": 1980, "power_w": float(next(self.readings))}]

    def step(self) -> None:
        assert self.inside.acquire(timeout=30), "the sampler took no sample"
        self.clock.now += 1.0
        self.go.release()

    def release(self) -> None:
        self.held = False
        self.go.release()  # the sample waiting, if one is

    def sync(self) -> None:
        pass


def test_sampler_writes_samples_steps_and_window_edges_in_time_order(tmp_path: Path) -> None:
    """The window's markers carry the loop's own start and end times, every step is a row, and every sample taken
    inside the window is marked timed (the loop and the sampler share one clock that only the steps move)."""
    clock = StepClock()
    runner = LockStep(clock)
    path = tmp_path / "telemetry" / "batch_8.csv"
    sampler = Sampler(runner.sample, path, 0.001, clock=clock)
    sampler.start()
    runner.held = True
    window = run_window(runner, 3, 20, after_step=[sampler.step_end], at_start=lambda: sampler.window_start(0),
                        at_end=lambda: sampler.window_end(0), clock=clock)
    runner.release()
    sampler.stop()
    rows = read_rows(path)
    assert list(rows[0]) == list(TELEMETRY_FIELDS)
    times = [float(row["time_s"]) for row in rows]
    assert times == sorted(times)
    events = [row["event"] for row in rows]
    assert events.count(EVENT_STEP_END) == 23
    assert events.count(EVENT_WINDOW_START) == events.count(EVENT_WINDOW_END) == 1
    assert rows[0]["phase"] == "setup" and rows[-1]["phase"] == "done"
    start = next(float(r["time_s"]) for r in rows if r["event"] == EVENT_WINDOW_START)
    end = next(float(r["time_s"]) for r in rows if r["event"] == EVENT_WINDOW_END)
    assert (start, end, window.window_s) == (3.0, 23.0, 20.0)  # the markers are the timed window's edges
    assert window.step_s == (1.0,) * 20 and window.warmup_s == (1.0,) * 3
    assert [float(r["time_s"]) for r in rows if r["event"] == EVENT_STEP_END] == [float(n) for n in range(1, 24)]
    samples = [r for r in rows if r["event"] == EVENT_SAMPLE]
    inside = [float(r["time_s"]) for r in samples if start < float(r["time_s"]) < end]
    assert inside == [float(n) for n in range(4, 23)]  # one sample in each step, away from the edges
    assert all(r["phase"] == "timed" for r in samples if start < float(r["time_s"]) < end)
    timed = [r for r in samples if r["phase"] == "timed"]
    assert all(start <= float(r["time_s"]) <= end for r in timed)
    assert len(sampler.timed_samples) == len(timed)
    assert [int(r["step"]) for r in rows if r["event"] == EVENT_STEP_END] == list(range(23))


def test_a_timeline_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "batch_1.csv"
    path.write_text("kept\n")
    with pytest.raises(FileExistsError):
        Sampler(lambda: [], path, 0.1).start()
    assert path.read_text() == "kept\n"


def test_a_sampler_that_fails_ends_the_timeline_not_the_run(tmp_path: Path) -> None:
    calls = iter(range(10_000))
    failed = threading.Event()

    def sample() -> list[dict[str, float]]:
        if next(calls) >= 3:
            failed.set()
            raise RuntimeError("GPU is lost")
        return [{"gpu": 0, "power_w": 100.0}]

    sampler = Sampler(sample, tmp_path / "batch_1.csv", 0.01)
    sampler.start()
    # the thread's fourth sample fails: waited for, not slept for (0.04 s on an idle machine; 60 s: only a hang)
    assert failed.wait(timeout=60), "the sampler's thread took no fourth sample"
    sampler.stop()  # does not raise
    assert sampler.failure == "the timeline stopped early: GPU is lost"
    rows = read_rows(tmp_path / "batch_1.csv")
    assert [row["power_w"] for row in rows if row["event"] == EVENT_SAMPLE] == ["100.0"] * 3  # kept
