"""``trainbench campaign``: the example matrix end to end, a kill and a resume, concurrent ``--only`` tasks, bad
matrices. The runs are real (workers, ResNet-50 on the CPU at 64 px), so all but the refusals are slow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import assert_one_line_error, run_cli
from trainbench.campaign.matrix import load_matrix
from trainbench.campaign.runner import open_campaign, plan
from trainbench.campaign.table import read_run_info
from trainbench.errors import UsageError
from trainbench.results.files import write_json_atomic

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
    """The example as a user runs it, with one override (``framework=torch``): its torch half for real, every run
    and batch size a row of the table; the whole example's plan with --dry-run (its TF runs are TF's ResNet-50 at
    64 px, what test_throughput_e2e's complete TF run checks: a worker each is TF's seconds of start-up twice)."""
    whole = run_cli("campaign", "run", str(EXAMPLE), "--dry-run")
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.strip().splitlines()[-1] == "2 experiments x 2 repeats = 4 runs"
    assert {line.split()[5].split("-")[0] for line in whole.stdout.strip().splitlines()[:-1]} == {"torch", "tf"}
    campaign = tmp_path / "campaign"
    result = run_cli("campaign", "run", str(EXAMPLE), "--output", str(campaign), "framework=torch", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(campaign)
    plan = run_cli("campaign", "run", str(EXAMPLE), "--dry-run", "framework=torch").stdout.strip().splitlines()
    assert plan[-1] == "1 experiments x 2 repeats = 2 runs"
    names = [line.split()[5] for line in plan[:-1]]  # "<n>  rep <r>  exp <e>  <config>  batch sizes 1,2"
    repetitions = [int(line.split()[2]) for line in plan[:-1]]
    assert _folders(campaign, "_ret_0") == sorted(f"run_{r}_{name}_ret_0" for r, name in zip(repetitions, names,
                                                                                             strict=True))
    table = _table(campaign)
    assert len(table) == 2 * 2  # runs x batch sizes, one window each
    assert set(table["status"]) == {"ok"} and (table["samples_per_sec"] > 0).all()
    assert sorted(table.groupby(["framework", "batch_size"]).size().to_dict().items()) == [
        (("torch", 1), 2), (("torch", 2), 2)]
    for _, row in table.iterrows():  # every row's numbers are its run folder's summary.json
        summary = pd.read_json(campaign / row["run_folder"] / "summary.json", typ="series")
        [result_row] = [r for r in summary["results"] if r["batch_size"] == row["batch_size"]]
        assert row["samples_per_sec"] == pytest.approx(result_row["samples_per_sec"])

    again = run_cli("campaign", "run", str(EXAMPLE), "--output", str(campaign), "framework=torch")
    assert again.returncode == 0 and "ran 0," in again.stdout and "skipped 2" in again.stdout
    summary = run_cli("campaign", "summary", str(campaign))
    assert summary.returncode == 0, summary.stderr
    assert sum("torch-fp32" in line for line in summary.stdout.splitlines()) == 2  # one per batch size

    other = tmp_path / "other.yaml"
    other.write_text(EXAMPLE.read_text().replace("repeats: 2", "repeats: 3"))
    refused = run_cli("campaign", "run", str(other), "--output", str(campaign), "framework=torch")
    assert_one_line_error(refused, "campaign.json", "another matrix")


@pytest.mark.slow
def test_a_killed_campaign_resumes_with_only_what_was_missing(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TORCH_ONLY.replace("seed: [0, 1]", "seed: [0]"))  # two runs: run 0 done, run 1 killed
    campaign = tmp_path / "campaign"
    first = _campaign(str(matrix), "--output", str(campaign))
    deadline = time.monotonic() + 600
    # killed once run 1 has begun: between two runs (a few ms) there is no in-progress folder to find
    while not (_folders(campaign, "_ret_0") and _folders(campaign, "_inprogress")) and \
            time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the campaign, its sweep and worker, in the middle of run 1
    first.wait()
    done = _folders(campaign, "_ret_0")
    assert len(done) == 1 and len(_folders(campaign, "_inprogress")) == 1
    rerun = run_cli("campaign", "run", str(matrix), "--output", str(campaign), timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "ran 1," in rerun.stdout and "skipped 1 " in rerun.stdout
    assert len(_folders(campaign, "_ret_0")) == 2 and done[0] in _folders(campaign, "_ret_0")
    assert len(_folders(campaign, "_abandoned-1")) == 1 and not _folders(campaign, "_inprogress")
    table = _table(campaign)
    assert sorted(table["run"]) == [0, 1] and set(table["status"]) == {"ok"}


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


@pytest.mark.slow
def test_the_same_run_started_twice_half_a_second_apart_runs_once(tmp_path: Path) -> None:
    """A requeued array task: the second ``--only 0`` is refused in one line while the first runs, and the first's
    folder is neither moved aside nor finished twice."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TORCH_ONLY.replace("repeats: 2", "repeats: 1"))
    campaign = tmp_path / "campaign"
    first = _campaign(str(matrix), "--output", str(campaign), "--only", "0")
    deadline = time.monotonic() + 120
    while not _folders(campaign, "_inprogress") and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    second = _campaign(str(matrix), "--output", str(campaign), "--only", "0")
    _, err = second.communicate(timeout=300)
    _, first_err = first.communicate(timeout=900)
    assert first.returncode == 0, first_err[-3000:]
    lines = err.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "_inprogress: run 0 is running in another process" in lines[0]
    assert len(_folders(campaign, "_ret_0")) == 1 and not _folders(campaign, "_abandoned")
    assert _table(campaign)["run"].tolist() == [0]
    again = run_cli("campaign", "run", str(matrix), "--output", str(campaign), "--only", "0")
    assert again.returncode == 0 and "skipped 1 " in again.stdout, again.stderr  # once it ended: skipped


def _finished_run(campaign: Path, stem: str, fingerprint: str) -> Path:
    folder = campaign / f"{stem}_ret_0"
    folder.mkdir(parents=True)
    write_json_atomic(folder / "campaign_run.json", {"run": 0, "repetition": 0, "experiment": 0, "config": "x",
                                                     "values": {}, "fingerprint": fingerprint})
    return folder


def test_replace_matrix_records_what_it_replaced_and_refuses_a_reused_run_name(tmp_path: Path) -> None:
    first, second, third = (tmp_path / f"{n}.yaml" for n in ("first", "second", "third"))
    first.write_text(TORCH_ONLY)
    second.write_text(TORCH_ONLY.replace("seed: [0, 1]", "seed: [2, 3]"))  # other config strings: no name reused
    third.write_text(TORCH_ONLY.replace("warmup: 1", "warmup: 3"))  # the first's config strings, other settings
    campaign = tmp_path / "campaign"
    matrices = [load_matrix(path) for path in (first, second, third)]
    open_campaign(campaign, matrices[0], None, plan(matrices[0]), replace=False)
    _finished_run(campaign, plan(matrices[0])[0].stem, matrices[0].fingerprint())
    answers = open_campaign(campaign, matrices[1], None, plan(matrices[1]), replace=True)
    record = json.loads((campaign / "campaign.json").read_text())
    assert (record["fingerprint"], record["replaced"]) == (matrices[1].fingerprint(), [matrices[0].fingerprint()])
    assert answers.replaced == (matrices[0].fingerprint(),)
    with pytest.raises(UsageError, match=r"run_0_.*seed0_ret_0: holds run 0 of the matrix this folder held before"):
        open_campaign(campaign, matrices[2], None, plan(matrices[2]), replace=True)
    assert json.loads((campaign / "campaign.json").read_text()) == record  # the refusal changed nothing
    again = open_campaign(campaign, matrices[0], None, plan(matrices[0]), replace=True)  # the first, back: its run
    assert again.answers(read_run_info(campaign / f"{plan(matrices[0])[0].stem}_ret_0" / "campaign_run.json"))


def test_a_read_only_campaign_folder_is_one_line(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TORCH_ONLY)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    prefix = ["unshare", "-m", "sh", "-c", script, str(campaign)]
    try:
        probe = subprocess.run([*prefix, "touch", str(campaign / "probe")], capture_output=True, text=True,
                               timeout=60)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if probe.returncode == 0 or "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([*prefix, sys.executable, "-m", "trainbench", "campaign", "run", str(matrix), "--output",
                             str(campaign), "--only", "0"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert_one_line_error(result, str(campaign), "cannot write in the campaign folder", "Read-only file system")
    assert not any(campaign.iterdir())
