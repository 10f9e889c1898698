"""End-to-end ``trainbench train`` through the CLI: a run folder, per-epoch metrics, checkpoints, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main

pytestmark = pytest.mark.slow  # every test trains a network through the CLI

STEPS = ["--device", "cpu", "--batch-size", "8", "--synthetic-train-examples", "32", "--synthetic-eval-examples",
         "16", "--warmup-epochs", "0", "--base-lr", "0.4", "--log-every", "2"]
# Run and resume through the command line on the tiny Transformer, for both frameworks: the loop and the run folder
# are the point, not the network (TensorFlow's: a third of ResNet-50's compute and graph tracing). ResNet-50's
# checkpoints restore exactly in tests/test_engine_contract.py (both frameworks), TensorFlow's ResNet-50 trains and
# resumes in tests/test_tf_engine.py, and torch's ResNet-50 trains through the CLI in tests/test_pipelines_cli.py.
TINY = [*STEPS, "--workload", "transformer", "--size", "tiny"]


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_train_then_resume_extends_the_same_run(tmp_path: Path, framework: str) -> None:
    """The first run and the refusal in this process (training starts no worker); the resume in a process of its
    own, which has nothing but the run folder to go on: the train command's real process."""
    first = run_main("train", "--framework", framework, "--epochs", "2", *TINY, "--output", str(tmp_path))
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path
    config = json.loads((run_dir / "config.json").read_text())
    assert config["epochs"] == 2 and config["model"]["framework"] == framework
    assert "epoch 1/2 step 2/4 loss" in first.stdout  # progress every --log-every steps
    rows = metrics(run_dir)
    assert [row["epoch"] for row in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["eval_top1"] <= row["eval_top5"] <= 1.0
        assert row["eval_examples"] == 16 and row["train_samples_per_sec"] > 0

    shortened = run_main("train", "--resume", str(run_dir), "--epochs", "1")  # would rewrite the run's own plan
    assert_one_line_error(shortened, "--epochs 1", "already trains for 2 epochs")
    assert json.loads((run_dir / "config.json").read_text())["epochs"] == 2

    resumed = run_cli("train", "--resume", str(run_dir), "--epochs", "3")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed from the checkpoint after epoch 2" in resumed.stdout
    assert [row["epoch"] for row in metrics(run_dir)] == [1, 2, 3]
    assert json.loads((run_dir / "config.json").read_text())["epochs"] == 3


def test_batch_that_cannot_be_allocated_is_recorded_not_a_hang(tmp_path: Path) -> None:
    """The largest batch the CLI accepts (2**24) needs 824 GB at 64 px: a real allocation failure, recorded in the
    run folder and named in one line, within the test's time limit."""
    result = run_cli("train", "--device", "cpu", "--batch-size", str(2**24), "--image-size", "64", "--num-classes", "4",
                     "--synthetic-eval-examples", "8", "--epochs", "1", "--output", str(tmp_path), timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"trainbench: train: out of memory at batch size {2**24}: ") and "allocate" in lines[0]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    (failure,) = [json.loads(line) for line in (run_dir / "failures.jsonl").read_text().splitlines()]
    assert (failure["status"], failure["batch_size"], failure["epochs_finished"]) == ("oom", 2**24, 0)
    assert str(run_dir / "failures.jsonl") in lines[0]
