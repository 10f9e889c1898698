"""A real one-node Slurm (tests/slurm/start_slurm.sh, Debian's slurm-wlm and munge, installed with apt when missing
and run as root): a campaign's job array and scripts/slurm/throughput.sbatch, submitted with sbatch (slow).

Every test that needs the cluster is in this module, so one module fixture starts it once and stops it at the end:
under pytest-xdist a module stays on one worker (``--dist loadfile``), and two modules starting their own Slurm on
two workers would fight for its ports and munged's socket. The scripts' text and their refusals are tested without
Slurm in test_campaign_slurm.py and test_slurm_scripts.py.
"""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.test_campaign_slurm import TINY_MATRIX
from tests.test_slurm_scripts import SBATCH
from trainbench.campaign import load_matrix, planned_runs
from trainbench.campaign.slurm import LOG_DIR, emit_sbatch

START_SLURM = REPO / "tests" / "slurm" / "start_slurm.sh"
STOP_SLURM = REPO / "tests" / "slurm" / "stop_slurm.sh"
SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "srun")
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")



def _install_slurm() -> str | None:
    """Debian's Slurm and munge with apt (root only); None when installed, else why not."""
    if os.geteuid() != 0:
        return "slurmctld/sbatch are not installed and installing them needs root"
    command = ["apt-get", "install", "-y", "--no-install-recommends", *SLURM_PACKAGES]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in ([command], [["apt-get", "update"], command]):  # a stale package list: update once, then again
        try:
            results = [subprocess.run(c, capture_output=True, text=True, env=env, timeout=600) for c in step]
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"apt-get failed: {error}"
        if results[-1].returncode == 0 and all(shutil.which(b) for b in SLURM_BINARIES):
            return None
    return f"apt-get install {' '.join(SLURM_PACKAGES)} failed: {results[-1].stderr.strip()[-300:]}"


def _log_tail(folder: Path) -> str:
    return "\n".join(f"--- {log}\n{log.read_text(errors='replace')[-2000:]}" for log in sorted(folder.glob("log/*")))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A one-node Slurm of its own (conf, state and logs under the test's tmp folder), stopped at the end."""
    if not all(shutil.which(binary) for binary in SLURM_BINARIES):
        reason = _install_slurm()
        if reason is not None:
            pytest.skip(reason)
    # A second controller would fight the first for its ports. This module is the only one that starts a Slurm (one
    # start for all its tests), but a controller stopped just before (a previous run) takes a moment to exit: wait for
    # it, not for a fixed time (generous: a loaded machine); one that stays is another's, and skips.
    deadline = time.monotonic() + 30
    while (running := subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, text=True)).returncode == 0:
        if time.monotonic() > deadline:
            pytest.skip(f"another slurmctld is running (pid {running.stdout.split()[0]}): stop it first")
        time.sleep(0.5)
    folder = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_TRY_DIR": str(folder), "SLURM_TRY_CLEAN": "1"}
    try:
        started = subprocess.run(["bash", str(START_SLURM)], capture_output=True, text=True, env=env, timeout=180)
        if started.returncode != 0:
            pytest.fail(f"start_slurm.sh failed ({started.returncode}): {started.stderr}\n{_log_tail(folder)}")
        conf = Path(started.stdout.strip().splitlines()[-1])
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(conf))  # every client (sbatch, scontrol) of this test reads it
            yield folder
    finally:
        subprocess.run(["bash", str(STOP_SLURM)], capture_output=True, text=True, env=env, timeout=120)


def _tasks(job: str) -> list[dict[str, str]]:
    """scontrol's fields of each array task, by task id (no sacct here: scontrol keeps ended jobs for MinJobAge)."""
    shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30)
    tasks = [dict(item.split("=", 1) for item in line.split() if "=" in item) for line in shown.stdout.splitlines()]
    return sorted(tasks, key=lambda task: int(task.get("ArrayTaskId", "-1")))


def _overlap(tasks: list[dict[str, str]]) -> bool:
    """Whether two tasks ran at the same time (scontrol's times are whole seconds, ISO: they sort as text)."""
    spans = sorted((task["StartTime"], task["EndTime"]) for task in tasks)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def _node_cpus() -> int:
    shown = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, timeout=30)
    return int(shown.stdout.split()[0].rstrip("+"))


@pytest.mark.slow
def test_sbatch_accepts_the_script(slurm: Path, tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    emit_sbatch(path, tmp_path / "m.yaml", tmp_path / "camp dir%", 3, ["seed=1"], partition="debug",
                time_limit="10:00", cpus_per_task=1, job_name="trainbench test")
    result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "to start at" in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_campaign_through_a_slurm_job_array(slurm: Path, tmp_path: Path) -> None:
    """Four array tasks, two at a time, write into one campaign folder (a name with a space): every run ends in its
    own _ret_0 folder and results.csv holds every run's rows, whatever order the tasks finished in."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TINY_MATRIX)
    campaign = tmp_path / "camp aign"
    job_script = tmp_path / "job.sh"
    emitted = run_cli("campaign", "run", str(matrix), "--output", str(campaign), "--emit-slurm", str(job_script),
                      cwd=tmp_path, timeout=120)
    assert emitted.returncode == 0, emitted.stderr
    runs = planned_runs(load_matrix(matrix))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}  # the tasks inherit it
    started = time.monotonic()
    submitted = subprocess.run(["sbatch", "--parsable", "--wait", str(job_script)], capture_output=True, text=True,
                               cwd=tmp_path, env=env, timeout=720)
    elapsed = time.monotonic() - started
    job = submitted.stdout.strip().split(";")[0]
    tasks = _tasks(job)
    logs = sorted((campaign / LOG_DIR).glob("*.out"))
    report = "\n".join([f"sbatch rc {submitted.returncode} after {elapsed:.0f} s: {submitted.stderr}",
                        *(f"task {t.get('ArrayTaskId')}: {t.get('JobState')} exit {t.get('ExitCode')} "
                          f"{t.get('StartTime')} - {t.get('EndTime')}" for t in tasks),
                        *(f"--- {log.name}\n{log.read_text()[-1500:]}" for log in logs)])
    print(f"slurm campaign: {len(runs)} array tasks in {elapsed:.0f} s")
    assert submitted.returncode == 0, report
    assert [log.name for log in logs] == sorted(f"{job}_{n}.out" for n in range(len(runs))), report

    finished = sorted(path.name for path in campaign.glob("run_*_ret_0"))
    assert len(finished) == len(runs), (finished, report)
    assert sorted(path.name for path in campaign.glob("run_*")) == finished, report  # no lost or abandoned run
    with open(campaign / "results.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    batch_sizes = load_matrix(matrix).batch_sizes
    assert len(rows) == len(runs) * len(batch_sizes), (rows, report)
    assert sorted((int(row["run"]), int(row["batch_size"])) for row in rows) == [
        (n, size) for n in range(len(runs)) for size in sorted(batch_sizes)], report
    assert {row["status"] for row in rows} == {"ok"}, report
    assert [task["ExitCode"] for task in tasks] == ["0:0"] * len(runs), report
    if _node_cpus() >= 2:  # else the tasks ran one by one and concurrent writers were not tested
        assert _overlap(tasks), report


def _wait_for(job: str, deadline: float) -> tuple[str, str]:
    """The job's final JobState and ExitCode, read from scontrol every half second (``sbatch --wait`` polls at
    growing intervals of up to 10 s, idle time on every run)."""
    while True:
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30)
        fields = dict(item.split("=", 1) for item in shown.stdout.split() if "=" in item)
        state = fields.get("JobState", f"not shown ({shown.stderr.strip()})")  # asked again, to the deadline
        ended = "JobState" in fields and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")
        if ended or time.monotonic() > deadline:
            return state, fields.get("ExitCode", "")
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sbatch_runs_two_cpu_processes_on_one_node(slurm: Path, tmp_path: Path) -> None:
    """Submitted from the repository root as the README says, on a node without GPUs (--gpus-per-node=0 on the
    command line): srun's one task runs trainbench throughput, whose worker is a torchrun launch of 2 CPU processes;
    the node's run folder holds one batch size measured by both (world_size 2)."""
    output = tmp_path / "out"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OUTPUT": str(output),
           "GPUS_PER_NODE": "2", "BATCH_SIZES": "1", "WARMUP": "1", "STEPS": "2",
           "EXTRA_ARGS": "--device cpu --image-size 64 --num-classes 4"}
    log = tmp_path / "slurm-%j.out"
    submitted = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--gpus-per-node=0",
                                "--cpus-per-task=1", "--time=10:00", f"--output={log}", str(SBATCH)],
                               cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    state, exit_code = _wait_for(job, deadline=time.monotonic() + 540)
    logs = sorted(tmp_path.glob("slurm-*.out"))
    report = "\n".join([f"job {job}: {state}, exit {exit_code}",
                        *(f"--- {path.name}\n{path.read_text()[-3000:]}" for path in logs)])
    assert (state, exit_code) == ("COMPLETED", "0:0"), report
    assert [path.name for path in logs] == [f"slurm-{job}.out"], report
    text = logs[0].read_text()
    assert "srun exited with status 0" in text, report
    (run_dir,) = (output / f"job_{job}" / "node_0").iterdir()
    with open(run_dir / "summary.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    assert [(row["batch_size"], row["status"], row["world_size"]) for row in rows] == [("1", "ok", "2")], report
    assert len(list((run_dir / "logs").glob("batch_1.rank*.result.json"))) == 2, report
