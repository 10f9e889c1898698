"""``trainbench compare``: run folders written by the results store, compared with a significance test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import assert_one_line_error, run_cli
from trainbench.bench.compare import compare_runs
from trainbench.bench.store import ThroughputRun


def write_run(path: Path, batch: int, step_times: np.ndarray) -> Path:
    path.mkdir()
    run = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    window = float(step_times.sum())
    run.add({"batch_size": batch, "status": "ok", "images_per_sec": batch * len(step_times) / window,
             "window_s": window, "timed_steps": len(step_times), "warmup_steps": 0}, step_s=list(step_times))
    run.add({"batch_size": 4096, "status": "oom", "error": "out of memory"})
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


def test_cli_prints_a_verdict_and_refuses_a_non_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 30))
    b = write_run(tmp_path / "b", 4, 0.04 + rng.normal(0, 0.001, 30))
    result = run_cli("compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("batch 4: ") and result.stdout.strip().endswith(": significant")
    assert_one_line_error(run_cli("compare", str(a), str(tmp_path / "missing")), "missing", "not a throughput run")


def write_windows_run(path: Path, batch: int, window_rates: list[float], step_times: np.ndarray) -> Path:
    path.mkdir()
    run = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    run.add({"batch_size": batch, "status": "ok", "images_per_sec": float(np.mean(window_rates)),
             "windows": len(window_rates), "window_images_per_sec": window_rates}, step_s=list(step_times))
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
