"""``trainbench variability run`` end to end: the real command, workers and report, on the stand-in NVML module.

No GPU here: the stand-in NVML (tests/standins/nvml, first on PYTHONPATH) shows two GPUs, and ``--device cpu`` runs
each "GPU" run's network on the CPU: the tiny Transformer, the cheapest to start (the network is not the point).
What this checks is the plumbing: one run folder per (GPU, repetition), each worker seeing only its GPU
(CUDA_VISIBLE_DEVICES=<UUID>, recorded in env.json), the report's files. The real path (telemetry of real GPUs)
runs on a GPU machine.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli

sys.path.insert(0, str(REPO / "benchmarks"))
from gpu_check import plan as gpu_check

STANDIN_NVML = Path(__file__).parent / "standins" / "nvml"
UUIDS = ["GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e10", "GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e11"]
pytestmark = pytest.mark.slow
SMALL = ["--workload", "transformer", "--size", "tiny"]


def standin_env(tmp_path: Path, visible: str = "0,1") -> dict[str, str]:
    spec = {"driver": "550.54.15", "cuda": 12040,
            "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": uuid, "power_limit_mw": 700_000, "power_w": 300.0,
                      "sm_clock": 1980, "memory_clock": 2619, "temperature": 40}
                     for uuid in UUIDS]}
    (tmp_path / "nvml.json").write_text(json.dumps(spec))
    path = os.pathsep.join(filter(None, [str(STANDIN_NVML), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "STANDIN_NVML": str(tmp_path / "nvml.json"), "CUDA_VISIBLE_DEVICES": visible}


def test_variability_runs_every_gpu_and_repetition_and_reports(tmp_path: Path) -> None:
    """Also what benchmarks/gpu_check's variability step reads from this folder (its smoke run skips the step:
    the same command)."""
    result = run_cli("variability", "run", "--device", "cpu", "--framework", "torch", "--batch-sizes", "2",
                     *SMALL, "--warmup", "1", "--steps", "2", "--repetitions", "2",
                     "--output", str(tmp_path / "runs" / "variability"), env=standin_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    plan = json.loads((folder / "variability.json").read_text())
    assert [gpu["uuid"] for gpu in plan["gpus"]] == UUIDS and plan["repetitions"] == 2
    runs = sorted(path.name for path in folder.iterdir() if path.is_dir())
    assert runs == ["gpu0_rep0", "gpu0_rep1", "gpu1_rep0", "gpu1_rep1"]
    for run in runs:
        env = json.loads((folder / run / "env.json").read_text())
        assert env["cuda_visible_devices"] == UUIDS[int(run[3])]  # each worker saw its GPU alone
        summary = json.loads((folder / run / "summary.json").read_text())
        assert [row["status"] for row in summary["results"]] == ["ok"]
        assert summary["results"][0]["telemetry_note"] == "no GPU telemetry: the run is on the cpu"
    gpus = pd.read_csv(folder / "variability_gpus.csv")
    assert sorted(gpus["uuid"]) == UUIDS
    assert (folder / "variability_across.csv").exists() and (folder / "variability_runs.csv").exists()
    assert "NVIDIA H100" in result.stdout
    again = run_cli("variability", "report", str(folder), env=standin_env(tmp_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert pd.read_csv(folder / "variability_gpus.csv").equals(gpus)
    figures = gpu_check.read_variability(gpu_check.Context("cpu", tmp_path, sys.executable), result.stdout)
    assert set(figures) == {"variability_cv_pct_b2", "variability_spread_pct_b2", "variability_repetitions_b2"}
    assert figures["variability_repetitions_b2"] == 4 and figures["variability_cv_pct_b2"] >= 0  # 2 GPUs x 2


def test_variability_without_a_visible_gpu_is_one_line(tmp_path: Path) -> None:
    result = run_cli("variability", "run", "--output", str(tmp_path / "out"),
                     env=standin_env(tmp_path, visible=""), cwd=tmp_path)
    assert_one_line_error(result, "variability: no GPU to compare", "--device cpu checks the plumbing on the CPU")
    assert not (tmp_path / "out").exists()  # refused before any folder is made


def test_device_cpu_without_a_gpu_runs_the_plumbing_on_a_cpu_stand_in(tmp_path: Path) -> None:
    """Also the study's case of this command (tests/study/variability.py names it here)."""
    result = run_cli("variability", "run", "--device", "cpu", "--framework", "torch", "--batch-sizes", "2",
                     *SMALL, "--warmup", "1", "--steps", "2", "--repetitions", "1",
                     "--output", str(tmp_path / "out"), env=standin_env(tmp_path, visible=""), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert sorted(path.name for path in folder.iterdir() if path.is_dir()) == ["gpu0_rep0"]
    plan = json.loads((folder / "variability.json").read_text())
    assert plan["gpus"] == [{"index": 0, "uuid": None, "name": "CPU stand-in (no GPU)"}]
    assert json.loads((folder / "gpu0_rep0" / "env.json").read_text())["cuda_visible_devices"] == ""
    assert "CPU stand-in (no GPU)" in result.stdout
    assert "device cpu: every run trained on the CPU; this checks the study's plumbing and compares no GPUs" in (
        result.stdout)
    assert f"report: trainbench report {folder}" in result.stdout


def test_variability_report_of_a_folder_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    result = run_cli("variability", "report", str(tmp_path), cwd=tmp_path)
    assert_one_line_error(result, str(tmp_path / "variability.json"))
