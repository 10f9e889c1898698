"""Bad input: one line on stderr naming the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli, run_main

MAX_BATCH = "16777216"  # trainbench.config.MAX_BATCH_SIZE


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["throughput", "--framework", "mxnet"], ["framework", "mxnet", "tf, torch"]),
        (["throughput", "--batch-sizes", "0"], ["throughput: argument --batch-sizes:", "from 1 to", "got 0"]),
        (["throughput", "--batch-sizes", "4,x"], ["--batch-sizes", "'x'", "whole number"]),
        (["throughput", "--precision", "fp8"], ["precision", "fp8"]),
        (["throughput", "--device", "cuda"], ["--device cuda", "no GPU"]),
        (["throughput", "--device", "cpu", "--precision", "fp16"], ["fp16 needs a GPU"]),
        (["throughput", "--steps", "0"], ["throughput: argument --steps:", "from 1 to", "got 0"]),
        (["throughput", "--data", "/no/such/folder"], ["/no/such/folder", "does not exist"]),
        (["throughput", "--no-such-option"], ["unrecognized arguments", "--no-such-option"]),
        (["train", "--framework", "jax"], ["framework", "jax"]),
        (["train", "--batch-size", "0"], ["train: argument --batch-size:", "got 0"]),
        (["train", "--data", "/no/such/folder"], ["/no/such/folder"]),
        (["train", "--resume", "/no/such/run"], ["/no/such/run", "not a trainbench training run"]),
        (["train", "--decay-epochs", "30,sixty"], ["decay-epochs"]),
        (["nonsense"], ["invalid choice"]),
        # numbers: finite, in range, whole where counted; the error names the subcommand and the option
        (["throughput", "--timeout", "-5"], ["throughput: argument --timeout:", "finite number above 0", "-5"]),
        (["throughput", "--timeout", "nan"], ["--timeout", "finite number above 0", "nan"]),
        (["throughput", "--timeout", "inf"], ["--timeout", "inf"]),
        (["throughput", "--timeout", "0"], ["--timeout", "above 0"]),
        (["throughput", "--timeout", "soon"], ["--timeout", "not a number", "'soon'"]),
        (["profile", "torch", "--timeout", "nan"], ["profile: argument --timeout:", "nan"]),
        (["throughput", "--warmup", "-1"], ["--warmup", "from 0 to", "got -1"]),
        (["throughput", "--repeats", "0"], ["--repeats", "got 0"]),
        (["throughput", "--steps", "1e3"], ["--steps", "not a whole number", "'1e3'"]),
        (["throughput", "--steps", "99999999999999999999"], ["--steps", "1000000000", "99999999999999999999"]),
        (["throughput", "--image-size", "31"], ["--image-size", "from 32 to 4096"]),
        (["throughput", "--image-size", "100000"], ["--image-size", "got 100000"]),
        (["throughput", "--num-classes", "1"], ["--num-classes", "from 2"]),
        (["throughput", "--seed", "-1"], ["--seed", "from 0 to 4294967295"]),
        (["throughput", "--batch-sizes", str(int(MAX_BATCH) + 1)], ["--batch-sizes", MAX_BATCH]),
        (["train", "--batch-size", "99999999999999999999"], ["train: argument --batch-size:", MAX_BATCH,
                                                            "99999999999999999999"]),
        (["train", "--epochs", "0"], ["--epochs", "got 0"]),
        (["train", "--steps-per-epoch", "-3"], ["--steps-per-epoch", "got -3"]),
        (["train", "--eval-steps", "0"], ["--eval-steps"]),
        (["train", "--log-every", "0"], ["--log-every"]),
        (["train", "--synthetic-train-examples", "0"], ["--synthetic-train-examples"]),
        (["train", "--base-lr", "0"], ["--base-lr", "above 0"]),
        (["train", "--base-lr", "nan"], ["--base-lr", "nan"]),
        (["train", "--momentum", "1"], ["--momentum", "below 1"]),
        (["train", "--weight-decay", "-0.1"], ["--weight-decay", "at least 0"]),
        (["train", "--label-smoothing", "nan"], ["--label-smoothing", "nan"]),
        (["train", "--warmup-epochs", "inf"], ["--warmup-epochs", "inf"]),
        (["train", "--decay-epochs", "60,30"], ["train: argument --decay-epochs:", "increasing", "'60,30'"]),
        (["train", "--decay-epochs", "30,,60"], ["--decay-epochs", "empty item"]),
        (["train", "--decay-epochs", ""], ["--decay-epochs", "empty string"]),
        (["profile", "torch", "--iterations", "0"], ["profile: argument --iterations:", "got 0"]),
        (["profile", "torch", "--start-iteration", "-1"], ["--start-iteration", "got -1"]),
        (["profile", "torch", "--metrics", "a,,b"], ["--metrics", "empty item", "'a,,b'"]),
        (["profile", "torch", "--metrics", ""], ["--metrics", "empty string"]),
        # lists: an empty list or item is refused, never read as "the defaults" or skipped
        (["throughput", "--batch-sizes", "4,,8"], ["throughput: argument --batch-sizes:", "empty item", "'4,,8'"]),
        (["throughput", "--batch-sizes", ",4"], ["--batch-sizes", "empty item"]),
        (["throughput", "--batch-sizes", "4,"], ["--batch-sizes", "empty item"]),
        (["throughput", "--batch-sizes", ""], ["--batch-sizes", "empty string"]),
        (["throughput", "--batch-sizes", " "], ["--batch-sizes", "empty string"]),
        (["throughput", "--batch-sizes", "4,8,4"], ["--batch-sizes", "4 is given more than once"]),
        (["profile", "torch", "--batch-sizes", ""], ["profile: argument --batch-sizes:", "empty string"]),
        (["throughput", "--data", ""], ["--data", "empty string"]),
        (["train", "--data", ""], ["--data", "empty string"]),
        (["train", "--resume", ""], ["--resume", "empty string"]),
        # compiled and captured steps, and the GPU loader: what cannot run is named before anything starts
        (["throughput", "--compile", "fastest"], ["compile mode", "'fastest'", "reduce-overhead"]),
        (["throughput", "--device", "cpu", "--compile", "reduce-overhead"], ["reduce-overhead", "needs a GPU"]),
        (["throughput", "--device", "cpu", "--compile", "max-autotune"], ["max-autotune", "needs a GPU"]),
        (["throughput", "--device", "cpu", "--cuda-graph"], ["--cuda-graph", "needs a GPU"]),
        (["throughput", "--compile", "--cuda-graph"], ["--cuda-graph", "choose one"]),
        (["throughput", "--precision", "fp16", "--cuda-graph"], ["fp16", "--cuda-graph"]),
        (["throughput", "--framework", "tf", "--compile"], ["PyTorch's", "--xla"]),
        # a flag the other framework would ignore (and summary.json would still record): refused as a campaign does
        (["throughput", "--framework", "torch", "--xla"], ["--xla is TensorFlow's", "--compile"]),
        (["throughput", "--framework", "tf", "--channels-last"], ["--channels-last is PyTorch's"]),
        (["profile", "tf", "--framework", "torch"], ["the tf profiler", "--framework tf"]),
        (["throughput", "--framework", "tf", "--device", "cpu", "--gpus", "2"], ["--gpus 2", "TensorFlow"]),
        (["throughput", "--windows", "0"], ["--windows/--repeats", "got 0"]),
        (["profile", "torch", "--device", "cpu", "--cuda-graph"], ["--cuda-graph", "needs a GPU"]),
        (["train", "--cuda-graph"], ["--cuda-graph"]),  # no GPU here; on one: the learning-rate reason (test_config)
        (["throughput", "--loader", "dali"], ["loader", "'dali'", "cpu, gpu"]),
        (["throughput", "--loader", "gpu"], ["--loader gpu", "--data"]),
        (["throughput", "--framework", "tf", "--loader", "gpu"], ["--loader gpu", "TensorFlow"]),
        (["train", "--device", "cpu", "--loader", "gpu"], ["--loader gpu", "--data"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    result = run_main(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists()  # refused before any folder is made


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["throughput", "--framework", "mxnet"], ["framework", "mxnet", "tf, torch"]),
        (["train", "--data", "/no/such/folder"], ["/no/such/folder"]),
        (["profile", "torch", "--iterations", "0"], ["profile: argument --iterations:", "got 0"]),
        (["nonsense"], ["invalid choice"]),
    ],
)
def test_bad_input_in_a_real_process_is_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                             fragments: list[str]) -> None:
    """One refusal per command as a user meets it: ``python -m trainbench``'s own exit status and stderr (the
    table above runs the same ``main`` in this process)."""
    result = run_cli(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists()


def test_script_rejects_a_non_numeric_stop_iteration() -> None:
    result = subprocess.run(["bash", "scripts/measure_throughput.sh", "many"], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "measure_throughput.sh: stop_iteration must be a whole number, got 'many'"


@pytest.mark.parametrize(
    ("stop_iteration", "settings", "expected"),
    [
        ("99999999999", {}, "stop_iteration must be at most 1000000000, got '99999999999'"),
        ("100", {"WARMUP": "ten"}, "WARMUP must be a whole number, got 'ten'"),
        ("100", {"WARMUP": "-5"}, "WARMUP must be a whole number, got '-5'"),
        ("100", {"REPEATS": "99999999999999999999"}, "REPEATS must be at most 1000000000, got '99999999999999999999'"),
        # a leading zero is decimal, not octal (bash would fail on 09): 9 iterations, none of them warm-up
        ("09", {"REPEATS": "10"}, "REPEATS must be a whole number from 1 to the timed iterations (9), got '10'"),
    ],
)
def test_script_refuses_bad_numbers_in_one_line(stop_iteration: str, settings: dict[str, str], expected: str) -> None:
    result = subprocess.run(["bash", "scripts/measure_throughput.sh", stop_iteration], cwd=REPO, capture_output=True,
                            text=True, env={**os.environ, "PYTHON": "false", **settings}, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (2, f"measure_throughput.sh: {expected}")


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


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["throughput", "--steps", "x"], "trainbench: throughput: argument --steps: not a whole number: 'x'"),
        (["train", "--batch-size", "99999999999999999999"],
         f"trainbench: train: argument --batch-size: must be a whole number from 1 to {MAX_BATCH}, "
         "got 99999999999999999999"),
        (["input-bench", "DIR", "--workers", "-1"],
         "trainbench: input-bench: argument --workers: must be a whole number from 0 to 1024, got -1"),
        (["input-bench", "DIR", "--steps", "0"], "trainbench: input-bench: argument --steps: must be a whole number "
         "from 1 to 1000000000, got 0"),
        (["input-bench", ""], "trainbench: input-bench: argument DIR: a path is needed, got an empty string"),
        (["throughput", "--no-such-option"], "trainbench: throughput: unrecognized arguments: --no-such-option"),
        (["nonsense"], "trainbench: argument command: invalid choice: 'nonsense' (choose from 'throughput', "
         "'compare', 'train', 'data', 'coreutil', 'input-bench', 'profile', "
         "'campaign', 'variability', 'model', 'report', 'timeline', 'workloads')"),
        (["throughput", "--telemetry-interval", "0.001"], "trainbench: throughput: argument --telemetry-interval: "
         "must be 0 (no timeline) or from 0.01 to 60 seconds, got 0.001"),
        (["throughput", "--telemetry-interval", "often"], "trainbench: throughput: argument --telemetry-interval: "
         "'often' is not a number of seconds"),
        (["variability", "run", "--outlier-threshold", "1.5"], "trainbench: variability run: argument "
         "--outlier-threshold: must be a finite number above 0 and below 1, got 1.5"),
    ],
)
def test_option_errors_have_one_prefix_and_name_the_subcommand(tmp_path: Path, args: list[str],
                                                                expected: str) -> None:
    result = run_main(*args, cwd=tmp_path)
    assert_one_line_error(result)
    assert result.stderr.strip() == expected


@pytest.mark.parametrize("command", [["throughput"], ["train"], ["profile", "torch"]])
def test_empty_output_is_refused_not_taken_as_the_current_folder(tmp_path: Path, command: list[str]) -> None:
    result = run_main(*command, "--device", "cpu", "--output", "", cwd=tmp_path)
    assert_one_line_error(result, f"{command[0]}: argument --output:", "empty string")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["throughput"], ["train"], ["profile", "torch", "--framework", "torch"]])
def test_output_that_is_a_file_or_inside_one_is_named_in_one_line(tmp_path: Path, command: list[str]) -> None:
    a_file = tmp_path / "results.txt"
    a_file.write_text("precious\n")
    cheap = ["--device", "cpu", "--image-size", "32", "--num-classes", "2"]
    result = run_main(*command, *cheap, "--output", str(a_file), cwd=tmp_path)
    assert_one_line_error(result, str(a_file), "not a folder")
    result = run_main(*command, *cheap, "--output", str(a_file / "runs"), cwd=tmp_path)
    assert_one_line_error(result, str(a_file / "runs"), "Not a directory")
    assert a_file.read_text() == "precious\n" and sorted(p.name for p in tmp_path.iterdir()) == ["results.txt"]


def _read_only_prefix(folder: Path) -> list[str]:
    """A command prefix that runs its command with ``folder`` on a read-only bind mount of a private mount
    namespace (root or user namespaces needed); skips the test where that cannot be made."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    prefix = ["unshare", "-m", "sh", "-c", script, str(folder)]
    try:
        probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if probe.returncode == 0 or "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    return prefix


@pytest.mark.parametrize("command", [["throughput"], ["train"], ["profile", "torch", "--framework", "torch"]])
def test_output_on_a_read_only_mount_is_named_in_one_line(tmp_path: Path, command: list[str]) -> None:
    mounted = tmp_path / "ro"
    mounted.mkdir()
    prefix = _read_only_prefix(mounted)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([*prefix, sys.executable, "-m", "trainbench", *command, "--device", "cpu",
                             "--output", str(mounted / "runs")], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert_one_line_error(result, str(mounted / "runs"), "Read-only file system")
    assert not any(mounted.iterdir())


def test_resume_of_a_run_that_has_no_config_is_refused(tmp_path: Path) -> None:
    result = run_main("train", "--resume", str(tmp_path), cwd=tmp_path)
    assert_one_line_error(result, str(tmp_path / "config.json"), "not a trainbench training run")


def test_a_path_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "two\nlines"
    a_file.write_text("")
    result = run_main("throughput", "--device", "cpu", "--output", str(a_file), cwd=tmp_path)
    assert_one_line_error(result, "two\\nlines", "not a folder")


def test_resume_of_a_run_on_a_read_only_mount_is_named_in_one_line(tmp_path: Path) -> None:
    import json

    from trainbench.config import ModelConfig, TrainConfig, to_dict

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = to_dict(TrainConfig(model=ModelConfig(device="cpu", image_size=32, num_classes=2), epochs=1))
    (run_dir / "config.json").write_text(json.dumps(config))
    prefix = _read_only_prefix(run_dir)
    result = subprocess.run([*prefix, sys.executable, "-m", "trainbench", "train", "--resume", str(run_dir)], cwd=REPO,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True, timeout=300)
    assert_one_line_error(result, str(run_dir), "cannot write", "Read-only file system")
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json"]
