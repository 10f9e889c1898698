"""``trainbench compare``: run folders written by the results store, compared with a significance test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench.bench.compare import compare_runs
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.results.records import BatchResult


def write_run(path: Path, batch: int, step_times: np.ndarray) -> Path:
    path.mkdir()
    run = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    window = float(step_times.sum())
    row = {"batch_size": batch, "status": "ok", "samples_per_sec": batch * len(step_times) / window,
           "window_s": window, "timed_steps": len(step_times), "warmup_steps": 0}
    run.add(BatchResult.from_row(row), step_s=list(step_times))
    run.add(BatchResult.from_row({"batch_size": 4096, "status": "oom", "error": "out of memory"}))
    return path


def test_a_real_slowdown_is_significant(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    a = write_run(tmp_path / "a", 8, 0.100 + rng.normal(0, 0.002, 40))
    b = write_run(tmp_path / "b", 8, 0.125 + rng.normal(0, 0.002, 40))
    table = compare_runs(a, b)
    assert list(table["batch_size"]) == [8]  # the oom batch size is not compared
    row = table.iloc[0]
    assert row["change_pct"] == pytest.approx(100 * (0.100 / 0.125 - 1), abs=1.0)
    assert row["p_value"] < 1e-6 and bool(row["significant"])


def test_noise_alone_is_not_significant(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    same = 0.1 + rng.normal(0, 0.01, 80)
    a = write_run(tmp_path / "a", 8, same[::2])
    b = write_run(tmp_path / "b", 8, same[1::2])
    row = compare_runs(a, b).iloc[0]
    assert row["p_value"] > 0.05 and not bool(row["significant"])


@pytest.mark.slow
def test_cli_prints_a_verdict_and_refuses_a_non_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 30))
    b = write_run(tmp_path / "b", 4, 0.04 + rng.normal(0, 0.001, 30))
    result = run_cli("compare", str(a), str(b))  # one case in a real process
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("batch 4: ") and result.stdout.strip().endswith(": significant")
    assert_one_line_error(run_main("compare", str(a), str(tmp_path / "missing")), "missing", "not a throughput run")


def write_windows_run(path: Path, batch: int, window_rates: list[float], step_times: np.ndarray) -> Path:
    path.mkdir()
    run = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    run.add(BatchResult.from_row({"batch_size": batch, "status": "ok", "samples_per_sec": float(np.mean(window_rates)),
             "windows": len(window_rates), "window_samples_per_sec": window_rates}), step_s=list(step_times))
    return path


def test_windows_are_the_sample_when_both_runs_have_enough(tmp_path: Path) -> None:
    """Five windows a side, all of B's faster than all of A's: p = 2/252 over windows, whatever the steps say."""
    same_steps = np.full(40, 0.1)  # identical step times: a test over steps could never find a difference
    a = write_windows_run(tmp_path / "a", 8, [100.0, 101.0, 99.0, 100.5, 99.5], same_steps)
    b = write_windows_run(tmp_path / "b", 8, [110.0, 111.0, 109.0, 110.5, 109.5], same_steps)
    row = compare_runs(a, b).iloc[0]
    assert row["sample"] == "windows"
    assert row["p_value"] == pytest.approx(2 / 252) and bool(row["significant"])
    two = write_windows_run(tmp_path / "two", 8, [110.0, 111.0], same_steps)
    assert compare_runs(a, two).iloc[0]["sample"] == "steps"  # too few windows: back to the step times


@pytest.mark.parametrize("alpha", ["2", "-1", "0", "1", "nan", "inf", "x"])
def test_alpha_must_be_a_probability(tmp_path: Path, alpha: str) -> None:
    rng = np.random.default_rng(4)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    assert_one_line_error(run_main("compare", str(a), str(a), f"--alpha={alpha}"), "--alpha", alpha)


def test_alpha_decides_the_verdict_within_its_range(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    a = write_run(tmp_path / "a", 8, 0.100 + rng.normal(0, 0.01, 20))
    b = write_run(tmp_path / "b", 8, 0.104 + rng.normal(0, 0.01, 20))
    p_value = compare_runs(a, b).iloc[0]["p_value"]
    assert 0.001 < p_value < 0.999
    assert bool(compare_runs(a, b, alpha=min(0.999, p_value * 1.01)).iloc[0]["significant"])
    assert not bool(compare_runs(a, b, alpha=p_value * 0.99).iloc[0]["significant"])


@pytest.mark.slow
def test_differing_settings_are_named_before_the_verdict(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 20))
    b = write_run(tmp_path / "b", 4, 0.02 + rng.normal(0, 0.001, 20))
    summary = json.loads((b / "summary.json").read_text())
    summary["image_size"] = 224
    (b / "summary.json").write_text(json.dumps(summary))
    for folder, gpu in ((a, "NVIDIA A100-SXM4-80GB"), (b, "NVIDIA H100 80GB HBM3")):
        (folder / "env.json").write_text(json.dumps({"gpu": {"driver": "580.1", "gpus": [{"name": gpu}]}}))
    result = run_main("compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "note: the runs differ in image_size: A 64, B 224"
    assert lines[1] == "note: the runs differ in gpus: A NVIDIA A100-SXM4-80GB, B NVIDIA H100 80GB HBM3"
    assert lines[2].startswith("batch 4: ") and len(lines) == 3
    same = run_main("compare", str(a), str(a))
    assert not any(line.startswith("note:") for line in same.stdout.splitlines())


@pytest.mark.slow
@pytest.mark.parametrize(("summary", "fragment"), [
    ([1, 2, 3], "no list of results"),
    ({"results": "none"}, "no list of results"),
    ({"results": [7]}, "results[0] is not an object"),
    ({"results": [{"batch_size": "4", "status": "ok", "samples_per_sec": 1.0}]}, "results[0].batch_size is '4'"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": "fast"}]}, "samples_per_sec is 'fast'"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": -3}]}, "samples_per_sec is -3"),
    ({"results": [{"batch_size": 4, "status": 1}]}, "results[0].status is 1"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": 2.0, "window_samples_per_sec": [1, "x"]}]},
     "results[0].window_samples_per_sec is [1, 'x']"),
])
def test_a_summary_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path: Path, summary: object,
                                                                  fragment: str) -> None:
    rng = np.random.default_rng(7)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    bad = write_run(tmp_path / "bad", 4, 0.05 + rng.normal(0, 0.001, 10))
    (bad / "summary.json").write_text(json.dumps(summary))
    assert_one_line_error(run_main("compare", str(a), str(bad)), str(bad / "summary.json"), fragment)
    (bad / "summary.json").write_text("{not json")
    assert_one_line_error(run_main("compare", str(a), str(bad)), str(bad / "summary.json"), "JSONDecodeError")


def test_runs_whose_batch_sizes_all_failed_say_so(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    failed = tmp_path / "failed"
    failed.mkdir()
    run = ThroughputRun(failed, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    run.add(BatchResult.from_row({"batch_size": 4, "status": "oom", "error": "out of memory"}))
    run.add(BatchResult.from_row({"batch_size": 8, "status": "error", "error": "timed out after 5 s"}))
    assert not (failed / "steps.csv").exists()
    result = run_main("compare", str(a), str(failed))
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout.strip() == ("no batch size was measured successfully in both runs "
                                     "(A: 4 ok, 4096 oom; B: 4 oom, 8 error)")


def write_two_batch_run(path: Path, steps_by_batch: dict[int, np.ndarray]) -> Path:
    """A run with one ok result per batch size, each with its own timed steps in steps.csv."""
    path.mkdir()
    run = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    for batch, step_times in steps_by_batch.items():
        window = float(step_times.sum())
        row = {"batch_size": batch, "status": "ok", "samples_per_sec": batch * len(step_times) / window,
               "window_s": window, "timed_steps": len(step_times), "warmup_steps": 0}
        run.add(BatchResult.from_row(row), step_s=list(step_times))
    return path


def test_each_batch_size_is_tested_on_its_own_steps(tmp_path: Path) -> None:
    """Batch 8 is unchanged and batch 32 is 30 % slower: only batch 32 is a significant change, each batch size's
    p-value is that of its own steps alone, and each ratio is that batch size's own (a pooled sample of both
    batch sizes, whose step times differ fourfold, would give both rows one p-value)."""
    rng = np.random.default_rng(9)
    noise = rng.normal(0, 0.002, 160)
    a = write_two_batch_run(tmp_path / "a", {8: 0.100 + noise[0:40], 32: 0.400 + noise[40:80]})
    b = write_two_batch_run(tmp_path / "b", {8: 0.100 + noise[80:120], 32: 0.520 + noise[120:160]})
    table = compare_runs(a, b).set_index("batch_size")
    assert list(table.index) == [8, 32] and set(table["sample"]) == {"steps"}
    assert table.loc[8, "p_value"] == pytest.approx(
        mannwhitneyu(noise[0:40], noise[80:120], alternative="two-sided").pvalue)
    assert table.loc[8, "p_value"] > 0.05 and not bool(table.loc[8, "significant"])
    assert table.loc[32, "p_value"] < 1e-6 and bool(table.loc[32, "significant"])
    assert table.loc[8, "change_pct"] == pytest.approx(0.0, abs=1.0)
    assert table.loc[32, "change_pct"] == pytest.approx(100 * (0.400 / 0.520 - 1), abs=1.0)
