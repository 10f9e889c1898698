"""benchmarks/coreutil_speed.py keeps working: a small run, limits loosened (timing is not judged here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_speed_benchmark_runs_and_reports_json() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "benchmarks/coreutil_speed.py", "--launches", "1500", "--naive-sizes", "40,80,160",
         "--repeats", "1", "--max-read-ratio", "1e9", "--min-naive-ratio", "0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any("extrapolated to 1500 launches" in line for line in lines)
    figures = json.loads(lines[-1])
    assert figures["rows"] == 7500 and figures["ok"] is True
    assert figures["coreutil_s"] > 0 and figures["read_s"] > 0 and figures["naive_s"] > 0
    assert set(figures["naive_extrapolated_from"]) == {"40", "80", "160"}
