"""The telemetry figure and its reader: timelines written as the sampler writes them, also cut short by a kill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trainbench.render import telemetry_plot
from trainbench.render.telemetry_plot import plot_telemetry, read_timeline, throttled_samples, timed_spans
from trainbench.results.files import write_csv_atomic
from trainbench.results.layout import batch_file
from trainbench.telemetry.schema import (
    EVENT_SAMPLE,
    EVENT_STEP_END,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    PHASE_DONE,
    PHASE_TIMED,
    PHASE_WARMUP,
    REASON_BITS,
    SAMPLE_FIELDS,
    TELEMETRY_FIELDS,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _sample(time_s: float, gpu: int, phase: str, window: int | None = None, reasons: int = 0) -> dict[str, Any]:
    return {"time_s": time_s, "event": EVENT_SAMPLE, "phase": phase, "window": window, "step": None, "gpu": gpu,
            "sm_clock_mhz": 1980 - 10 * gpu, "memory_clock_mhz": 2619, "power_w": 300.5 + gpu,
            "temperature_c": 60 + gpu, "gpu_util_pct": 99, "memory_util_pct": 40, "clock_event_reasons": reasons}


def _event(time_s: float, event: str, phase: str, window: int | None = None, step: int | None = None) -> dict[str, Any]:
    return {"time_s": time_s, "event": event, "phase": phase, "window": window, "step": step}


def _timeline(start: float, gpus: int, windows: list[tuple[float, float]], reasons: int = 0) -> list[dict[str, Any]]:
    """Samples every 0.5 s on ``gpus`` GPUs from ``start`` for 10 s, a step each second, the given timed windows
    (seconds after ``start``); every sample inside a window carries ``reasons``."""
    rows: list[dict[str, Any]] = []
    for tick in range(20):
        t = start + 0.5 * tick
        window = next((i for i, (a, b) in enumerate(windows) if start + a <= t <= start + b), None)
        phase = PHASE_TIMED if window is not None else PHASE_WARMUP
        rows += [_sample(t, gpu, phase, window, reasons if window is not None else 0) for gpu in range(gpus)]
        if tick % 2:
            rows.append(_event(t + 0.01, EVENT_STEP_END, phase, window, tick // 2))
    for i, (a, b) in enumerate(windows):
        rows.append(_event(start + a, EVENT_WINDOW_START, PHASE_TIMED, i))
        rows.append(_event(start + b, EVENT_WINDOW_END, PHASE_DONE, i))
    return sorted(rows, key=lambda row: row["time_s"])


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """batch 32 on one GPU (one window, 2-5 s) then batch 64 on two GPUs (two windows), 100 s later."""
    folder = tmp_path / "telemetry"
    folder.mkdir()
    write_csv_atomic(batch_file(folder, 32, ".csv"), TELEMETRY_FIELDS, _timeline(1000.0, 1, [(2.0, 5.0)]))
    write_csv_atomic(batch_file(folder, 64, ".csv"), TELEMETRY_FIELDS,
                     _timeline(1100.0, 2, [(1.0, 3.0), (4.0, 6.5)], reasons=REASON_BITS["sw_power_cap"]))
    return folder


def test_read_timeline_one_frame_with_batch_size_and_numbers(run: Path) -> None:
    frame = read_timeline(run)
    assert list(frame.columns) == [*TELEMETRY_FIELDS, "batch_size"]
    counts = frame.groupby("batch_size").size().to_dict()
    # 20 samples per GPU, 10 steps, 2 edges per window.
    assert counts == {32: 20 + 10 + 2, 64: 40 + 10 + 4}
    samples = frame[frame["event"] == EVENT_SAMPLE]
    assert samples.groupby("batch_size")["gpu"].nunique().to_dict() == {32: 1, 64: 2}
    for field in ("time_s", "window", "step", "gpu", *SAMPLE_FIELDS):
        assert pd.api.types.is_numeric_dtype(frame[field]), (field, frame[field].dtype)
    assert frame["batch_size"].dtype == "int64"
    assert frame["time_s"].is_monotonic_increasing
    assert samples["power_w"].iloc[0] == pytest.approx(300.5)
    assert frame.loc[frame["event"] != EVENT_SAMPLE, "gpu"].isna().all()


def test_timed_spans_every_window_with_its_batch(run: Path) -> None:
    assert timed_spans(read_timeline(run)) == [(1002.0, 1005.0, 32), (1101.0, 1103.0, 64), (1104.0, 1106.5, 64)]


def test_throttled_samples_only_power_or_thermal_bits(run: Path) -> None:
    frame = read_timeline(run)
    limited = throttled_samples(frame)
    assert set(limited["batch_size"]) == {64}
    assert (limited["phase"] == PHASE_TIMED).all()
    assert len(limited) == len(frame[(frame["batch_size"] == 64) & (frame["phase"] == PHASE_TIMED)
                                     & (frame["event"] == EVENT_SAMPLE)])
    # Bits that are neither power nor thermal (idle, sync boost) are not limits.
    other = frame.assign(clock_event_reasons=frame["clock_event_reasons"].where(
        frame["clock_event_reasons"].eq(0), REASON_BITS["gpu_idle"] | REASON_BITS["sync_boost"]))
    assert throttled_samples(other).empty
    thermal = frame.assign(clock_event_reasons=REASON_BITS["hw_thermal_slowdown"])
    assert len(throttled_samples(thermal)) == (frame["event"] == EVENT_SAMPLE).sum()


def test_plot_writes_a_png(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "telemetry.png"
    assert plot_telemetry(run, out, "GPU telemetry: test") is True
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_no_sample_returns_false_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "telemetry"
    folder.mkdir()
    out = tmp_path / "telemetry.png"
    assert plot_telemetry(folder, out, "t") is False  # no file at all
    assert plot_telemetry(tmp_path / "absent", out, "t") is False
    (folder / "batch_8.csv").write_text("")  # killed before the header
    write_csv_atomic(folder / "batch_16.csv", TELEMETRY_FIELDS, [])  # header only
    events = [_event(1.0, EVENT_STEP_END, PHASE_WARMUP, step=0), _event(2.0, EVENT_WINDOW_START, PHASE_TIMED, 0)]
    write_csv_atomic(folder / "batch_32.csv", TELEMETRY_FIELDS, events)  # events, but no sample (no GPU)
    assert plot_telemetry(folder, out, "t") is False
    assert not out.exists()
    frame = read_timeline(folder)
    assert list(frame["batch_size"]) == [32, 32]
    assert frame["time_s"].dtype == "float64"


def test_truncated_last_line_still_plots(run: Path, tmp_path: Path) -> None:
    killed = batch_file(run, 128, ".csv")
    whole = _timeline(1200.0, 1, [(1.0, 9.6)])
    assert whole[-1]["event"] == EVENT_WINDOW_END
    write_csv_atomic(killed, TELEMETRY_FIELDS, whole)
    text = killed.read_text()
    killed.write_text(text[: len(text) - 5])  # the worker killed while writing its window's end
    frame = read_timeline(run)
    rows = frame[frame["batch_size"] == 128]
    assert len(rows) == len(whole) - 1  # the cut row is dropped, not misread
    assert not rows.loc[rows["event"] == EVENT_SAMPLE, "power_w"].isna().any()
    # Its window lost its end with the kill: shaded up to the batch size's last row.
    assert timed_spans(frame)[-1] == (1201.0, float(rows["time_s"].max()), 128)
    out = tmp_path / "telemetry.png"
    assert plot_telemetry(run, out, "t") is True
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_unreadable_and_foreign_files_are_skipped(run: Path) -> None:
    (run / "batch_256.csv").write_bytes(b"\x00\xff garbage without a line end")
    (run / "batch_512.csv").write_text("a,b\n1,2\n")  # not a timeline
    (run / "batch_x.csv").write_text("time_s,event\n1,sample\n")  # no batch size in the name
    odd_rows = [{**_sample(1300.0, 0, PHASE_WARMUP), "power_w": "n/a", "gpu": "1.5"}, _sample(1301.0, 0, PHASE_WARMUP)]
    write_csv_atomic(run / "batch_1024.csv", TELEMETRY_FIELDS, odd_rows)
    frame = read_timeline(run)
    assert set(frame["batch_size"]) == {32, 64, 1024}
    odd = frame[frame["batch_size"] == 1024]
    assert odd["power_w"].isna().tolist() == [True, False]  # an unreadable number is missing, not an error
    assert odd["gpu"].isna().tolist() == [True, False]


def test_column_names_are_the_schemas() -> None:
    """The module names columns as strings; every one of them must be a column the sampler writes."""
    used = {field for field, _ in telemetry_plot.PANELS}
    used |= {*telemetry_plot._TEXT_FIELDS, *telemetry_plot._INTEGER_FIELDS}
    assert used <= set(TELEMETRY_FIELDS)
