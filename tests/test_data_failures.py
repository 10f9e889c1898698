"""``trainbench data convert`` when things go wrong mid-way: a corrupted finished shard, a worker killed by SIGKILL,
Ctrl-C, a killed parent, a second conversion into the same folder, a full disk. Each ends with at most one line,
keeps the finished shards, leaves no temporary file, and a rerun gives the shards of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli
from tests.test_data_convert import SLOW_CONVERT
from trainbench.data.convert import ConvertOptions, convert
from trainbench.data.shards import MANIFEST, shard_files
from trainbench.data.synth_tree import SynthOptions, synth

SHARDS = ("--train-shards", "8", "--validation-shards", "2")
PROMPTLY_S = 30  # a dead worker or Ctrl-C must end the command well within this (it used to hang for ever)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet")
    synth(SynthOptions(root, classes=3, train_per_class=10, val_per_class=3, size=(64, 48), odd_cases=True, workers=1))
    return root


@pytest.fixture(scope="module")
def reference(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The shards of an uninterrupted conversion, by name."""
    output = tmp_path_factory.mktemp("reference")
    convert(ConvertOptions(tree, output=output, train_shards=8, validation_shards=2, workers=1))
    return {path.name: path.read_bytes() for path in shard_files(output)}


def _shards(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in shard_files(folder)}


def _temporaries(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if ".partial-" in path.name or path.name.endswith(".tmp")]


def _args(tree: Path, output: Path) -> list[str]:
    return ["data", "convert", str(tree), "--output", str(output), *SHARDS, "--workers", "2"]


def _start_slow(tree: Path, output: Path, hold: Path | None = None) -> subprocess.Popen[str]:
    """A conversion slow enough (0.1 s an image) to be hit mid-way; its own process group, as from a terminal, with
    Ctrl-C's default disposition as a shell gives it (an ignored SIGINT in this process would be inherited, and
    Python then installs no KeyboardInterrupt handler: two CI runs saw the conversion finish through its Ctrl-C).
    While the file ``hold`` exists, it stops after its 10th image (a busy machine cannot let it finish first)."""
    env = {**os.environ, **({"SLOW_CONVERT_HOLD": str(hold)} if hold is not None else {})}
    return subprocess.Popen([sys.executable, "-c", SLOW_CONVERT, *_args(tree, output)], cwd=REPO, text=True, env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_a_recorded_shard(process: subprocess.Popen[str], output: Path) -> None:
    deadline = time.monotonic() + 120
    while not _recorded(output):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"the run ended or stalled before a shard was done: {process.communicate()}")
        time.sleep(0.01)


def _recorded(output: Path) -> dict:
    try:
        return json.loads((output / MANIFEST).read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return {}


def _finish(process: subprocess.Popen[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Wait for the command to end (bounded); its result and how long it took from now."""
    start = time.monotonic()
    try:
        stdout, stderr = process.communicate(timeout=PROMPTLY_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # leave no hung conversion behind
        process.communicate()
        pytest.fail(f"the command was still running {PROMPTLY_S} s later")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), time.monotonic() - start


def _rerun_completes(tree: Path, output: Path, reference: dict[str, bytes]) -> subprocess.CompletedProcess[str]:
    result = run_cli(*_args(tree, output))
    assert result.returncode == 0, result.stderr
    assert _shards(output) == reference
    assert not _temporaries(output)
    return result


def test_a_finished_shard_changed_afterwards_is_redone(tree: Path, reference: dict[str, bytes],
                                                       tmp_path: Path) -> None:
    output = tmp_path / "out"
    assert run_cli(*_args(tree, output)).returncode == 0
    flipped, grown, lost = (output / name for name in ("train-00002-of-00008", "train-00005-of-00008",
                                                       "validation-00001-of-00002"))
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the sha256 shows it
    flipped.write_bytes(bytes(data))
    with open(grown, "ab") as file:
        file.write(b"x")
    lost.unlink()
    result = _rerun_completes(tree, output, reference)
    assert "7 of 10 shards were already done" in result.stdout
    assert "3 finished shards were redone (train-00002-of-00008: content differs from the manifest's sha256; " \
           f"train-00005-of-00008: {len(reference[grown.name]) + 1} bytes, the manifest lists " \
           f"{len(reference[grown.name])}; validation-00001-of-00002: missing)" in result.stdout


@pytest.mark.slow
def test_a_worker_killed_by_sigkill_ends_the_run_with_one_line(tree: Path, reference: dict[str, bytes],
                                                               tmp_path: Path) -> None:
    output, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()  # the run cannot finish before it is hit, however busy the machine
    process = _start_slow(tree, output, hold)
    _wait_for_a_recorded_shard(process, output)
    workers = psutil.Process(process.pid).children()
    assert len(workers) == 2
    os.kill(workers[0].pid, signal.SIGKILL)  # as the out-of-memory killer does
    result, seconds = _finish(process)
    assert seconds < PROMPTLY_S
    assert_one_line_error(result, str(output), "a worker process was killed by SIGKILL", "shards finished are kept",
                          "rerun")
    assert not _temporaries(output)
    kept = _recorded(output)
    assert kept and all(_shards(output)[name] == reference[name] for name in kept)
    psutil.wait_procs(workers, timeout=10)
    assert not [worker for worker in workers if worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE]
    assert f"{len(kept)} of 10 shards were already done" in _rerun_completes(tree, output, reference).stdout


@pytest.mark.slow
def test_ctrl_c_prints_the_parents_one_line_only(tree: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    output, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()  # the run cannot finish before it is hit, however busy the machine
    process = _start_slow(tree, output, hold)
    _wait_for_a_recorded_shard(process, output)
    os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group, workers included
    result, seconds = _finish(process)
    assert seconds < PROMPTLY_S
    assert result.returncode == 128 + signal.SIGINT, result.stderr
    assert result.stderr == "trainbench: interrupted; results written so far are kept\n"  # no worker tracebacks
    assert not _temporaries(output)
    _rerun_completes(tree, output, reference)


@pytest.mark.slow
def test_workers_die_with_a_killed_parent_and_a_rerun_is_not_refused(tree: Path, reference: dict[str, bytes],
                                                                      tmp_path: Path) -> None:
    output, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()  # the run cannot finish before it is hit, however busy the machine
    process = _start_slow(tree, output, hold)
    _wait_for_a_recorded_shard(process, output)
    workers = psutil.Process(process.pid).children()
    os.kill(process.pid, signal.SIGKILL)  # the parent alone: its workers must not live on, holding the folder
    process.wait()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    _rerun_completes(tree, output, reference)


@pytest.mark.slow
def test_a_second_conversion_into_the_same_folder_is_refused(tree: Path, reference: dict[str, bytes],
                                                             tmp_path: Path) -> None:
    output, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()
    first = _start_slow(tree, output, hold)
    _wait_for_a_recorded_shard(first, output)
    second = run_cli(*_args(tree, output))
    hold.unlink()
    assert_one_line_error(second, str(output), "another conversion", "is writing into this folder")
    result, _ = _finish(first)
    assert result.returncode == 0, result.stderr
    assert _shards(output) == reference
    assert not _temporaries(output)


def _file_size_limit(limit: int) -> None:
    # Writes past the limit fail with EFBIG (Python ignores SIGXFSZ), as a full disk fails them with ENOSPC.
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_is_one_line_and_leaves_no_partial_files(tree: Path, reference: dict[str, bytes],
                                                             tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    stale = output / ".train-00007-of-00008.partial-999999"  # left by an earlier run killed mid-shard
    stale.write_bytes(b"half a shard")
    limit = min(len(data) for data in reference.values()) - 1  # no shard fits
    full = subprocess.run([sys.executable, "-m", "trainbench", *_args(tree, output)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: _file_size_limit(limit))
    assert_one_line_error(full, str(output), "cannot write", "File too large", "rerun")
    assert not _temporaries(output)  # the failed shard's own, the stopped worker's, and the stale one
    assert not shard_files(output)
    _rerun_completes(tree, output, reference)
