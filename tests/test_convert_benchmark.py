"""benchmarks/convert_speed.py: its verdict follows the figures, its figures follow the measured seconds, and a
small run reports every figure with an exit status that agrees with them (timing itself is not judged here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "convert_speed.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("convert_speed", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script()


def warm(ratio: float, images_s: float) -> dict:
    return {"caches": {"warm": {"ratio": ratio, "convert_images_s": {"median": images_s, "min": 0.0, "max": 0.0}},
                       "cold": {"ratio": 9.0, "convert_images_s": {"median": 9e9, "min": 0.0, "max": 0.0}}}}


def test_each_goal_is_met_at_its_limit_and_missed_below_it(bench: ModuleType) -> None:
    """Ratio >= --min-ratio and images/s >= --min-images on the warm cache, each judged on its own."""
    assert bench.verdict(warm(0.9, 2000.0), 0.9, 2000.0) == {"ratio": True, "images": True}
    assert bench.verdict(warm(0.95, 5000.0), 0.9, 2000.0) == {"ratio": True, "images": True}
    assert bench.verdict(warm(0.89, 5000.0), 0.9, 2000.0) == {"ratio": False, "images": True}
    assert bench.verdict(warm(1.5, 1999.0), 0.9, 2000.0) == {"ratio": True, "images": False}
    assert bench.verdict(warm(0.5, 100.0), 0.9, 2000.0) == {"ratio": False, "images": False}


def test_the_cold_cache_never_meets_a_goal_for_the_warm_one(bench: ModuleType) -> None:
    figures = warm(0.1, 1.0)
    del figures["caches"]["warm"]
    assert bench.verdict(figures, 0.9, 2000.0) == {"ratio": False, "images": False}


def test_rates_are_the_trees_bytes_and_images_over_the_measured_seconds(bench: ModuleType) -> None:
    """MB/s = bytes / 1e6 / seconds for every member, medians and ratios taken over those rates."""
    tree = bench.Tree(Path("/nowhere"), bytes=300_000_000, images=600, train_images=540)
    runs = {"copy": [{"seconds": 1.0}, {"seconds": 2.0}, {"seconds": 4.0}],
            "tar": [{"seconds": 3.0}, {"seconds": 1.5}, {"seconds": 6.0}],
            "convert": [{"seconds": 0.5, "process_s": 1.0}, {"seconds": 5.0, "process_s": 6.0},
                        {"seconds": 1.0, "process_s": 1.5}]}
    figures = bench.copy_figures(tree, runs)
    assert figures["copy_mb_s"] == {"median": 150.0, "min": 75.0, "max": 300.0}
    assert figures["tar_mb_s"] == {"median": 100.0, "min": 50.0, "max": 200.0}
    assert figures["convert_mb_s"] == {"median": 300.0, "min": 60.0, "max": 600.0}
    assert figures["convert_process_mb_s"] == {"median": 200.0, "min": 50.0, "max": 300.0}
    assert figures["convert_images_s"] == {"median": 600.0, "min": 120.0, "max": 1200.0}
    assert figures["ratio"] == 2.0 and figures["process_ratio"] == pytest.approx(200 / 150)
    assert figures["worst_ratio"] == 60.0 / 300.0 and figures["tar_ratio"] == 3.0
    assert figures["runs"] is runs


def test_a_member_run_again_on_a_busy_machine_keeps_its_last_attempt(bench: ModuleType) -> None:
    """A run during which others kept more cores busy than allowed is repeated, at most ``retries`` times."""
    busy = iter([0.9, 0.8, 0.1, 0.7, 0.6, 0.5])
    prepared: list[int] = []

    def member() -> dict[str, float]:
        return {"seconds": 1.0, "others_cores": next(busy)}

    schedule = bench.Schedule(repeats=2, max_other_cores=0.25, retries=2)
    first = bench.attempt(member, lambda: prepared.append(1), schedule)
    second = bench.attempt(member, lambda: prepared.append(1), schedule)
    assert (first["attempts"], first["others_cores"]) == (3, 0.1)
    assert (second["attempts"], second["others_cores"]) == (3, 0.5)  # still busy: kept, counted below
    assert len(prepared) == 6
    quiet = bench.quietness({"convert": [first, second]}, schedule)
    assert (quiet["runs"], quiet["retried"], quiet["busy"]) == (2, 2, 1)


@pytest.mark.slow
def test_convert_benchmark_runs_and_reports_every_figure() -> None:
    """Default goals: whatever this machine measures, the exit status and ``goals_met`` follow the figures, and
    the figures follow the runs they report."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--images", "40", "--repeats", "1",
         "--no-drop-caches"],  # the page cache of a shared machine is left alone
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    warm_figures = figures["caches"]["warm"]
    met = {"ratio": warm_figures["ratio"] >= 0.9, "images": warm_figures["convert_images_s"]["median"] >= 2000}
    assert figures["goals_met"] == met
    assert result.returncode == (0 if all(met.values()) else 1)
    assert (figures["images"], figures["crc32c"]) == (40, "google-crc32c (C)")  # every image made was converted
    assert "posix_fadvise" in figures["cache_method"]
    for cache in ("warm", "cold"):
        pair = figures["caches"][cache]
        assert {len(runs) for runs in pair["runs"].values()} == {1}
        for member in ("copy", "tar", "convert"):
            (run,) = pair["runs"][member]
            assert pair[f"{member}_mb_s"]["median"] == pytest.approx(figures["tree_mb"] / run["seconds"])
        (run,) = pair["runs"]["convert"]
        assert pair["convert_images_s"]["median"] == pytest.approx(40 / run["seconds"])
        assert pair["ratio"] == pytest.approx(pair["runs"]["copy"][0]["seconds"] / run["seconds"])
    assert set(figures["cpu_s_per_gb"]) == {"google-crc32c", "numpy"}
    assert {"1", "2"} <= set(figures["scaling"]) and figures["scaling"]["1"]["speedup"] == 1
    for figure in figures["scaling"].values():
        assert figure["speedup"] == pytest.approx(figure["median"] / figures["scaling"]["1"]["median"])


def test_a_before_folder_without_a_converter_is_refused(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "benchmarks/convert_speed.py", "--before", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].endswith(
        f"--before {tmp_path}: no trainbench/data/convert.py in it")
