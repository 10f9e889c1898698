"""``trainbench campaign``: the example matrix end to end, a kill and a resume, concurrent ``--only`` tasks, bad
matrices. The runs are real (workers, ResNet-50 on the CPU at 64 px), so all but the refusals are slow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "configs" / "example_campaign.yaml"
TORCH_ONLY = """
axes:
  framework: [torch]
  precision: [fp32]
  batch_size: [1]
  image_size: [64]
  device: [cpu]
  seed: [0, 1]
repeats: 2
warmup: 1
steps: 2
"""


def _campaign(*args: str, cwd: Path = ROOT) -> subprocess.Popen[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen([sys.executable, "-m", "trainbench", "campaign", "run", *args], cwd=cwd, text=True,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _folders(campaign: Path, suffix: str) -> list[str]:
    return sorted(path.name for path in campaign.glob(f"run_*{suffix}"))


def _table(campaign: Path) -> pd.DataFrame:
    return pd.read_csv(campaign / "results.csv")


@pytest.mark.slow
def test_the_example_matrix_runs_and_its_table_has_a_row_per_run_and_batch_size(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    result = run_cli("campaign", "run", str(EXAMPLE), "--output", str(campaign), timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(campaign)
    plan = run_cli("campaign", "run", str(EXAMPLE), "--dry-run").stdout.strip().splitlines()
    assert plan[-1] == "2 experiments x 2 repeats = 4 runs"
    names = [line.split()[5] for line in plan[:-1]]  # "<n>  rep <r>  exp <e>  <config>  batch sizes 1,2"
    repetitions = [int(line.split()[2]) for line in plan[:-1]]
    assert _folders(campaign, "_ret_0") == sorted(f"run_{r}_{name}_ret_0" for r, name in zip(repetitions, names,
                                                                                             strict=True))
    table = _table(campaign)
    assert len(table) == 4 * 2  # runs x batch sizes, one window each
    assert set(table["status"]) == {"ok"} and (table["images_per_sec"] > 0).all()
    assert sorted(table.groupby(["framework", "batch_size"]).size().to_dict().items()) == [
        (("tf", 1), 2), (("tf", 2), 2), (("torch", 1), 2), (("torch", 2), 2)]
    for _, row in table.iterrows():  # every row's numbers are its run folder's summary.json
        summary = pd.read_json(campaign / row["run_folder"] / "summary.json", typ="series")
        [result_row] = [r for r in summary["results"] if r["batch_size"] == row["batch_size"]]
        assert row["images_per_sec"] == pytest.approx(result_row["images_per_sec"])

    again = run_cli("campaign", "run", str(EXAMPLE), "--output", str(campaign))
    assert again.returncode == 0 and "ran 0," in again.stdout and "skipped 4" in again.stdout
    summary = run_cli("campaign", "summary", str(campaign))
    assert summary.returncode == 0, summary.stderr
    assert sum("tf-fp32" in line or "torch-fp32" in line for line in summary.stdout.splitlines()) == 4

    other = tmp_path / "other.yaml"
    other.write_text(EXAMPLE.read_text().replace("repeats: 2", "repeats: 3"))
    refused = run_cli("campaign", "run", str(other), "--output", str(campaign))
    assert_one_line_error(refused, "campaign.json", "another matrix")


@pytest.mark.slow
def test_a_killed_campaign_resumes_with_only_what_was_missing(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TORCH_ONLY)
    campaign = tmp_path / "campaign"
    first = _campaign(str(matrix), "--output", str(campaign))
    deadline = time.monotonic() + 600
    while not _folders(campaign, "_ret_0") and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the campaign, its sweep and worker, in the middle of run 1
    first.wait()
    done = _folders(campaign, "_ret_0")
    assert len(done) == 1 and len(_folders(campaign, "_inprogress")) == 1
    rerun = run_cli("campaign", "run", str(matrix), "--output", str(campaign), timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "ran 3," in rerun.stdout and "skipped 1 " in rerun.stdout
    assert len(_folders(campaign, "_ret_0")) == 4 and done[0] in _folders(campaign, "_ret_0")
    assert len(_folders(campaign, "_abandoned-1")) == 1 and not _folders(campaign, "_inprogress")
    table = _table(campaign)
    assert sorted(table["run"]) == [0, 1, 2, 3] and set(table["status"]) == {"ok"}


@pytest.mark.slow
def test_concurrent_only_tasks_lose_no_row(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TORCH_ONLY.replace("repeats: 2", "repeats: 1"))
    campaign = tmp_path / "campaign"
    tasks = [_campaign(str(matrix), "--output", str(campaign), "--only", str(n)) for n in (1, 0)]
    for task in tasks:
        _, err = task.communicate(timeout=900)
        assert task.returncode == 0, err[-3000:]
    assert len(_folders(campaign, "_ret_0")) == 2
    assert sorted(_table(campaign)["run"]) == [0, 1]


@pytest.mark.parametrize(("text", "problem"), [
    ("axes: {framework: [torch], batch_size: [1]}\nrepeatz: 2\n", "repeatz"),
    ("axes: {framework: [mxnet], batch_size: [1]}\n", "unknown framework 'mxnet'"),
    ("axes: {framework: [torch], batch_size: []}\n", "batch_size"),
    ("axes: [\n", "m.yaml"),
])
def test_a_bad_matrix_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path, text: str, problem: str) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(text)
    campaign = tmp_path / "campaign"
    assert_one_line_error(run_cli("campaign", "run", str(matrix), "--output", str(campaign)), "m.yaml", problem)
    assert not campaign.exists()


def test_a_bad_override_or_only_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("campaign", "run", str(EXAMPLE), "precision", "--dry-run"), "precision")
    assert_one_line_error(run_cli("campaign", "run", str(EXAMPLE), "--only", "9", "--output", str(tmp_path / "c")),
                          "--only 9", "runs 0 to 3")
