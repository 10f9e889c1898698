"""benchmarks/convert_speed.py keeps working: a small run, the goals loosened (timing is not judged here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_convert_benchmark_runs_and_reports_every_figure() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/convert_speed.py", "--images", "40", "--repeats", "1", "--min-ratio", "0",
         "--min-images", "0", "--no-drop-caches"],  # the page cache of a shared machine is left alone
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    assert (figures["images"], figures["crc32c"], figures["goals_met"]) == (40, "google-crc32c (C)",
                                                                           {"ratio": True, "images": True})
    assert "posix_fadvise" in figures["cache_method"]
    for cache in ("warm", "cold"):
        assert {len(runs) for runs in figures["caches"][cache]["runs"].values()} == {1}
    assert set(figures["cpu_s_per_gb"]) == {"google-crc32c", "numpy"}
    assert {"1", "2"} <= set(figures["scaling"]) and figures["scaling"]["1"]["speedup"] == 1


def test_a_before_folder_without_a_converter_is_refused(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "benchmarks/convert_speed.py", "--before", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].endswith(
        f"--before {tmp_path}: no trainbench/data/convert.py in it")
