"""benchmarks/coreutil_speed.py: its verdict follows the figures, the naive version's extrapolation follows its
measured times, and a small run reports figures consistent with each other (timing itself is not judged here)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "coreutil_speed.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("coreutil_speed", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_both_goals_are_needed_and_each_holds_at_its_limit(bench: ModuleType) -> None:
    """coreutil / read <= --max-read-ratio and naive / coreutil >= --min-naive-ratio, both."""
    limits = argparse.Namespace(max_read_ratio=2.5, min_naive_ratio=100.0)
    assert bench.goals_met(2.5, 100.0, limits) is True
    assert bench.goals_met(1.0, 5000.0, limits) is True
    assert bench.goals_met(2.51, 5000.0, limits) is False
    assert bench.goals_met(1.0, 99.9, limits) is False
    assert bench.goals_met(3.0, 50.0, limits) is False


def test_the_fit_recovers_an_exact_quadratic_and_extrapolates_it(bench: ModuleType) -> None:
    timings = {n: 0.5 + 0.001 * n + 2e-6 * n * n for n in (100, 200, 400)}
    coefficients = bench.fit_quadratic(timings)
    assert coefficients == pytest.approx([0.5, 0.001, 2e-6], rel=1e-6)
    assert bench.extrapolate(coefficients, 10_000) == pytest.approx(0.5 + 10.0 + 200.0, rel=1e-6)


def test_a_fit_never_bends_down_into_negative_times(bench: ModuleType) -> None:
    """Times that flatten out (noise) get the best fit whose every coefficient is >= 0."""
    coefficients = bench.fit_quadratic({100: 1.0, 200: 1.9, 400: 2.0})
    assert (coefficients >= 0).all()
    assert bench.extrapolate(coefficients, 100_000) > 2.0


def test_the_naive_version_agrees_with_coreutil(bench: ModuleType, tmp_path: Path) -> None:
    """Comparing their times means something only if both compute the same averages."""
    path = tmp_path / "profile.csv"
    bench.write_profile(path, 30, seed=3)
    expected = bench.naive_coreutil(path)
    bench._check_agreement(path, expected)  # raises SystemExit when they differ
    with pytest.raises(SystemExit, match="disagree"):
        bench._check_agreement(path, {metric: value * 1.01 for metric, value in expected.items()})


def test_speed_benchmark_runs_and_reports_json() -> None:
    """Default limits: whatever this machine measures, the exit status and ``ok`` follow the ratios, the ratios
    follow the times, and the naive time follows the fit of the measured sizes."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "benchmarks/coreutil_speed.py", "--launches", "1500", "--naive-sizes", "40,80,160",
         "--repeats", "1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any("extrapolated to 1500 launches" in line for line in lines)
    figures = json.loads(lines[-1])
    assert figures["rows"] == 7500 and figures["launches"] == 1500
    assert figures["coreutil_s"] > 0 and figures["read_s"] > 0 and figures["naive_s"] > 0
    assert figures["coreutil_over_read"] == figures["coreutil_s"] / figures["read_s"]
    assert figures["naive_over_coreutil"] == figures["naive_s"] / figures["coreutil_s"]
    a, b, c = figures["naive_fit_a_b_c"]
    assert figures["naive_s"] == pytest.approx(a + b * 1500 + c * 1500**2)
    assert set(figures["naive_extrapolated_from"]) == {"40", "80", "160"}
    assert min(a, b, c) >= 0
    ok = figures["coreutil_over_read"] <= 2.5 and figures["naive_over_coreutil"] >= 100
    assert figures["ok"] is ok and result.returncode == (0 if ok else 1)

