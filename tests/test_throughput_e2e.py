"""End-to-end runs of ``trainbench throughput`` on the CPU, at a tiny size, for both frameworks."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, run_cli, run_main

TINY = ["--device", "cpu", "--image-size", "64", "--num-classes", "10", "--warmup", "1", "--steps", "3"]
# The smallest network the CLI builds (2 + 2 layers, d_model 32: milliseconds a step on one core), for the tests
# whose point is the sweep's handling of its workers (kill, Ctrl-C, SIGTERM), not the network.
SMALL = ["--device", "cpu", "--workload", "transformer", "--size", "tiny"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_run(run_dir: Path) -> tuple[dict, list[dict], dict]:
    summary = json.loads((run_dir / "summary.json").read_text())
    with open(run_dir / "steps.csv", newline="") as rows:
        steps = list(csv.DictReader(rows))
    env = json.loads((run_dir / "env.json").read_text())
    return summary, steps, env


def check_ok_result(result: dict, steps: list[dict]) -> None:
    """Every figure of a result follows from its own per-step rows."""
    batch = result["batch_size"]
    timed = [float(row["seconds"]) for row in steps if row["batch_size"] == str(batch) and row["phase"] == "timed"]
    warmup = [row for row in steps if row["batch_size"] == str(batch) and row["phase"] == "warmup"]
    assert result["status"] == "ok" and result["error"] is None
    assert len(timed) == result["timed_steps"] == 3 and len(warmup) == result["warmup_steps"] == 1
    assert sum(timed) == pytest.approx(result["window_s"], rel=1e-9)
    assert result["samples_per_sec"] == pytest.approx(batch * 3 / sum(timed), rel=1e-9)
    assert min(timed) <= result["step_time_median_s"] <= max(timed)
    assert result["step_time_p10_s"] <= result["step_time_median_s"] <= result["step_time_p90_s"]


# The largest batch the CLI accepts (2**24 images of 3x64x64 fp32: 824 GB): a real allocation failure, not a
# simulated one, in torch's sweep below.
ABSURD = 2**24


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "batch_sizes"), [("torch", [ABSURD, 1, 2]), ("tf", [2])])
def test_throughput_sweep_writes_a_complete_run(tmp_path: Path, framework: str, batch_sizes: list[int]) -> None:
    """Both frameworks write the same complete run folder; torch's sweep (a worker per batch size) shows the
    results in order, and its first batch size, which no machine can allocate, is recorded as out of memory while
    the sweep goes on (one batch size for TF: its worker is the same code, and costs seconds more to start)."""
    result = run_cli("throughput", "--framework", framework, "--batch-sizes", ",".join(map(str, batch_sizes)),
                     *TINY, "--output", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path and run_dir.name.endswith(f"_{framework}_fp32_cpu")
    summary, steps, env = read_run(run_dir)
    assert (summary["framework"], summary["precision"], summary["image_size"], summary["data"]) == (
        framework, "fp32", 64, "synthetic")
    assert (summary["workload"], summary["warmup_steps"], summary["timed_steps"], summary["windows"]) == (
        "resnet50", 1, 3, 1)  # the run header's shape (results.header), as a profile writes it
    assert [r["batch_size"] for r in summary["results"]] == batch_sizes
    measured = summary["results"]
    if batch_sizes[0] == ABSURD:
        huge, *measured = measured
        assert huge["status"] == "oom", huge
        assert huge["samples_per_sec"] is None and "allocat" in huge["error"].lower()
        assert {row["batch_size"] for row in steps} == {str(b) for b in batch_sizes[1:]}  # no step rows for it
    for entry in measured:
        check_ok_result(entry, steps)
        assert isinstance(entry["gpus_at_window_end"], list)  # NVML state right after the window; none here
        assert entry["input_samples_per_sec"] is None and entry["input_bound"] is None  # synthetic: no input figures
        # How the step ran and what it held (issue 40): ResNet-50's reference SGD, fp32 kept fp32, its memory.
        assert (entry["matmul_precision"], entry["optimizer"].split(" ")[0]) == ("highest", "sgd")
        assert entry["memory_parameters_bytes"] == 4 * entry["parameters"] == entry["optimizer_state_bytes"]
        assert entry["peak_memory_bytes"] > entry["memory_parameters_bytes"]  # the worker's resident set holds more
        assert "resident set" in entry["peak_memory_kind"]
    assert (run_dir / "throughput.png").read_bytes().startswith(PNG_MAGIC)
    assert (run_dir / "summary.csv").read_text().startswith("batch_size,status,samples_per_sec")
    versions = env["framework"]
    assert versions[{"torch": "torch", "tf": "tensorflow"}[framework]]
    assert env["command"][1:3] == ["throughput", "--framework"]
    assert env["cpu_count"] >= 1 and env["python"].startswith("3.")
    assert "gpus" in env["gpu"]


@pytest.mark.slow
def test_compiling_on_the_cpu_is_timed_apart_from_every_window(tmp_path: Path) -> None:
    """torch.compile's default mode runs on the CPU (TorchInductor's C++ kernels). With no warm-up at all, the
    compile (tens of seconds) must still be outside the timed step: recorded as compile_s, the window much shorter.
    The network is tiny GPT-2 (the fewest kernels to compile of the workloads: about half ResNet-50's CPU time):
    the promise is the split, not the network. Inductor's cache is this test's own, so every run compiles for real
    (a warm cache from an earlier run would leave compile_s at a fraction of a second); one compile thread spares
    the pool of compile processes (each importing torch) on a small machine, and scalar C++ kernels
    (TORCHINDUCTOR_VEC_ISA_OK=0: no SIMD templates to compile) take a fifth less of its time to build. The sweep
    runs in this process (the compile is in its worker, a real process); the CLI's own process: the tests above."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache"), "TORCHINDUCTOR_COMPILE_THREADS": "1",
           "TORCHINDUCTOR_VEC_ISA_OK": "0"}
    result = run_main("throughput", "--framework", "torch", "--device", "cpu", "--compile", "--batch-sizes", "2",
                      "--workload", "gpt2", "--size", "tiny", "--warmup", "0", "--steps", "2",
                      "--output", str(tmp_path / "runs"), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert "step compiled in" in (run_dir / "logs" / "batch_2.log").read_text()
    summary, steps, _ = read_run(run_dir)
    (row,) = summary["results"]
    assert row["status"] == "ok" and row["compile_s"] > 1.0
    # Were the compile inside the window, window_s would exceed compile_s; half leaves room for a loaded machine.
    assert row["window_s"] < row["compile_s"] / 2, (row["window_s"], row["compile_s"])
    assert [r["phase"] for r in steps] == ["timed", "timed"]


# An absurd batch recorded as out of memory, the sweep going on: the complete run above (torch).


KILLED_STEPS = 600


def _wait_for(predicate, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.05)


def _alive(process: psutil.Process) -> bool:
    """Running, and not a zombie (ended, not yet reaped)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _worker_of(parent: psutil.Process, batch: int) -> psutil.Process | None:
    for child in parent.children():
        try:
            if f"batch_{batch}.config.json" in " ".join(child.cmdline()):
                return child
        except psutil.Error:  # a worker that just ended
            continue
    return None


@pytest.mark.slow
def test_killed_worker_is_recorded_and_finished_results_survive(tmp_path: Path) -> None:
    """Batch 2 finishes, batch 3's worker is killed mid-window, Ctrl-C arrives during batch 4. The steps of the
    tiny network: batch 3's window (seconds) outlasts the time the test needs to see it begin and kill it."""
    command = [sys.executable, "-m", "trainbench", "throughput", "--framework", "torch", "--batch-sizes", "2,3,4",
               *SMALL, "--warmup", "1", "--steps", str(KILLED_STEPS), "--output", str(tmp_path)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    # A shell starts background jobs with SIGINT ignored and Python keeps that: give the CLI the default handling
    # a terminal's Ctrl-C meets, wherever this test runs.
    parent = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    me = psutil.Process(parent.pid)

    def worker_of(batch: int) -> psutil.Process | None:
        return _worker_of(me, batch)

    def measuring(batch: int) -> bool:
        logs = list(tmp_path.glob(f"*/logs/batch_{batch}.log"))
        return bool(logs) and "timed steps" in logs[0].read_text()

    try:
        _wait_for(lambda: measuring(3))
        worker_of(3).send_signal(signal.SIGKILL)
        _wait_for(lambda: worker_of(4) is not None)
        parent.send_signal(signal.SIGINT)  # Ctrl-C during batch 4
        output, _ = parent.communicate(timeout=120)
    finally:
        parent.kill()
    assert parent.returncode == 130, output
    run_dir = next(tmp_path.iterdir())
    summary, steps, _ = read_run(run_dir)
    finished, killed, interrupted = summary["results"]
    assert finished["batch_size"] == 2 and finished["status"] == "ok" and finished["timed_steps"] == KILLED_STEPS
    assert killed["batch_size"] == 3 and killed["status"] == "error" and "SIGKILL" in killed["error"]
    assert interrupted["batch_size"] == 4 and interrupted["status"] == "interrupted"
    assert {row["batch_size"] for row in steps} == {"2"}
    assert "interrupted" in output


def script_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of scripts/measure_throughput.sh for a tiny CPU run into ``tmp_path``."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "FRAMEWORK": "torch", "WARMUP": "1", "OUTPUT": str(tmp_path),
            "PYTHON": sys.executable, "EXTRA_ARGS": " ".join(SMALL), **settings}


def measure_throughput_script(env: dict[str, str], stop_iteration: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/measure_throughput.sh", stop_iteration], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_measure_throughput_script_maps_stop_iteration_and_environment(tmp_path: Path) -> None:
    """stop_iteration 7 with WARMUP=1 and REPEATS=3: per batch size of BATCH_SIZES, 1 warm-up and three windows of
    2 steps, each window its own samples/s sample; REPEATS above the timed iterations is refused in one line. The
    tiny Transformer (EXTRA_ARGS): the script's mapping is the point, not the network."""
    env = script_env(tmp_path, BATCH_SIZES="2 3", PRECISION="fp32", REPEATS="3")
    result = measure_throughput_script(env, "7")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "min sentence pairs/s" in result.stdout  # the table shows the spread across windows, in the workload's unit
    summary, steps, env_record = read_run(Path(result.stdout.strip().splitlines()[-1]))
    shape = [(r["batch_size"], r["warmup_steps"], r["windows"], r["timed_steps"]) for r in summary["results"]]
    assert shape == [(2, 1, 3, 6), (3, 1, 3, 6)]
    assert (summary["data"], summary["precision"]) == ("synthetic", "fp32")
    assert "--synthetic" in env_record["command"]
    for row in summary["results"]:
        rates = row["window_samples_per_sec"]
        assert len(rates) == 3 and row["samples_per_sec_min"] == min(rates) and \
            row["samples_per_sec_max"] == max(rates)
        assert row["samples_per_sec"] == pytest.approx(row["batch_size"] * 6 / row["window_s"])
        batch = str(row["batch_size"])
        assert sum(1 for step in steps if step["phase"] == "timed" and step["batch_size"] == batch) == 6

    env["REPEATS"] = "7"  # more windows than the 6 timed iterations
    refused = measure_throughput_script(env, "7")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "REPEATS" in refused.stderr


@pytest.mark.slow
def test_sigterm_keeps_finished_results_and_stops_the_worker(tmp_path: Path) -> None:
    """A batch scheduler's time limit (SIGTERM) is handled like a Ctrl-C: recorded, the worker ended, exit 143."""
    command = [sys.executable, "-m", "trainbench", "throughput", "--framework", "torch", "--batch-sizes", "2,3",
               *SMALL, "--warmup", "1", "--steps", "20", "--output", str(tmp_path)]
    parent = subprocess.Popen(command, cwd=REPO, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    me = psutil.Process(parent.pid)
    try:
        workers: list[psutil.Process | None] = []
        _wait_for(lambda: workers.append(_worker_of(me, 3)) or workers[-1] is not None)
        worker = workers[-1]
        parent.terminate()
        output, _ = parent.communicate(timeout=120)
    finally:
        parent.kill()
    assert parent.returncode == 143, output
    # The sweep stops its worker; a SIGTERM that lands while Popen is still returning leaves the worker to its own
    # watch of the sweep (bench.worker.exit_with_sweep), which ends it moments later: within 15 s either way.
    deadline = time.monotonic() + 15
    while _alive(worker):
        assert time.monotonic() < deadline, f"the worker {worker.pid} still runs 15 s after the sweep ended"
        time.sleep(0.1)
    summary, _, _ = read_run(next(tmp_path.iterdir()))
    assert [(r["batch_size"], r["status"]) for r in summary["results"]] == [(2, "ok"), (3, "interrupted")]


def _processes_running(fragment: str) -> list[psutil.Process]:
    """Live processes whose command line holds ``fragment`` (a run folder): what a sweep left behind."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if fragment in " ".join(process.info["cmdline"] or ()) and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_worker_dies_with_its_sweep_killed_by_sigkill(tmp_path: Path) -> None:
    """kill -9 of the CLI: nobody is left to record the worker's result, so the worker must not run on alone."""
    command = [sys.executable, "-m", "trainbench", "throughput", "--framework", "torch", "--batch-sizes", "2",
               *SMALL, "--warmup", "1", "--steps", "100000", "--output", str(tmp_path)]
    parent = subprocess.Popen(command, cwd=REPO, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    me = psutil.Process(parent.pid)
    try:
        _wait_for(lambda: any("timed steps" in log.read_text() for log in tmp_path.glob("*/logs/batch_2.log")))
        worker = _worker_of(me, 2)
        assert worker is not None
        parent.kill()
        parent.wait()
        # its watch of the sweep ends it at once; 30 s for a loaded machine (psutil.TimeoutExpired if it runs on)
        worker.wait(timeout=30)
    finally:
        parent.kill()
        for process in _processes_running(str(tmp_path)):
            process.kill()
    assert "is gone; stopping" in next(tmp_path.glob("*/logs/batch_2.log")).read_text()


def test_worker_whose_sweep_is_gone_before_it_starts_exits_at_once(tmp_path: Path) -> None:
    """The race: the sweep dies (and its pid may be reused) before the worker watches it. A start time that does
    not match names another process: the worker stops before it reads its configuration."""
    env = {**os.environ, "TRAINBENCH_SWEEP": f"{os.getpid()}:0:{os.getpgid(0)}"}
    result = subprocess.run([sys.executable, "-m", "trainbench.bench.worker", str(tmp_path / "no-config.json"),
                             str(tmp_path / "result.json")], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 3, result.stderr
    assert f"the sweep that started it (pid {os.getpid()}) is gone" in result.stderr
    assert not (tmp_path / "result.json").exists()


@pytest.mark.slow
def test_timeout_is_recorded_and_ends_the_worker(tmp_path: Path) -> None:
    result = run_cli("throughput", "--framework", "torch", "--batch-sizes", "2", *TINY[:6], "--warmup", "1",
                     "--steps", "100000", "--timeout", "2", "--output", str(tmp_path), timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr  # no batch size finished
    assert "Traceback" not in result.stderr
    summary = json.loads((Path(result.stdout.strip().splitlines()[-1]) / "summary.json").read_text())
    (row,) = summary["results"]
    assert (row["batch_size"], row["status"], row["error"]) == (2, "error", "timed out after 2.0 s")
    assert _processes_running(str(tmp_path)) == []
