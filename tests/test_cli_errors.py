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


FORKED_CHILD_GETS_SIGTERM = """
import os, signal, time
from trainbench.cli import main
import threading
signal.signal(signal.SIGTERM, main._terminated)  # as main() installs it
children = []
def fork() -> None:
    child = os.fork()
    if child == 0:  # like a multiprocessing pool worker, which its pool ends with SIGTERM
        time.sleep(60)
        os._exit(0)
    children.append(child)
fork()
thread = threading.Thread(target=fork)  # a pool forks replacement workers from a thread of its own
thread.start()
thread.join()
time.sleep(0.2)
ended = []
for child in children:
    os.kill(child, signal.SIGTERM)
    _, status = os.waitpid(child, 0)
    ended.append(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
print(ended)
"""


def test_sigterm_ends_a_forked_child_silently_as_without_the_handler() -> None:
    """Only the CLI's own process turns SIGTERM into 'interrupted'; a forked helper dies quietly, no traceback."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", FORKED_CHILD_GETS_SIGTERM], capture_output=True, text=True,
                            timeout=60)
    assert (result.stdout.strip(), result.stderr) == ("[True, True]", "")
