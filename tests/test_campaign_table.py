"""A campaign's results table: rebuilt from run folders written by the real stores, read back with pandas
without cleaning, unreadable folders as error rows, and the per-configuration summary over repetitions."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from trainbench import workloads
from trainbench.bench.stats import summarize_windows
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.timing import Window
from trainbench.campaign.matrix import Experiment, Matrix, load_matrix, planned_runs
from trainbench.campaign.table import (
    AXES_AFTER,
    COLUMNS,
    campaign_runs,
    campaign_summary,
    campaign_table,
    format_summary,
    invalid_errors,
    write_campaign_table,
)
from trainbench.profile.run import ProfileRun
from trainbench.results.files import temporary_files, write_json_atomic
from trainbench.results.layout import RESULTS
from trainbench.results.records import BatchResult, Status

MATRIX = """\
axes:
  framework: [torch]
  precision: [fp32, bf16]
  batch_size: [2, 4]
  image_size: [64]
  channels_last: [false]
  profiler: [none, torch]
repeats: 3
windows: 3
"""
RNG = random.Random(12)


@pytest.fixture
def matrix(tmp_path: Path) -> Matrix:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    return load_matrix(path)


def timed(batch_size: int, windows: int = 3, steps: int = 4) -> dict[str, Any]:
    """A batch size's values as the sweep computes them, from random step times; the windows themselves under
    "_windows" (the store keeps only its fields) for the test to compute its own expectations."""
    made = []
    for _ in range(windows):
        step_s = tuple(RNG.uniform(0.05, 0.2) for _ in range(steps))
        made.append(Window((RNG.uniform(0.1, 0.3),), step_s, sum(step_s) + RNG.uniform(0.0, 0.01)))
    return {**summarize_windows(batch_size, made), "_windows": made}


def overall_rate(result: BatchResult) -> float:
    """All timed images over all timed time, from the windows the result was made of."""
    windows = result.values["_windows"]
    return result.batch_size * sum(len(w.step_s) for w in windows) / sum(w.window_s for w in windows)


def run_file(planned: int, repetition: int, experiment: Experiment) -> dict[str, Any]:
    return {"run": planned, "repetition": repetition, "experiment": experiment.index, "config": experiment.name,
            "values": experiment.values}


def run_folder(campaign: Path, planned: int, repetition: int, experiment: Experiment, ending: str) -> Path:
    folder = campaign / f"run_{repetition}_{experiment.name}{ending}"
    folder.mkdir(parents=True)
    write_json_atomic(folder / "campaign_run.json", run_file(planned, repetition, experiment))
    return folder


def throughput(folder: Path, results: list[BatchResult]) -> None:
    store = ThroughputRun(folder, {"framework": "torch", "precision": "fp32", "image_size": 64})
    for result in results:  # the windows the values were made of stay with the test: no result field
        values = {name: value for name, value in result.values.items() if name != "_windows"}
        store.add(BatchResult(result.batch_size, result.status, result.error, values), warmup_s=[0.2],
                  step_s=[0.1, 0.1])


def profiled(folder: Path, results: list[BatchResult]) -> None:
    run_dir = folder / "profiled_data_torch"
    run_dir.mkdir()
    store = ProfileRun(run_dir, {"profiler": "torch"}, ("trace", "top_operator"))
    for result in results:
        store.add(result)


def profile_result(batch_size: int) -> BatchResult:
    return BatchResult(batch_size, Status.OK, None, {
        "profiler": "torch", "profiled_iterations": [3, 4], "profiled_samples_per_sec": RNG.uniform(5, 50),
        "window_s": RNG.uniform(0.1, 1), "trace": f"batch_{batch_size}", "top_operator": "aten::conv2d"})


OOM = "RuntimeError: CUDA out of memory, tried to allocate 2.00 GiB"


@pytest.fixture
def campaign(tmp_path: Path, matrix: Matrix) -> tuple[Path, dict[str, Any]]:
    """Planned runs 0..11 (3 repetitions of 4 experiments): finished, failed, profiled, unreadable, in progress,
    abandoned and never started ones. Returns the folder and what each finished run was given."""
    plan = planned_runs(matrix)
    assert [e.index for _, e in plan[:4]] == [0, 1, 2, 3] and plan[4][0] == 1
    exp = [e for _, e in plan[:4]]  # 0: fp32, 1: fp32 + torch profiler, 2: bf16, 3: bf16 + torch profiler
    root = tmp_path / "campaign"
    given: dict[str, Any] = {}

    def ok(batch_size: int, **extra: Any) -> BatchResult:
        values = {**timed(batch_size), **extra}
        return BatchResult(batch_size, Status.OK, None, values)

    for planned, repetition in ((0, 0), (4, 1), (8, 2)):  # experiment 0, every repetition
        folder = run_folder(root, planned, repetition, exp[0], "_ret_0")
        results = [ok(2, input_samples_per_sec=500.0, input_bound=planned == 4), ok(4)]
        if planned == 4:  # a result from before window lists: one window, no list
            values = {k: v for k, v in timed(4, windows=1).items() if k != "window_samples_per_sec"}
            results[1] = BatchResult(4, Status.OK, "a warning", values)
        throughput(folder, results)
        given[folder.name] = results
    folder = run_folder(root, 1, 0, exp[1], "_ret_1")
    profiled(folder, given.setdefault(folder.name, [profile_result(2), BatchResult.failed(4, Status.ERROR, "boom")]))
    folder = run_folder(root, 2, 0, exp[2], "_ret_1")
    throughput(folder, given.setdefault(folder.name, [ok(2), BatchResult.failed(4, Status.OOM, OOM)]))
    corrupt = run_folder(root, 5, 1, exp[1], "_ret_0")
    (corrupt / "campaign_run.json").write_text('{"run": 5, "repetition": ')
    profiled(corrupt, [profile_result(2)])
    bad_summary = run_folder(root, 6, 1, exp[2], "_ret_0")
    (bad_summary / "summary.json").write_text("[1, 2]")
    for ending in ("_inprogress", "_abandoned-1", "_refused"):  # ignored: every one holds a whole run
        profiled(run_folder(root, 3, 0, exp[3], ending), [profile_result(2)])
    (root / "campaign.json").write_text("{}")
    return root, {"given": given, "exp": exp, "corrupt": corrupt.name, "bad_summary": bad_summary.name}


def read_back(root: Path) -> pd.DataFrame:
    path = write_campaign_table(root)
    assert path == root / RESULTS and not temporary_files(path)
    return pd.read_csv(path)


def rows_of(table: pd.DataFrame, folder: str, batch_size: int | None = None) -> pd.DataFrame:
    rows = table[table["run_folder"] == folder]
    return rows if batch_size is None else rows[rows["batch_size"] == batch_size]


def test_columns_and_run_order(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    table = read_back(root)
    axes = ["framework", "precision", "image_size", "channels_last", "profiler"]  # matrix.AXES's order
    profile_extra = ["profiled_iterations", "profiled_samples_per_sec", "window_s", "trace", "top_operator"]
    at = COLUMNS.index(AXES_AFTER) + 1
    assert list(table.columns) == [*COLUMNS[:at], *axes, *COLUMNS[at:], *profile_extra]
    finished = {*info["given"], info["corrupt"], info["bad_summary"]}
    assert set(table["run_folder"]) == finished  # no in-progress, abandoned or refused folder
    readable = table[table["run_folder"] != info["corrupt"]]
    assert readable["run"].is_monotonic_increasing and sorted(set(readable["run"])) == [0, 1, 2, 4, 6, 8]
    assert table["run_folder"].iloc[-1] == info["corrupt"]  # no run number: last
    assert table["return_code"].tolist() == [int(name.rsplit("_", 1)[1]) for name in table["run_folder"]]


def test_windows_results_and_failures(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    table = read_back(root)
    exp = info["exp"]
    for name, results in info["given"].items():
        if "prof_torch" in name:
            continue
        for result in results:
            rows = rows_of(table, name, result.batch_size)
            values = result.values
            assert set(rows["status"]) == {result.status.value}
            if not result.ok:  # one row, nothing measured
                assert len(rows) == 1 and math.isnan(rows["window"].iloc[0]) and rows["error"].iloc[0] == result.error
                assert rows[["window_samples_per_sec", "samples_per_sec", "timed_steps"]].isna().all(axis=None)
                continue
            windows = values["_windows"]
            steps = [step for window in windows for step in window.step_s]
            rates = [result.batch_size * len(w.step_s) / w.window_s for w in windows]
            overall = overall_rate(result)
            assert rows["window"].tolist() == list(range(len(windows)))
            assert rows["window_samples_per_sec"].tolist() == pytest.approx(rates, rel=1e-12)
            assert rows["samples_per_sec"].tolist() == pytest.approx([overall] * len(windows), rel=1e-12)
            assert rows["step_time_median_s"].tolist() == pytest.approx([np.median(steps)] * len(windows))
            assert rows["step_time_p90_s"].tolist() == pytest.approx([np.percentile(steps, 90)] * len(windows))
            assert rows["timed_steps"].tolist() == [len(steps)] * len(windows)
            assert rows["warmup_steps"].tolist() == [len(windows)] * len(windows)
            assert (rows["config"] == name.split("_", 2)[2].rsplit("_ret_", 1)[0]).all()
    first = rows_of(table, f"run_0_{exp[0].name}_ret_0", 2)
    assert first["window_samples_per_sec"].median() == pytest.approx(info["given"][first["run_folder"].iloc[0]][0]
                                                                    .values["samples_per_sec_median"])
    assert rows_of(table, f"run_1_{exp[0].name}_ret_0", 2)["input_bound"].tolist() == [True] * 3
    assert rows_of(table, f"run_0_{exp[0].name}_ret_0", 2)["input_bound"].tolist() == [False] * 3
    assert rows_of(table, f"run_1_{exp[0].name}_ret_0", 4)["error"].tolist() == ["a warning"]
    assert rows_of(table, f"run_0_{exp[0].name}_ret_0", 4)["input_bound"].isna().all()
    assert table.loc[table["config"] == exp[2].name, "precision"].eq("bf16").all()
    assert table["channels_last"].dropna().eq(False).all() and table["image_size"].dropna().eq(64).all()


def test_a_profiled_run_is_one_row_per_batch_size_with_its_record(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    table = read_back(root)
    name = f"run_0_{info['exp'][1].name}_ret_1"
    rows = rows_of(table, name)
    ok, failed = info["given"][name]
    assert rows["batch_size"].tolist() == [2, 4] and rows["status"].tolist() == ["ok", "error"]
    assert rows[["window", "window_samples_per_sec", "samples_per_sec"]].isna().all(axis=None)
    first = rows.iloc[0]
    assert first["profiled_samples_per_sec"] == pytest.approx(ok.values["profiled_samples_per_sec"], rel=1e-12)
    assert json.loads(first["profiled_iterations"]) == ok.values["profiled_iterations"]
    assert (first["trace"], first["top_operator"], first["profiler"]) == ("batch_2", "aten::conv2d", "torch")
    assert rows.iloc[1]["error"] == failed.error and math.isnan(rows.iloc[1]["profiled_samples_per_sec"])
    assert rows_of(table, f"run_0_{info['exp'][0].name}_ret_0")["trace"].isna().all()


def test_unreadable_folders_are_error_rows_naming_the_file(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    table = read_back(root)
    corrupt = rows_of(table, info["corrupt"]).iloc[0]
    assert len(rows_of(table, info["corrupt"])) == 1 and corrupt["status"] == "error"
    assert "campaign_run.json" in corrupt["error"] and info["corrupt"] in corrupt["error"]
    assert (corrupt["repetition"], corrupt["config"], corrupt["return_code"]) == (1, info["exp"][1].name, 0)
    assert math.isnan(corrupt["run"]) and math.isnan(corrupt["batch_size"])
    bad = rows_of(table, info["bad_summary"]).iloc[0]
    assert bad["status"] == "error" and f"{info['bad_summary']}/summary.json" in bad["error"]
    assert (bad["run"], bad["experiment"], bad["precision"]) == (6, 2, "bf16")  # campaign_run.json was readable


@pytest.mark.parametrize("content, problem", [
    (None, "No such file"),
    ("[]", "not a JSON object"),
    ('{"format": 2, "run": "7", "repetition": 0, "experiment": 0, "config": "x", "values": {}}', "run is '7'"),
    ('{"format": 9, "run": 7, "repetition": 0, "experiment": 0, "config": "x", "values": {}}', "format 9"),
    ('{"format": 2, "run": 7, "repetition": 0, "experiment": 0, "config": "x", "values": []}', "values is []"),
    ('{"format": 2, "run": 7, "repetition": 0, "experiment": 0, "config": "x", "values": {"gpus": "two"}}',
     "values.gpus is 'two'"),
    ('{"format": 2, "run": 7, "repetition": 0, "experiment": 0, "config": "x", "values": {"nodes": 0}}',
     "values.nodes is 0"),
])
def test_each_bad_run_file_is_reported(tmp_path: Path, matrix: Matrix, content: str | None, problem: str) -> None:
    experiment = planned_runs(matrix)[0][1]
    good = run_folder(tmp_path, 0, 0, experiment, "_ret_0")
    throughput(good, [BatchResult(2, Status.OK, None, timed(2))])
    bad = run_folder(tmp_path, 4, 1, experiment, "_ret_0")
    throughput(bad, [BatchResult(2, Status.OK, None, timed(2))])
    if content is None:
        (bad / "campaign_run.json").unlink()
    else:
        (bad / "campaign_run.json").write_text(content)
    table = read_back(tmp_path)
    assert len(rows_of(table, good.name)) == 3 and set(rows_of(table, good.name)["status"]) == {"ok"}
    error = rows_of(table, bad.name)["error"].tolist()
    assert len(error) == 1 and f"{bad.name}/campaign_run.json" in error[0] and problem in error[0]


def test_the_frame_is_what_the_csv_reads_back(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, _ = campaign
    frame = campaign_table(root)
    back = read_back(root)
    assert list(frame.columns) == list(back.columns)
    for column in ("samples_per_sec", "window", "batch_size", "run", "timed_steps", "return_code"):
        assert pd.api.types.is_numeric_dtype(back[column]), column
        np.testing.assert_array_equal(frame[column].astype("float64").to_numpy(), back[column].to_numpy())
    for column, seen in (("channels_last", {False}), ("input_bound", {True, False})):  # bools, NaN where absent
        assert set(back[column].dropna()) == seen and all(isinstance(v, bool) for v in back[column].dropna())
    assert (root / RESULTS).read_text().splitlines()[1].startswith("0,0,0,")  # whole numbers written as such


def test_summary_per_configuration_over_repetitions(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    summary = campaign_summary(read_back(root))
    exp, given = info["exp"], info["given"]
    by_key = {(row.config, None if pd.isna(row.batch_size) else int(row.batch_size)): row
              for row in summary.itertuples()}
    for batch_size, index in ((2, 0), (4, 1)):
        rates = [overall_rate(given[f"run_{r}_{exp[0].name}_ret_0"][index]) for r in range(3)]
        row = by_key[(exp[0].name, batch_size)]
        assert (row.runs, row.ok) == (3, 3)
        assert row.samples_per_sec_median == pytest.approx(statistics.median(rates))
        assert (row.samples_per_sec_min, row.samples_per_sec_max) == pytest.approx((min(rates), max(rates)))
        assert row.spread_pct == pytest.approx((max(rates) - min(rates)) / statistics.median(rates) * 100)
        assert row.cv_pct == pytest.approx(statistics.stdev(rates) / statistics.mean(rates) * 100)
    one = by_key[(exp[2].name, 2)]
    assert (one.runs, one.ok, one.spread_pct) == (1, 1, 0) and math.isnan(one.cv_pct)
    assert one.samples_per_sec_median == pytest.approx(overall_rate(given[f"run_0_{exp[2].name}_ret_1"][0]))
    oom = by_key[(exp[2].name, 4)]
    assert (oom.runs, oom.ok) == (1, 0) and math.isnan(oom.samples_per_sec_median)
    profiled_row = by_key[(exp[1].name, 2)]  # ok, but no throughput under a profiler
    assert (profiled_row.runs, profiled_row.ok) == (1, 1) and math.isnan(profiled_row.samples_per_sec_median)
    assert (by_key[(exp[1].name, None)].runs, by_key[(exp[1].name, None)].ok) == (1, 0)  # the corrupt folder
    assert list(summary["config"].iloc[:2]) == [exp[0].name] * 2  # experiments in plan order, then batch sizes
    pd.testing.assert_frame_equal(summary, campaign_summary(campaign_table(root)), check_dtype=False)


def test_format_summary_counts_failures(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    summary = campaign_summary(campaign_table(root))
    text = format_summary(summary)
    lines = text.splitlines()
    assert len(lines) == len(summary) + 2 and lines[0].split()[:3] == ["config", "batch", "runs"]
    failed = int((summary["runs"] - summary["ok"]).sum())
    assert failed == 4  # the oom, the profiler's error, the unreadable summary, the corrupt folder
    assert lines[-1] == f"{failed} of {summary['runs'].sum()} results failed"
    median = summary.loc[0, "samples_per_sec_median"]
    assert f"{median:.2f}" in lines[1] and info["exp"][0].name in lines[1]
    assert len({len(line) for line in lines[:-1]}) == 1  # aligned


def test_an_empty_campaign_has_a_header_and_no_rows(tmp_path: Path) -> None:
    (tmp_path / "run_0_torch-fp32-img64_inprogress").mkdir()
    table = read_back(tmp_path)
    assert table.empty and list(table.columns) == list(COLUMNS)
    assert format_summary(campaign_summary(table)) == "no finished runs"


def test_scaling_efficiency_against_the_same_setting_with_one_process() -> None:
    rows = []
    for experiment, (framework, gpus, rates) in enumerate([("torch", 1, [100.0, 110.0, 90.0]),
                                                           ("torch", 2, [180.0, 170.0, 190.0]),
                                                           ("torch", 4, [300.0]), ("tf", 2, [150.0])]):
        for repetition, rate in enumerate(rates):
            rows.append({"config": f"{framework}_gpus{gpus}", "framework": framework, "gpus": gpus,
                         "experiment": experiment, "batch_size": 32, "status": "ok", "samples_per_sec": rate,
                         "run_folder": f"run_{repetition}_{framework}_gpus{gpus}_ret_0"})
    summary = campaign_summary(pd.DataFrame(rows)).set_index("config")
    assert summary.loc["torch_gpus1", "scaling_efficiency"] == pytest.approx(1.0)
    assert summary.loc["torch_gpus2", "scaling_efficiency"] == pytest.approx(180.0 / (2 * 100.0))
    assert summary.loc["torch_gpus4", "scaling_efficiency"] == pytest.approx(300.0 / (4 * 100.0))
    assert pd.isna(summary.loc["tf_gpus2", "scaling_efficiency"])  # no tf run with one process to compare with


def test_scaling_efficiency_holds_when_a_recorded_step_value_is_empty_on_a_failed_repetition() -> None:
    """matmul_precision is a column whether or not an axis names it: empty on a failed row, which must not make
    the configuration another setting (NaN equals nothing) and lose its scaling efficiency."""
    rows = [{"config": f"torch_gpus{gpus}", "framework": "torch", "gpus": gpus, "experiment": gpus,
             "batch_size": 32, "status": status, "samples_per_sec": rate,
             "matmul_precision": "highest" if status == "ok" else None,
             "run_folder": f"run_{repetition}_torch_gpus{gpus}_ret_0"}
            for gpus, runs in ((1, [("oom", None), ("ok", 100.0)]), (2, [("ok", 150.0)]))
            for repetition, (status, rate) in enumerate(runs)]
    summary = campaign_summary(pd.DataFrame(rows)).set_index("config")
    assert summary.loc["torch_gpus2", "scaling_efficiency"] == pytest.approx(150.0 / (2 * 100.0))


# --- what the table leaves out: invalid values, a second folder of one run, another matrix's runs ---------------


def _edited(folder: Path, batch_size: int, field: str, text: str) -> None:
    """One value of a real summary.json replaced by ``text`` as written (NaN, -5, "fast")."""
    path = folder / "summary.json"
    data = json.loads(path.read_text())
    [row] = [row for row in data["results"] if row["batch_size"] == batch_size]
    row[field] = "__EDITED__"
    path.write_text(json.dumps(data).replace('"__EDITED__"', text))


@pytest.mark.parametrize(("field", "text", "shown"), [
    ("samples_per_sec", "NaN", "nan"), ("samples_per_sec", "-Infinity", "-inf"), ("samples_per_sec", "-5", "-5"),
    ("samples_per_sec", '"fast"', "'fast'"), ("window_samples_per_sec", '[1, "x", 2]', "[1, 'x', 2]"),
    ("step_time_p90_s", "NaN", "nan"),
])
def test_an_invalid_value_is_an_invalid_row_left_out_of_the_summary(tmp_path: Path, matrix: Matrix, field: str,
                                                                    text: str, shown: str) -> None:
    experiment = planned_runs(matrix)[0][1]
    results = {}
    for planned, repetition in ((0, 0), (4, 1), (8, 2)):
        folder = run_folder(tmp_path, planned, repetition, experiment, "_ret_0")
        results[repetition] = [BatchResult(2, Status.OK, None, timed(2))]
        throughput(folder, results[repetition])
    bad = tmp_path / f"run_1_{experiment.name}_ret_0"
    _edited(bad, 2, field, text)
    table = read_back(tmp_path)
    rows = rows_of(table, bad.name)
    assert set(rows["status"]) == {"invalid"}
    assert set(rows["error"]) == {f"{bad}/summary.json: results[0].{field} is {shown}, not a finite non-negative "
                                  "number"}
    for column in ("samples_per_sec", "window_samples_per_sec", "step_time_p90_s"):  # numeric, as a tidy table's
        assert pd.api.types.is_float_dtype(table[column]), column
    if field == "window_samples_per_sec":  # item by item: the one that is no number left empty
        assert rows[field].fillna(-1).tolist() == [1, -1, 2]
    else:
        assert rows[field].isna().all()  # left empty: the error holds the value
    [row] = campaign_summary(table).itertuples()
    good = [overall_rate(results[r][0]) for r in (0, 2)]
    assert (row.runs, row.ok, row.invalid) == (3, 2, 1)
    assert row.samples_per_sec_median == pytest.approx(statistics.median(good))
    assert (row.samples_per_sec_min, row.samples_per_sec_max) == pytest.approx((min(good), max(good)))
    assert row.cv_pct == pytest.approx(statistics.stdev(good) / statistics.mean(good) * 100)
    text_out = format_summary(campaign_summary(table), invalid_errors(table))
    assert text_out.splitlines()[-1] == (f"2 of 3 results ok; 1 invalid result left out ({bad}/summary.json: "
                                         f"results[0].{field} is {shown}, not a finite non-negative number)")


def test_a_hand_edited_results_csv_rate_is_invalid_too(tmp_path: Path) -> None:
    rows = [{"config": "c", "experiment": 0, "batch_size": 8, "status": "ok", "samples_per_sec": rate,
             "run_folder": f"run_{i}_c_ret_0", "error": None} for i, rate in enumerate([100.0, -3.0, math.inf, 120.0])]
    (tmp_path / "results.csv").write_text(pd.DataFrame(rows).to_csv(index=False))
    table = pd.read_csv(tmp_path / "results.csv")
    [row] = campaign_summary(table).itertuples()
    assert (row.runs, row.ok, row.invalid, row.samples_per_sec_median) == (4, 2, 2, 110.0)
    assert invalid_errors(table) == ["run_1_c_ret_0: batch size 8: samples_per_sec is no measurement",
                                     "run_2_c_ret_0: batch size 8: samples_per_sec is no measurement"]


def test_a_second_finished_folder_of_a_run_is_left_out_and_named(tmp_path: Path, matrix: Matrix) -> None:
    experiment = planned_runs(matrix)[0][1]
    older = run_folder(tmp_path, 0, 0, experiment, "_ret_1")
    throughput(older, [BatchResult.failed(2, Status.OOM, OOM)])
    newer = run_folder(tmp_path, 0, 0, experiment, "_ret_0")
    throughput(newer, [BatchResult(2, Status.OK, None, timed(2))])
    os.utime(older / "summary.json", (1_000_000_000, 1_000_000_000))
    runs = campaign_runs(tmp_path)
    assert [folder.path for folder, _, _ in runs.counted] == [newer]
    assert runs.left_out == [f"{older.name} left out: a second finished folder of the run in {newer.name} (the "
                             "newest result counts)"]
    summary = campaign_summary(campaign_table(tmp_path))
    assert summary["runs"].tolist() == [1] and summary["ok"].tolist() == [1]
    os.utime(newer / "summary.json", (900_000_000, 900_000_000))  # now the failed one is newer: it counts
    assert campaign_summary(campaign_table(tmp_path))["ok"].tolist() == [0]


def test_only_the_runs_of_the_matrix_in_campaign_json_count(tmp_path: Path, matrix: Matrix) -> None:
    experiment = planned_runs(matrix)[0][1]
    legacy = run_folder(tmp_path, 0, 0, experiment, "_ret_0")  # no fingerprint: from before runs recorded it
    throughput(legacy, [BatchResult(2, Status.OK, None, timed(2))])
    mine = run_folder(tmp_path, 4, 1, experiment, "_ret_0")
    write_json_atomic(mine / "campaign_run.json", {**run_file(4, 1, experiment), "fingerprint": "new"})
    throughput(mine, [BatchResult(2, Status.OK, None, timed(2))])
    theirs = run_folder(tmp_path, 8, 2, experiment, "_ret_0")
    write_json_atomic(theirs / "campaign_run.json", {**run_file(8, 2, experiment), "fingerprint": "old"})
    throughput(theirs, [BatchResult(2, Status.OK, None, timed(2))])

    def counted() -> list[str]:
        return sorted(folder.path.name for folder, _, _ in campaign_runs(tmp_path).counted)

    assert counted() == sorted([legacy.name, mine.name, theirs.name])  # no campaign.json: every run
    write_json_atomic(tmp_path / "campaign.json", {"fingerprint": "new"})
    assert counted() == sorted([legacy.name, mine.name])  # never replaced: the legacy run is of this matrix
    write_json_atomic(tmp_path / "campaign.json", {"fingerprint": "new", "replaced": ["old"]})
    assert counted() == [mine.name]
    assert campaign_runs(tmp_path).left_out == [
        f"2 run folders of another matrix than campaign.json's left out (the folder's matrix was replaced): "
        f"{legacy.name}, {theirs.name}"]
    assert set(read_back(tmp_path)["run_folder"]) == {mine.name}


WORKLOAD_MATRIX = """\
axes:
  workload: [resnet50, bert]
  framework: [torch]
  size: [tiny]
  batch_size: [2]
"""


def test_the_workload_its_sample_unit_and_what_a_sample_costs_are_columns(tmp_path: Path) -> None:
    """Whether or not workload is an axis: each row says its run's workload and unit (a run written before
    workloads reads as ResNet-50's images), and holds tokens/s, parameters, FLOPs per sample and MFU (empty where
    not measured)."""
    path = tmp_path / "matrix.yaml"
    path.write_text(WORKLOAD_MATRIX)
    root = tmp_path / "campaign"
    written: dict[str, dict[str, Any]] = {}
    for planned, (repetition, experiment) in enumerate(planned_runs(load_matrix(path))):
        folder = run_folder(root, planned, repetition, experiment, "_ret_0")
        spec = workloads.get(experiment.values["workload"])
        tokens = spec.tokens_per_sample({name: spec.default(name, "tiny") for name in spec.params})
        values = {name: value for name, value in timed(2).items() if name != "_windows"}
        values |= {"parameters": 1000 + planned, "train_flops_per_sample": 1e6 * (planned + 1), "mfu": None,
                   "tokens_per_sec": None if tokens is None else tokens * values["samples_per_sec"]}
        store = ThroughputRun(folder, {"workload": spec.name, "sample_unit": spec.sample_unit, "size": "tiny",
                                       "framework": "torch", "precision": "fp32"})
        store.add(BatchResult(2, Status.OK, None, values))
        written[folder.name] = values
    old = run_folder(root, 2, 1, planned_runs(load_matrix(path))[0][1], "_ret_0")  # format 3: no workload anywhere
    write_json_atomic(old / "campaign_run.json", {"run": 2, "repetition": 1, "experiment": 0,
                                                  "config": "torch-fp32-img64", "values": {"framework": "torch"}})
    write_json_atomic(old / "summary.json", {"format": 3, "framework": "torch", "precision": "fp32", "results": [
        {"batch_size": 2, "status": "ok", "samples_per_sec": 7.0, "window_samples_per_sec": [7.0]}]})
    table = read_back(root)
    assert {"workload", "sample_unit", "tokens_per_sec", "parameters", "train_flops_per_sample", "mfu"} <= set(
        table.columns)
    assert list(table.columns).count("workload") == 1  # an axis here, and still one column
    by_folder = {row["run_folder"]: row for _, row in table.iterrows()}
    assert (by_folder[old.name]["workload"], by_folder[old.name]["sample_unit"]) == ("resnet50", "image")
    assert by_folder[old.name][["tokens_per_sec", "parameters", "train_flops_per_sample", "mfu"]].isna().all()
    assert sorted(set(table["workload"])) == ["bert", "resnet50"]
    for name, values in written.items():
        row = by_folder[name]
        assert row["sample_unit"] == workloads.get(row["workload"]).sample_unit
        assert (row["parameters"], row["train_flops_per_sample"]) == (values["parameters"],
                                                                      values["train_flops_per_sample"])
        if row["workload"] == "bert":
            assert row["tokens_per_sec"] == pytest.approx(values["tokens_per_sec"]) and row["tokens_per_sec"] > 0
        else:
            assert math.isnan(row["tokens_per_sec"])
        assert math.isnan(row["mfu"])


def test_a_campaign_without_a_workload_axis_names_resnet50(campaign: tuple[Path, dict[str, Any]]) -> None:
    root, info = campaign
    table = read_back(root)
    readable = table[table["run_folder"] != info["corrupt"]]
    assert set(readable["workload"]) == {"resnet50"} and set(readable["sample_unit"]) == {"image"}
    assert table.loc[table["run_folder"] == info["corrupt"], "workload"].isna().all()  # no run file: unknown


STEP_MATRIX = """\
axes:
  framework: [torch]
  optimizer: [sgd, adamw]
  batch_size: [2, 4]
"""


def test_a_step_axis_fills_its_result_field_s_column_and_its_memory_columns_are_there(tmp_path: Path) -> None:
    """optimizer is an axis and a result field: one column (the field's), holding what the matrix asked on every row
    of those runs, the oom row too; a result field no axis names (matmul_precision) holds what the run recorded.
    The memory fields are columns."""
    path = tmp_path / "matrix.yaml"
    path.write_text(STEP_MATRIX)
    root = tmp_path / "campaign"
    for planned, (repetition, experiment) in enumerate(planned_runs(load_matrix(path))):
        folder = run_folder(root, planned, repetition, experiment, "_ret_1")
        name = experiment.values["optimizer"]
        values = {key: value for key, value in timed(2).items() if key != "_windows"}
        values |= {"optimizer": f"{name} (torch, foreach)", "matmul_precision": "highest",
                   "peak_memory_bytes": 3 * 2**30, "memory_optimizer_bytes": 2**20}
        throughput(folder, [BatchResult(2, Status.OK, None, values), BatchResult.failed(4, Status.OOM, OOM)])
    table = read_back(root)
    columns = list(table.columns)
    assert columns.count("optimizer") == 1 and columns.count("matmul_precision") == 1
    assert columns.index("optimizer") > columns.index("run_folder")  # the field's place, not among the axes
    assert {"peak_memory_bytes", "peak_memory_kind", "memory_activations_bytes", "memory_note"} <= set(columns)
    by_config = {config: rows for config, rows in table.groupby("config")}
    assert set(by_config) == {"torch-fp32-img224-opt_sgd", "torch-fp32-img224-opt_adamw"}
    for config, rows in by_config.items():
        assert set(rows["optimizer"]) == {config.rsplit("_", 1)[1]}  # the axis's value, on the oom row too
        assert set(rows["status"]) == {"ok", "oom"}
    ok = table[table["status"] == "ok"]
    assert set(ok["matmul_precision"]) == {"highest"} and set(ok["peak_memory_bytes"]) == {3 * 2**30}
    assert table.loc[table["status"] == "oom", "matmul_precision"].isna().all()  # recorded nowhere: empty
    assert list(campaign_summary(table)["ok"]) == [1, 0, 1, 0]


FORMAT_6_MATRIX = """\
axes:
  workload: [gpt2]
  size: [tiny]
  activation_checkpointing: [none, full]
  shard: [ddp, fsdp]
  gpus: [1, 2]
  batch_size: [2, 4]
"""


def test_the_recomputation_and_shard_axes_fill_their_result_fields_columns(tmp_path: Path) -> None:
    """activation_checkpointing and shard are axes and result fields: one column each (the field's), holding what
    the matrix asked on every row of its runs, the oom row too, and "ddp" with one process, where the run records no
    shard; FSDP with one process is no configuration. What a process holds and the hardware FLOPs are columns."""
    path = tmp_path / "matrix.yaml"
    path.write_text(FORMAT_6_MATRIX)
    root = tmp_path / "campaign"
    for planned, (repetition, experiment) in enumerate(planned_runs(load_matrix(path))):
        folder = run_folder(root, planned, repetition, experiment, "_ret_1")
        asked, gpus = experiment.values, experiment.values["gpus"]
        recompute = 4 / 3 if asked["activation_checkpointing"] == "full" else 1.0
        values = {key: value for key, value in timed(2).items() if key != "_windows"}
        mfu = values["samples_per_sec"] * 3e6 / 1e9  # against a peak of 1 GFLOP/s, as the worker computes it
        values |= {"activation_checkpointing": asked["activation_checkpointing"],
                   "shard": asked["shard"] if gpus > 1 else None, "parameters": 1000,
                   "parameters_held": 1000 // gpus if asked["shard"] == "fsdp" else 1000,
                   "train_flops_per_sample": 3e6, "hardware_flops_per_sample": 3e6 * recompute,
                   "achieved_flops": values["samples_per_sec"] * 3e6, "peak_flops": 1e9, "mfu": mfu,
                   "hfu": mfu * recompute}
        throughput(folder, [BatchResult(2, Status.OK, None, values), BatchResult.failed(4, Status.OOM, OOM)])
    table = read_back(root)
    columns = list(table.columns)
    for name in ("activation_checkpointing", "shard", "parameters_held", "hardware_flops_per_sample", "hfu"):
        assert columns.count(name) == 1, name
    assert columns.index("shard") > columns.index("run_folder")  # the field's place, not among the axes
    assert columns.index("gpus") < columns.index("batch_size")  # an axis no field names: among the axes
    assert sorted(set(table["config"])) == sorted(
        f"gpt2-torch-fp32-tiny-seq32-recompute_{recompute}-shard_{shard}-gpus{gpus}"
        for recompute in ("none", "full") for shard, gpus in (("ddp", 1), ("ddp", 2), ("fsdp", 2)))
    for config, rows in table.groupby("config"):
        assert set(rows["status"]) == {"ok", "oom"}
        assert set(rows["activation_checkpointing"]) == {str(config).split("recompute_")[1].split("-")[0]}
        assert set(rows["shard"]) == {str(config).split("shard_")[1].split("-")[0]}  # one process: "ddp" too
    ok = table[table["status"] == "ok"].drop_duplicates("config").set_index("config")  # one row of its windows'
    full = ok.loc["gpt2-torch-fp32-tiny-seq32-recompute_full-shard_fsdp-gpus2"]
    assert (full["parameters_held"], full["hfu"], full["hardware_flops_per_sample"]) == \
        (500, pytest.approx(full["mfu"] * 4 / 3), pytest.approx(4e6))
    plain = ok.loc["gpt2-torch-fp32-tiny-seq32-recompute_none-shard_ddp-gpus1"]
    assert plain["hfu"] == pytest.approx(plain["mfu"]) and plain["parameters_held"] == 1000
    summary = campaign_summary(table).set_index(["config", "batch_size"])
    # the same setting with one process: DDP with two has its scaling efficiency, FSDP (no one-process run) none
    assert not pd.isna(summary.loc[("gpt2-torch-fp32-tiny-seq32-recompute_none-shard_ddp-gpus2", 2),
                                   "scaling_efficiency"])
    assert pd.isna(summary.loc[("gpt2-torch-fp32-tiny-seq32-recompute_none-shard_fsdp-gpus2", 2),
                               "scaling_efficiency"])
