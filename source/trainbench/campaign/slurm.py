"""Slurm job arrays for campaigns (``trainbench campaign run MATRIX --emit-slurm FILE``).

The script is one array task per planned run (``--array=0-<runs-1>``, the numbers ``--dry-run`` prints); each task
runs ``srun [apptainer exec --nv IMAGE] <command> campaign run MATRIX <overrides> --output CAMPAIGN --only N`` into
the one campaign folder. Tasks may finish in any order and at once: ``--only`` locks while it renames run folders
and rebuilds results.csv from the run folders, so no writer loses another's rows.

- Every path is made absolute (a task starts in the submit folder, which need not be this one) and every argument of
  the task line is shell-quoted; the ``#SBATCH`` lines are read by sbatch, not bash: their values are double-quoted
  (sbatch's own quoting), and a value sbatch cannot carry (a double quote, a backslash, a control character) is a
  UsageError.
- Slurm's logs go to ``CAMPAIGN/slurm/<job>_<task>.out``. sbatch opens that file before the script runs, so the
  script cannot make the folder: ``emit_sbatch`` (``make_log_dir``) makes it when it writes the script.
- ``%`` in the campaign path is doubled: sbatch reads ``%A``, ``%a``... in ``--output`` as patterns.
- The script never replaces a file: an existing FILE (the matrix itself, an earlier script, a folder, a dangling
  link) is refused in one line before anything is written, and the script appears whole or not at all (written
  under a temporary name, then linked to FILE, which fails if FILE appeared meanwhile).
- ``--replace-matrix`` is passed on to every task (the first task to start records the matrix, as a plain run would).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from trainbench.errors import UsageError, os_reason

LOG_DIR = "slurm"  # in the campaign folder: one <job>_<task>.out per array task
_EXECUTABLE = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH  # 755


def task_command(container: str | None = None) -> list[str]:
    """What each task runs before ``campaign run``: this Python's trainbench, or the image's ``trainbench``."""
    return ["trainbench"] if container else [sys.executable, "-m", "trainbench"]


def container_prefix(container: str | None) -> list[str]:
    return ["apptainer", "exec", "--nv", container] if container else []


def _absolute(path: Path) -> Path:
    """Absolute, with ``..`` removed, symlinks kept (a shared file system's path is the same on every node)."""
    return Path(os.path.abspath(path))


def _directive_value(value: str, what: str) -> str:
    """``value`` double-quoted for an ``#SBATCH`` line, or a UsageError when sbatch could not read it back."""
    if not value or any(char in value for char in '"\\') or any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise UsageError(f"--emit-slurm: {what} {value!r} cannot be written on an #SBATCH line "
                         "(empty, or a double quote, backslash or control character)")
    return f'"{value}"'


def _positive(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"--emit-slurm: {what} must be a whole number >= 1, got {value!r}")
    return value


def log_dir(campaign_dir: Path) -> Path:
    return _absolute(campaign_dir) / LOG_DIR


def _directives(campaign_dir: Path, runs: int, *, cpus_per_task: int | None, gpus_per_task: int | None,
                time_limit: str | None, partition: str | None, job_name: str) -> list[str]:
    logs = str(log_dir(campaign_dir))
    _directive_value(logs, "campaign folder")  # checked as given: the message shows the user's path
    lines = [
        f"--job-name={_directive_value(job_name, 'job name')}",
        f"--array=0-{_positive(runs, 'the number of runs') - 1}",
        # a literal % is %% in sbatch's file patterns; %A (job id) and %a (task id) are patterns
        f"--output={_directive_value(logs.replace('%', '%%') + '/%A_%a.out', 'output')}",
    ]
    if partition is not None:
        lines.append(f"--partition={_directive_value(partition, 'partition')}")
    if time_limit is not None:
        lines.append(f"--time={_directive_value(time_limit, 'time limit')}")
    if cpus_per_task is not None:
        lines.append(f"--cpus-per-task={_positive(cpus_per_task, 'cpus per task')}")
    if gpus_per_task is not None:
        lines.append(f"--gpus-per-task={_positive(gpus_per_task, 'gpus per task')}")
    return [f"#SBATCH {line}" for line in lines]


def _task_line(matrix_path: Path, campaign_dir: Path, overrides: Sequence[str], command: Sequence[str],
               container: str | None, shuffle_seed: int | None, replace_matrix: bool) -> str:
    words = [*container_prefix(container), *command, "campaign", "run", str(_absolute(matrix_path)), *overrides,
             "--output", str(_absolute(campaign_dir))]
    if shuffle_seed is not None:  # --only N means the N-th run of the shuffled plan: the tasks must shuffle alike
        words += ["--shuffle", str(shuffle_seed)]
    if replace_matrix:
        words.append("--replace-matrix")
    # the task id stays a shell expansion: quoted by hand, after the shlex-quoted words
    return f'srun {shlex.join(words)} --only "$SLURM_ARRAY_TASK_ID"'


def sbatch_script(matrix_path: Path, campaign_dir: Path, runs: int, overrides: Sequence[str], *,
                  command: Sequence[str], container: str | None = None, cpus_per_task: int | None = None,
                  gpus_per_task: int | None = None, time_limit: str | None = None, partition: str | None = None,
                  job_name: str = "trainbench", shuffle_seed: int | None = None, replace_matrix: bool = False) -> str:
    """The bash sbatch script of a campaign of ``runs`` planned runs: one array task per run (see the module)."""
    if not command:
        raise UsageError("--emit-slurm: the task command is empty")
    if container is not None and not container.strip():
        raise UsageError("--container: empty image name")
    directives = _directives(campaign_dir, runs, cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task,
                             time_limit=time_limit, partition=partition, job_name=job_name)
    campaign = _absolute(campaign_dir)
    header = [
        "#!/bin/bash",
        f"# trainbench campaign as a Slurm job array: {runs} array task(s), task N runs planned run N",
        "# (`trainbench campaign run MATRIX --dry-run` lists them) with --only N.",
        "# Submit: sbatch THIS_FILE  (sbatch --wait THIS_FILE blocks until every task ends; its exit status is the",
        "# highest task's). Any task again, alone: sbatch --array=N THIS_FILE",
        f"# Campaign folder: {campaign}",
        "# Tasks may finish in any order and at once: results.csv in the campaign folder is rebuilt from the run",
        f"# folders after every task. Slurm's logs: {log_dir(campaign)}/<job>_<task>.out",
    ]
    return "\n".join([*header, *directives, "", "set -euo pipefail", "",
                      _task_line(matrix_path, campaign_dir, overrides, command, container, shuffle_seed,
                                 replace_matrix), ""])


def make_log_dir(campaign_dir: Path) -> Path:
    """Make CAMPAIGN/slurm/ (sbatch opens the tasks' log files there before any task runs)."""
    path = log_dir(campaign_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{path}: cannot make Slurm's log folder: {os_reason(error)}") from None
    return path


def refuse_existing(path: Path) -> None:
    """--emit-slurm never replaces a file: one line when ``path`` is taken (a link to nothing included), or when
    its folder is missing (checked before the campaign's log folder is made)."""
    if path.is_symlink() or path.exists():
        what = "a folder" if path.is_dir() else "a file"
        raise UsageError(f"--emit-slurm {path}: {what} of that name exists and is never overwritten; choose a new "
                         "file name")
    if not path.parent.is_dir():
        raise UsageError(f"--emit-slurm {path}: no such folder {path.parent}")


def write_sbatch_script(path: Path, text: str) -> None:
    """Write the script executable (755) under a temporary name, then link it to ``path``: whole or not at all, and
    never over an existing file (``refuse_existing``), even one that appeared while it was written."""
    refuse_existing(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8", newline="\n") as out:
            out.write(text)
        temporary.chmod(_EXECUTABLE)
        os.link(temporary, path)  # fails if path exists: no overwrite, even in a race
    except FileExistsError:
        refuse_existing(path)
        raise UsageError(f"{path}: cannot write the script (its temporary name was taken)") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot write the script ({os_reason(error)})") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def emit_sbatch(path: Path, matrix_path: Path, campaign_dir: Path, runs: int, overrides: Sequence[str], *,
                container: str | None = None, command: Sequence[str] | None = None, cpus_per_task: int | None = None,
                gpus_per_task: int | None = None, time_limit: str | None = None, partition: str | None = None,
                job_name: str = "trainbench", shuffle_seed: int | None = None, replace_matrix: bool = False) -> str:
    """``--emit-slurm FILE``: the script written to ``path`` and the campaign's slurm/ folder made; returns the text.
    ``command`` defaults to ``task_command(container)``; the rest is ``sbatch_script``'s. An existing ``path`` is
    refused before anything is made."""
    text = sbatch_script(matrix_path, campaign_dir, runs, overrides,
                         command=task_command(container) if command is None else command, container=container,
                         cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task, time_limit=time_limit,
                         partition=partition, job_name=job_name, shuffle_seed=shuffle_seed,
                         replace_matrix=replace_matrix)
    refuse_existing(path)
    make_log_dir(campaign_dir)
    write_sbatch_script(path, text)
    return text
