"""The variability analysis on stand-in folders written by the real writers: hand-computed numbers, failed and
missing repetitions, the per-iteration merge with the GPU timeline, and a wrong folder as one UsageError."""

from __future__ import annotations

import ast
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trainbench.analysis import variability as var
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.errors import UsageError
from trainbench.results.files import temporary_files, write_csv_atomic, write_json_atomic
from trainbench.results.layout import batch_file
from trainbench.results.records import BatchResult, Status
from trainbench.telemetry.schema import (
    EVENT_SAMPLE,
    EVENT_STEP_END,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    PHASE_TIMED,
    PHASE_WARMUP,
    TELEMETRY_DIR,
    TELEMETRY_FIELDS,
)

HOST = "node01"
NAME = "NVIDIA H100 80GB HBM3"
# images/s per GPU and repetition at batch 64: GPU medians 1000, 1000, 1020, 750 (GPU 3 is 25% slower).
RATES_64 = {0: [1000.0, 1010.0, 990.0], 1: [1000.0, 995.0, 1005.0], 2: [1020.0, 1000.0, 1040.0],
            3: [750.0, 745.0, 760.0]}
# At batch 128 GPU 3 keeps up: the outlier is per batch size.
RATES_128 = {0: [1100.0] * 3, 1: [1110.0] * 3, 2: [1090.0] * 3, 3: [1100.0] * 3}
CLOCK = {0: 1980.0, 1: 1980.0, 2: 1995.0, 3: 1500.0}


def values(rate: float, gpu: int, repetition: int) -> dict[str, Any]:
    power = 600.0 + 10 * gpu + repetition
    return {"samples_per_sec": rate, "sm_clock_median_mhz": CLOCK[gpu] + repetition, "mean_power_w": power,
            "temperature_max_c": 60.0 + gpu + repetition, "joules_per_sample": power / rate,
            "energy_j": None, "telemetry_note": None}


def write_plan(folder: Path, gpus: int = 4, repetitions: int = 3, threshold: float = 0.1, **extra: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / var.VARIABILITY_FILE, {
        "host": HOST,
        "gpus": [{"index": i, "uuid": f"GPU-{i:04d}", "name": NAME} for i in range(gpus)],
        "repetitions": repetitions, "parallel": False, "outlier_threshold": threshold,
        "batch_sizes": [64, 128], **extra,
    })


def write_run(folder: Path, gpu: int, repetition: int, results: list[BatchResult],
              step_s: tuple[float, ...] = (0.1, 0.1, 0.1)) -> Path:
    """One (GPU, repetition)'s throughput run folder, as the sweep writes it."""
    run_dir = folder / f"gpu{gpu}_rep{repetition}"
    run_dir.mkdir()
    write_json_atomic(run_dir / "env.json", {"hostname": HOST})
    run = ThroughputRun(run_dir, {"framework": "pytorch", "warmup_steps": 2, "timed_steps": 3})
    for result in results:
        run.add(result, (0.5, 0.2), step_s)
    return run_dir


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """4 GPUs x 3 repetitions x batch 64 and 128; GPU 1's repetition 2 ran out of memory at 64; GPU 2's
    repetition 1 never ran (no folder)."""
    folder = tmp_path / "variability"
    write_plan(folder)
    for gpu in range(4):
        for repetition in range(3):
            if (gpu, repetition) == (2, 1):
                continue
            first = BatchResult(64, Status.OK, None, values(RATES_64[gpu][repetition], gpu, repetition))
            if (gpu, repetition) == (1, 2):
                first = BatchResult.failed(64, Status.OOM, "CUDA out of memory")
            second = BatchResult(128, Status.OK, None, values(RATES_128[gpu][repetition], gpu, repetition))
            write_run(folder, gpu, repetition, [first, second])
    return folder


def test_runs_keep_failures_and_skip_missing_folders(study: Path) -> None:
    runs = var.load_runs(study)
    assert list(runs.columns) == list(var.RUN_COLUMNS)
    assert len(runs) == 11 * 2  # 12 (GPU, repetition) pairs less the missing one, two batch sizes each
    assert not ((runs["gpu_index"] == 2) & (runs["repetition"] == 1)).any()
    oom = runs[runs["status"] == "oom"]
    assert len(oom) == 1
    row = oom.iloc[0]
    assert (row["gpu_index"], row["repetition"], row["batch_size"], row["run"]) == (1, 2, 64, "gpu1_rep2")
    assert math.isnan(row["samples_per_sec"]) and row["error"] == "CUDA out of memory"
    first = runs[(runs["gpu_index"] == 3) & (runs["repetition"] == 0) & (runs["batch_size"] == 64)].iloc[0]
    assert (first["host"], first["uuid"], first["name"]) == (HOST, "GPU-0003", NAME)
    assert first["samples_per_sec"] == 750.0 and first["sm_clock_median_mhz"] == 1500.0
    assert first["joules_per_sample"] == pytest.approx(630.0 / 750.0)


def test_one_slow_gpu_is_the_only_outlier(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder)
    for gpu, rates in RATES_64.items():
        for repetition, rate in enumerate(rates):
            write_run(folder, gpu, repetition, [BatchResult(64, Status.OK, None, values(rate, gpu, repetition))])
    gpus = var.per_gpu(var.load_runs(folder), 0.10)
    assert list(gpus["gpu_index"]) == [0, 1, 2, 3]
    assert list(gpus["samples_per_sec_median"]) == [1000.0, 1000.0, 1020.0, 750.0]
    # median of the GPU medians: (1000 + 1000) / 2 = 1000
    assert gpus["vs_median_pct"].tolist() == pytest.approx([0.0, 0.0, 2.0, -25.0])
    assert gpus["outlier"].tolist() == [False, False, False, True]
    assert gpus["repetitions"].tolist() == [3, 3, 3, 3]
    slow = gpus.iloc[3]
    assert slow["sm_clock_median_mhz"] == 1501.0  # 1500, 1501, 1502
    assert slow["power_median_w"] == 631.0
    assert (slow["temperature_median_c"], slow["temperature_max_c"]) == (64.0, 65.0)
    assert slow["joules_per_sample_median"] == pytest.approx(statistics.median([630 / 750, 631 / 745, 632 / 760]))
    # A looser threshold: 25% slower is not more than 30% slower.
    assert not var.per_gpu(var.load_runs(folder), 0.30)["outlier"].any()


def test_across_numbers_by_hand(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder)
    for gpu, rates in RATES_64.items():
        for repetition, rate in enumerate(rates):
            write_run(folder, gpu, repetition, [BatchResult(64, Status.OK, None, values(rate, gpu, repetition))])
    runs = var.load_runs(folder)
    table = var.across(runs, var.per_gpu(runs)).set_index("scope")
    gpus = table.loc["gpus"]
    mean = (1000 + 1000 + 1020 + 750) / 4  # 942.5
    squares = (1000 - mean) ** 2 * 2 + (1020 - mean) ** 2 + (750 - mean) ** 2  # 49675
    assert gpus["n"] == 4 and gpus["samples_per_sec_median"] == 1000.0
    assert gpus["cv_pct"] == pytest.approx(math.sqrt(squares / 3) / mean * 100)  # 13.65 %
    assert gpus["spread_pct"] == pytest.approx(27.0)  # (1020 - 750) / 1000
    assert gpus["slowest_over_median"] == pytest.approx(0.75)
    assert gpus["outliers"] == "3"
    every = table.loc["runs"]
    all_rates = [rate for rates in RATES_64.values() for rate in rates]
    assert every["n"] == 12 and every["samples_per_sec_median"] == 1000.0
    assert every["cv_pct"] == pytest.approx(statistics.stdev(all_rates) / statistics.mean(all_rates) * 100)
    assert every["spread_pct"] == pytest.approx(29.5)  # (1040 - 745) / 1000
    assert every["slowest_over_median"] == pytest.approx(0.745)
    assert pd.isna(every["outliers"])


def test_failed_and_missing_repetitions_are_not_counted(study: Path) -> None:
    runs = var.load_runs(study)
    gpus = var.per_gpu(runs).set_index(["batch_size", "gpu_index"])
    assert gpus.loc[(64, 1), "repetitions"] == 2 and gpus.loc[(64, 1), "failed"] == 1
    assert gpus.loc[(64, 1), "samples_per_sec_median"] == 997.5  # 1000 and 995; the OOM is not a zero
    assert gpus.loc[(64, 2), "repetitions"] == 2 and gpus.loc[(64, 2), "failed"] == 0
    assert gpus.loc[(64, 2), "samples_per_sec_median"] == 1030.0  # 1020 and 1040
    assert gpus.loc[(128, 1), "repetitions"] == 3
    # Batch 64: medians 1000, 997.5, 1030, 750 -> median 998.75; batch 128: nobody is slow.
    assert gpus.loc[(64, 3), "vs_median_pct"] == pytest.approx((750 / 998.75 - 1) * 100)
    assert gpus.xs(64)["outlier"].tolist() == [False, False, False, True]
    assert not gpus.xs(128)["outlier"].any()
    table = var.across(runs, var.per_gpu(runs)).set_index(["batch_size", "scope"])
    assert table.loc[(64, "runs"), "n"] == 10  # 12 less the OOM, less the missing folder
    assert table.loc[(128, "runs"), "n"] == 11
    assert table.loc[(128, "gpus"), "outliers"] == ""
    assert table.loc[(128, "gpus"), "spread_pct"] == pytest.approx(20 / 1100 * 100)


def test_a_gpu_with_no_ok_repetition_keeps_a_row_without_values(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder, gpus=3, repetitions=1)
    for gpu in range(2):
        write_run(folder, gpu, 0, [BatchResult(64, Status.OK, None, values(1000.0 + gpu, gpu, 0))])
    write_run(folder, 2, 0, [BatchResult.failed(64, Status.ERROR, "worker crashed")])
    gpus = var.per_gpu(var.load_runs(folder))
    lost = gpus[gpus["gpu_index"] == 2].iloc[0]
    assert lost["repetitions"] == 0 and lost["failed"] == 1
    assert math.isnan(lost["samples_per_sec_median"]) and math.isnan(lost["vs_median_pct"])
    assert not lost["outlier"]
    one = var.spread(pd.Series([1000.0]))
    assert one["n"] == 1 and math.isnan(one["cv_pct"]) and (one["spread_pct"], one["slowest_over_median"]) == (0, 1)
    assert gpus.loc[gpus["gpu_index"] == 1, "vs_median_pct"].item() == pytest.approx((1001 / 1000.5 - 1) * 100)


def timeline_rows(gpu: int = 0, other: int = 1) -> list[dict[str, Any]]:
    """Samples every 0.1 s from 100.7 to 101.6 (GPU ``gpu``: SM clock 1000 + 10 k at 100 + k/10; ``other``: 9999),
    warm-up steps, timed window 0 (start 100.5, steps 2-4 end at 100.62, 100.8, 101.03), window 1 (start 101.2,
    steps 0-1 end at 101.35, 101.57)."""
    rows: list[dict[str, Any]] = []
    for k in range(7, 17):
        t = round(100 + k / 10, 1)
        rows.append({"time_s": t, "event": EVENT_SAMPLE, "phase": PHASE_TIMED, "gpu": gpu,
                     "sm_clock_mhz": 1000 + 10 * k, "power_w": 200 + k, "temperature_c": 50 + k})
        rows.append({"time_s": t, "event": EVENT_SAMPLE, "phase": PHASE_TIMED, "gpu": other, "sm_clock_mhz": 9999,
                     "power_w": 999, "temperature_c": 99})
    events = [
        (100.25, EVENT_STEP_END, PHASE_WARMUP, None, 0), (100.45, EVENT_STEP_END, PHASE_WARMUP, None, 1),
        (100.5, EVENT_WINDOW_START, PHASE_TIMED, 0, 1), (100.62, EVENT_STEP_END, PHASE_TIMED, 0, 2),
        (100.8, EVENT_STEP_END, PHASE_TIMED, 0, 3), (101.03, EVENT_STEP_END, PHASE_TIMED, 0, 4),
        (101.1, EVENT_WINDOW_END, PHASE_TIMED, 0, 4), (101.2, EVENT_WINDOW_START, PHASE_TIMED, 1, 4),
        (101.35, EVENT_STEP_END, PHASE_TIMED, 1, 5), (101.57, EVENT_STEP_END, PHASE_TIMED, 1, 6),
        (101.6, EVENT_WINDOW_END, PHASE_TIMED, 1, 6),
    ]
    rows += [{"time_s": t, "event": e, "phase": p, "window": w, "step": s} for t, e, p, w, s in events]
    rows.sort(key=lambda row: row["time_s"])
    # An event written in the flush after a later sample (as the sampler may): the reader sorts by time.
    late = next(i for i, row in enumerate(rows) if row["time_s"] == 101.03)
    rows.insert(late + 3, rows.pop(late))
    return rows


def write_timeline(run_dir: Path, batch_size: int, tail: str = "", gpu: int = 0, other: int = 1) -> None:
    path = batch_file(run_dir / TELEMETRY_DIR, batch_size, ".csv")
    path.parent.mkdir(exist_ok=True)
    write_csv_atomic(path, TELEMETRY_FIELDS, timeline_rows(gpu, other))
    if tail:
        with path.open("a", encoding="utf-8") as out:
            out.write(tail)


def test_iterations_durations_and_gpu_state(tmp_path: Path) -> None:
    run_dir = tmp_path / "gpu0_rep0"
    run_dir.mkdir()
    write_timeline(run_dir, 64, tail="101.7,sample,done,,,0,12")  # a row cut short by a kill: dropped
    steps = var.iterations(run_dir, 64)
    assert list(steps.columns) == list(var.ITERATION_COLUMNS)
    assert steps["window"].tolist() == [0, 0, 0, 1, 1]
    assert steps["step"].tolist() == [2, 3, 4, 5, 6]
    # a window's last step ends at the window's synchronised end (101.1, 101.6): the durations add up to it
    assert steps["duration_s"].tolist() == pytest.approx([0.12, 0.18, 0.30, 0.15, 0.25])
    assert steps["end_time_s"].tolist() == [100.62, 100.8, 101.1, 101.35, 101.6]
    # 100.62: before the first sample; 100.8: the sample at that very time; then 101.1, 101.3, 101.6.
    assert math.isnan(steps["sm_clock_mhz"].iloc[0]) and math.isnan(steps["power_w"].iloc[0])
    assert steps["sm_clock_mhz"].iloc[1:].tolist() == [1080.0, 1110.0, 1130.0, 1160.0]
    assert steps["power_w"].iloc[1:].tolist() == [208.0, 211.0, 213.0, 216.0]
    assert steps["temperature_c"].iloc[1:].tolist() == [58.0, 61.0, 63.0, 66.0]
    other = var.iterations(run_dir, 64, gpu=1)
    assert other["sm_clock_mhz"].iloc[1:].tolist() == [9999.0] * 4
    assert other["duration_s"].tolist() == steps["duration_s"].tolist()


def test_iterations_without_a_timeline_use_steps_csv(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 0, 0, [BatchResult(64, Status.OK, None, values(1000.0, 0, 0))],
                        step_s=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6))  # two windows of timed_steps=3
    steps = var.iterations(run_dir, 64)
    assert steps["duration_s"].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert steps["window"].tolist() == [0, 0, 0, 1, 1, 1]
    assert steps[["end_time_s", *var.STATE_FIELDS]].isna().all().all()
    assert var.iterations(run_dir, 128).empty  # no such batch size
    (run_dir / TELEMETRY_DIR).mkdir()
    write_csv_atomic(batch_file(run_dir / TELEMETRY_DIR, 64, ".csv"), TELEMETRY_FIELDS, [])  # killed at once
    assert var.iterations(run_dir, 64)["duration_s"].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert var.iterations(tmp_path / "absent", 64).empty


def test_write_report_files_and_threshold_from_the_plan(study: Path) -> None:
    write_timeline(study / "gpu3_rep0", 64, gpu=3, other=0)
    frames = var.write_report(study)  # the plan says 0.1
    assert frames["gpus"]["outlier"].sum() == 1
    for name, file in (("runs", var.RUNS_FILE), ("gpus", var.GPUS_FILE), ("across", var.ACROSS_FILE)):
        back = pd.read_csv(study / file)
        assert list(back.columns) == list(frames[name].columns)
        assert len(back) == len(frames[name])
        assert not temporary_files(study / file)
    gpus_back = pd.read_csv(study / var.GPUS_FILE)
    assert gpus_back.loc[gpus_back["outlier"], "gpu_index"].tolist() == [3]
    assert gpus_back.loc[gpus_back["outlier"], "vs_median_pct"].item() == pytest.approx((750 / 998.75 - 1) * 100)
    iterations = pd.read_csv(study / "gpu3_iterations.csv")
    assert list(iterations.columns) == ["repetition", "batch_size", *var.ITERATION_COLUMNS]
    assert len(iterations) == 5 + 3 + 2 * (3 + 3)  # the timeline's 5 timed steps, steps.csv's 3 for the rest
    timed = iterations[(iterations["repetition"] == 0) & (iterations["batch_size"] == 64)]
    assert timed["duration_s"].tolist() == pytest.approx([0.12, 0.18, 0.30, 0.15, 0.25])
    assert timed["sm_clock_mhz"].tolist()[1:] == [1080.0, 1110.0, 1130.0, 1160.0]  # GPU 3's samples, not GPU 0's
    rest = iterations[(iterations["repetition"] == 2) & (iterations["batch_size"] == 128)]
    assert rest["duration_s"].tolist() == [0.1, 0.1, 0.1] and rest["sm_clock_mhz"].isna().all()
    assert len(pd.read_csv(study / "gpu2_iterations.csv")) == 2 * 2 * 3  # repetition 1 is missing
    for gpu in range(4):
        assert (study / f"gpu{gpu}_iterations.csv").is_file()
    assert set(frames) == {"runs", "gpus", "across", "unmeasured", *(f"gpu{gpu}_iterations" for gpu in range(4))}
    assert frames["unmeasured"].empty and not (study / "unmeasured.csv").exists()
    loose = var.write_report(study, threshold=0.3)
    assert not loose["gpus"]["outlier"].any()
    assert not pd.read_csv(study / var.GPUS_FILE)["outlier"].any()


def test_format_report_marks_the_outlier_only(study: Path) -> None:
    text = var.format_report(var.write_report(study))
    lines = text.splitlines()
    marked = [line for line in lines if "OUTLIER" in line]
    assert len(marked) == 1 and marked[0].split()[0] == "3" and "-24.9%" in marked[0]
    assert any("(1 failed)" in line and line.split()[0] == "1" for line in lines)
    assert "batch 64" in lines and "batch 128" in lines
    assert any("across GPUs' medians (n=4)" in line and "outliers: GPU 3" in line for line in lines)
    assert any("across all runs (n=10)" in line and "spread 29.6%" in line for line in lines)  # 295 / 997.5


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "not found"),
    ("{not json", "JSONDecodeError"),
    ("[1, 2]", "not a JSON object"),
    ('{"format": 2, "gpus": [], "repetitions": 3}', "gpus is []"),
    ('{"format": 2, "gpus": [{"uuid": "GPU-1"}], "repetitions": 3}', "gpus[0] has no whole-number index"),
    ('{"format": 2, "gpus": [{"index": 0}], "repetitions": 0}', "repetitions is 0"),
    ('{"format": 2, "gpus": [{"index": 0}], "repetitions": 1, "outlier_threshold": 2}', "outlier_threshold is 2"),
    ('{"format": 99, "gpus": [{"index": 0}], "repetitions": 1}', "newer than this trainbench reads"),
])
def test_not_a_variability_folder_is_a_usage_error(tmp_path: Path, content: str | None, fragment: str) -> None:
    if content is not None:
        (tmp_path / var.VARIABILITY_FILE).write_text(content)
    for call in (var.load_runs, var.write_report):
        with pytest.raises(UsageError) as caught:
            call(tmp_path)
        message = str(caught.value)
        assert str(tmp_path / var.VARIABILITY_FILE) in message and fragment in message
        assert "\n" not in message
    assert not list(tmp_path.glob("*.csv"))  # nothing written for a wrong folder


def test_an_empty_study_reports_nothing(tmp_path: Path) -> None:
    write_plan(tmp_path)
    frames = var.write_report(tmp_path)
    assert frames["runs"].empty and frames["gpus"].empty and frames["across"].empty
    assert list(pd.read_csv(tmp_path / var.GPUS_FILE).columns) == list(var.GPU_COLUMNS)
    assert var.format_report(frames).splitlines() == [
        "no result in this variability folder",
        *(f"GPU {gpu} ({NAME}): no finished run (none of its 3 run folders exists); left out of every figure"
          for gpu in range(4))]


def test_analysis_imports_only_the_layers_below() -> None:
    tree = ast.parse(Path(var.__file__).read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    allowed = ("trainbench.results", "trainbench.telemetry.schema", "trainbench.errors", "trainbench.config")
    for module in modules:
        if module and module.startswith("trainbench"):
            assert module.startswith(allowed), module


# --- GPUs that are not there, settings that differ, values that are no measurement ----------------------------

def test_a_gpu_without_a_finished_run_is_named_not_dropped(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder, repetitions=2)
    for gpu in range(3):  # GPU 3: one folder killed before its summary, the other never started
        for repetition in range(2):
            write_run(folder, gpu, repetition, [BatchResult(64, Status.OK, None, values(1000.0, gpu, repetition))])
    (folder / "gpu3_rep0").mkdir()
    frames = var.write_report(folder)
    assert frames["unmeasured"].to_dict("records") == [
        {"gpu_index": 3, "uuid": "GPU-0003", "name": NAME,
         "reason": "1 of its 2 run folders exist, none with a summary.json"}]
    assert sorted(frames["gpus"]["gpu_index"]) == [0, 1, 2]
    text = var.format_report(frames).splitlines()
    assert text[-1] == (f"GPU 3 ({NAME}): no finished run (1 of its 2 run folders exist, none with a summary.json); "
                        "left out of every figure")
    assert any("across GPUs' medians (n=3)" in line for line in text)


def test_a_gpu_missing_at_one_batch_size_is_named_there(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder, gpus=2, repetitions=1)
    write_run(folder, 0, 0, [BatchResult(64, Status.OK, None, values(1000.0, 0, 0)),
                             BatchResult(128, Status.OK, None, values(1100.0, 0, 0))])
    write_run(folder, 1, 0, [BatchResult(64, Status.OK, None, values(990.0, 1, 0))])  # killed before 128
    lines = var.format_report(var.write_report(folder)).splitlines()
    batch_128 = lines[lines.index("batch 128"):]
    assert "   1  no result at batch 128 (left out of its figures)" in batch_128


def _edited_header(run_dir: Path, key: str, value: Any) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    summary[key] = value
    (run_dir / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("precision", "bf16", "precision is None in gpu0_rep0 but 'bf16' in gpu1_rep0"),
    ("timed_steps", 30, "timed_steps is 3 in gpu0_rep0 but 30 in gpu1_rep0"),
    ("model", {"num_classes": 10}, "model.num_classes is None in gpu0_rep0 but 10 in gpu1_rep0"),
])
def test_runs_of_different_settings_are_refused_naming_the_setting(tmp_path: Path, key: str, value: Any,
                                                                   fragment: str) -> None:
    folder = tmp_path / "v"
    write_plan(folder, gpus=2, repetitions=1)
    for gpu in range(2):
        write_run(folder, gpu, 0, [BatchResult(64, Status.OK, None, values(1000.0 - 200 * gpu, gpu, 0))])
    _edited_header(folder / "gpu1_rep0", key, value)
    for call in (var.load_runs, var.write_report):
        with pytest.raises(UsageError) as caught:
            call(folder)
        message = str(caught.value)
        assert message.startswith(f"{folder}: its runs used different settings: {fragment}")
        assert "\n" not in message
    assert not list(folder.glob("*.csv"))


def test_an_invalid_value_is_shown_counted_and_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    write_plan(folder, gpus=2, repetitions=2)
    for gpu in range(2):
        for repetition in range(2):
            write_run(folder, gpu, repetition, [BatchResult(64, Status.OK, None, values(1000.0, gpu, repetition))])
    summary_path = folder / "gpu1_rep1" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["results"][0]["samples_per_sec"] = -5000.0  # a hand edit: a rate no run measures
    summary_path.write_text(json.dumps(summary))
    frames = var.write_report(folder)
    gpu1 = frames["gpus"].set_index("gpu_index").loc[1]
    assert (gpu1["repetitions"], gpu1["failed"], gpu1["invalid"]) == (1, 0, 1)
    assert gpu1["samples_per_sec_median"] == 1000.0
    runs_scope = frames["across"][frames["across"]["scope"] == var.SCOPE_RUNS].iloc[0]
    assert (runs_scope["n"], runs_scope["slowest_over_median"]) == (3, 1.0)
    lines = var.format_report(frames).splitlines()
    assert any(line.split()[0] == "1" and line.endswith("(1 invalid)") for line in lines)
    assert lines[-2:] == ["1 invalid result left out of every median and spread:",
                          f"  {summary_path}: results[0].samples_per_sec is -5000.0, not a finite non-negative number"]
