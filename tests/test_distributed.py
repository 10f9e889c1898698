"""Several processes measuring and training together: torchrun + DDP on the CPU (gloo), as on GPUs (NCCL).

What a GPU node adds (NCCL, one GPU per process) cannot run here; the launch, the barrier-bounded windows, the
combination of the ranks' results and DDP's identical parameters can, with two CPU processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_main
from trainbench.bench.launch import worker_command
from trainbench.bench.ranks import merge_ranks
from trainbench.config import BenchConfig, LaunchConfig, ModelConfig
from trainbench.engines.launchers import torchrun_options
from trainbench.errors import UsageError
from trainbench.results.files import rank_file, rank_files
from trainbench.results.records import BatchResult, Status

# --- fast: the arithmetic and the command lines


def rank_result(window_s: float, rates: list[float], **values: object) -> BatchResult:
    return BatchResult(8, Status.OK, None, {"samples_per_sec": 8 * 10 / window_s, "window_s": window_s,
                                            "timed_steps": 10, "window_samples_per_sec": rates,
                                            "step_time_median_s": 0.1, **values})


def test_the_world_rate_is_every_image_over_the_slowest_rank() -> None:
    merged = merge_ranks([(0, rank_result(1.0, [80.0, 82.0], energy_j=200.0, sm_clock_median_mhz=1980)),
                          (1, rank_result(1.25, [64.0, 70.0], energy_j=220.0, sm_clock_median_mhz=1900))],
                         world_size=2)
    assert merged.values["samples_per_sec"] == pytest.approx(2 * 8 * 10 / 1.25)  # 128, not 80 + 64
    assert merged.values["window_s"] == 1.25
    assert merged.values["window_samples_per_sec"] == [128.0, 140.0]  # each window: the slower rank's, x 2
    assert merged.values["samples_per_sec_median"] == pytest.approx(134.0)
    assert merged.values["world_size"] == 2
    assert [row["rank"] for row in merged.values["ranks"]] == [0, 1]
    assert merged.values["energy_j"] == pytest.approx(420.0)
    assert merged.values["joules_per_sample"] == pytest.approx(420.0 / 160)
    assert merged.values["sm_clock_median_mhz"] == pytest.approx(1940.0)


def test_a_failed_rank_fails_the_batch_size_with_its_message() -> None:
    merged = merge_ranks([(8, rank_result(1.0, [80.0])),
                          (9, BatchResult.failed(8, Status.OOM, "CUDA out of memory"))], world_size=16)
    assert (merged.status, merged.error) == (Status.OOM, "rank 9: CUDA out of memory")  # ranks as the job numbers


def test_a_profiled_window_keeps_rank_0s_profile() -> None:
    profiled = BatchResult(8, Status.OK, None, {"profiler": "ncu", "profiled_samples_per_sec": 12.0})
    merged = merge_ranks([(0, profiled), (1, BatchResult(8, Status.OK, None, {"profiler": "ncu"}))], world_size=2)
    assert merged.values["profiled_samples_per_sec"] == 12.0 and merged.values["world_size"] == 2


def test_torchrun_options_for_one_node_and_several() -> None:
    assert torchrun_options(LaunchConfig(processes_per_node=4)) == ["--nproc-per-node=4", "--nnodes=1",
                                                                    "--standalone"]
    assert torchrun_options(LaunchConfig(8, 2, "node01:29500", "job7")) == [
        "--nproc-per-node=8", "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node01:29500", "--rdzv-id=job7"]
    model = ModelConfig(framework="torch", precision="fp32", device="cpu")
    plain = BenchConfig(model=model, batch_size=2)
    assert worker_command(plain, "trainbench.bench.worker") == [sys.executable, "-m", "trainbench.bench.worker"]
    launched = BenchConfig(model=model, batch_size=2, launch=LaunchConfig(processes_per_node=2))
    assert worker_command(launched, "trainbench.bench.worker")[-2:] == ["--module", "trainbench.bench.worker"]


def test_several_nodes_need_a_rendezvous() -> None:
    with pytest.raises(UsageError, match="--rdzv-endpoint"):
        LaunchConfig(processes_per_node=8, nodes=2)


def test_rank_files_are_found_by_rank(tmp_path: Path) -> None:
    path = tmp_path / "batch_4.result.json"
    for rank in (10, 0, 2):
        rank_file(path, rank).write_text("{}")
    rank_file(tmp_path / "batch_40.result.json", 0).write_text("{}")
    assert [p.name for p in rank_files(path)] == ["batch_4.rank0.result.json", "batch_4.rank2.result.json",
                                                  "batch_4.rank10.result.json"]


def test_tensorflow_refuses_several_processes(tmp_path: Path) -> None:
    result = run_main("throughput", "--framework", "tf", "--device", "cpu", "--gpus", "2", "--output",
                      str(tmp_path / "out"), cwd=tmp_path)
    assert_one_line_error(result, "--gpus", "MirroredStrategy")
    assert not (tmp_path / "out").exists()


# The launches whose point is the processes, not the network (the sweep's allocation failure keeps ResNet-50, whose
# absurd batch fails at its first allocation).
TINY_NETWORK = ["--workload", "transformer", "--size", "tiny"]


# --- slow: real torchrun launches of two CPU processes. The command's parent runs in this process (run_main): the
# promise is torchrun's processes, which stay real; the CLI's own process is held by test_throughput_e2e.py.


@pytest.mark.slow
def test_a_two_process_sweep_records_a_batch_no_rank_can_allocate_and_goes_on(tmp_path: Path) -> None:
    # One launch for both promises: the first batch size fails on every rank (206 GB at 32 px), the second is
    # measured by both ranks in two windows.
    result = run_main("throughput", "--device", "cpu", "--framework", "torch", "--gpus", "2", "--batch-sizes",
                      "16777216,2", "--image-size", "32", "--warmup", "1", "--steps", "3", "--repeats", "2",
                      "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # one batch size measured
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["launch"]["processes_per_node"] == 2
    huge, row = summary["results"]
    assert huge["status"] == "oom" and huge["error"].startswith("rank 0: ")
    assert row["status"] == "ok" and row["world_size"] == 2
    ranks = row["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert row["window_s"] == max(r["window_s"] for r in ranks)
    assert row["samples_per_sec"] == pytest.approx(2 * 2 * 6 / row["window_s"])
    # the barrier at both edges: the ranks' windows agree closely
    assert min(r["window_s"] for r in ranks) > 0.9 * row["window_s"]
    env = json.loads((run_dir / "env.json").read_text())
    assert env["framework"]["distributed"]["backend"] == "gloo"
    assert env["framework"]["distributed"]["world_size"] == 2


@pytest.mark.slow
def test_one_process_through_torchrun_measures_under_ddp(tmp_path: Path) -> None:
    result = run_main("throughput", "--device", "cpu", "--framework", "torch", "--gpus", "1", "--torchrun",
                      "--batch-sizes", "2", *TINY_NETWORK, "--warmup", "1", "--steps", "2",
                      "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    (row,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert row["status"] == "ok" and row["world_size"] is None  # one process: its own result, nothing merged
    distributed = json.loads((run_dir / "env.json").read_text())["framework"]["distributed"]
    assert (distributed["backend"], distributed["world_size"]) == ("gloo", 1)  # DDP of one process


@pytest.mark.slow
def test_two_process_training_keeps_the_parameters_identical(tmp_path: Path) -> None:
    # This checkout's source first: the ranks must run the engine under test, not an installed copy.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join([str(REPO / "source"), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone",
                           str(REPO / "tests" / "distributed" / "train_digest.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads((tmp_path / f"digest_{rank}.json").read_text()) for rank in (0, 1)]
    assert sorted(line["rank"] for line in lines) == [0, 1]
    assert {line["world"] for line in lines} == {2}
    assert lines[0]["before"] == lines[1]["before"]  # the same seed: the same start
    assert lines[0]["after"] == lines[1]["after"]  # DDP's averaged gradients: bit-identical after training
    assert lines[0]["after"] != lines[0]["before"]  # and training did change them


@pytest.mark.slow
def test_a_two_process_train_run_from_the_command_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    result = run_main("train", "--device", "cpu", "--framework", "torch", "--gpus", "2", "--batch-size", "4",
                      *TINY_NETWORK, "--epochs", "1", "--steps-per-epoch", "2", "--eval-steps", "1",
                      "--synthetic-train-examples", "16", "--synthetic-eval-examples", "4",
                      "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert json.loads((run_dir / "config.json").read_text())["launch"]["processes_per_node"] == 2
    metrics = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 1  # one epoch, written by rank 0 alone
    assert (run_dir / "checkpoints" / "epoch-0001.pt").exists()
    ranks_said = capfd.readouterr().out  # the ranks' own output: torchrun's processes write to this one's stdout
    assert ranks_said.count("final: epoch 1") == 1
