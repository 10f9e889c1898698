"""Bad input: one line on stderr naming the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["throughput", "--framework", "mxnet"], ["framework", "mxnet", "tf, torch"]),
        (["throughput", "--batch-sizes", "0"], ["batch size", "at least 1", "0"]),
        (["throughput", "--batch-sizes", "4,x"], ["'x'", "whole number"]),
        (["throughput", "--precision", "fp8"], ["precision", "fp8"]),
        (["throughput", "--device", "cuda"], ["--device cuda", "no GPU"]),
        (["throughput", "--device", "cpu", "--precision", "fp16"], ["fp16 needs a GPU"]),
        (["throughput", "--steps", "0"], ["timed steps"]),
        (["throughput", "--data", "/no/such/folder"], ["/no/such/folder", "does not exist"]),
        (["throughput", "--no-such-option"], ["unrecognized arguments", "--no-such-option"]),
        (["train", "--framework", "jax"], ["framework", "jax"]),
        (["train", "--batch-size", "0"], ["batch size"]),
        (["train", "--data", "/no/such/folder"], ["/no/such/folder"]),
        (["train", "--resume", "/no/such/run"], ["/no/such/run", "not a trainbench training run"]),
        (["train", "--decay-epochs", "30,sixty"], ["decay-epochs"]),
        (["nonsense"], ["invalid choice"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    result = run_cli(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists()  # refused before any folder is made


def test_script_rejects_a_non_numeric_stop_iteration() -> None:
    result = subprocess.run(["bash", "scripts/measure_throughput.sh", "many"], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "measure_throughput.sh: stop_iteration must be a whole number, got 'many'"


def test_run_train_help_lists_the_original_defaults() -> None:
    result = subprocess.run(["bash", "scripts/run_train.sh", "--help"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for option in ("--epochs", "--batch-size", "--resume", "--log-every", "--label-smoothing", "90 epochs"):
        assert option in result.stdout
