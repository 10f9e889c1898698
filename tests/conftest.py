"""Shared helpers for the tests: run the real CLI in a subprocess, find the shared fixtures."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys

# pytest imports tracemalloc the first time it reports an unraisable exception (an object's finaliser failing during
# garbage collection). If that happens while tensorflow_datasets' lazy imports (through tf-models-official) hold the
# import machinery, tracemalloc's own imports come back as lazy stand-ins and pytest fails the test that happened to
# be running ("'LazyModule' object is not callable"): imported first, here.
import tracemalloc  # noqa: F401
from pathlib import Path

import pytest

# Under pytest-xdist (`make test`: 3 workers on CI's 2 cores) each test process and the workers it starts compute on
# one thread: two processes of two threads each on two cores spend their time waiting for each other's threads.
# Set before torch is imported here; the workers started by the tests inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _threads in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ.setdefault(_threads, "1")

# Tests of both frameworks share this process. Importing TensorFlow and then torch or torchvision (which loads
# torch._dynamo and triton) segfaults (TF 2.20 with the torch 2.14.1 wheels; see NOTES.md); the other order is
# fine: import them before any test module can import TF.
import torch  # noqa: F401
import torchvision  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"

# Garbage an earlier test left in a reference cycle is never collected in a test process (issue 38): freeing
# TensorFlow's tf.data iterators from the garbage collector, inside a later test, can wait (GIL held, process idle)
# up to 60 s for their autotune thread, which cost 40-110 s of each full run's wall time (NOTES.md). What a test
# makes and drops within itself is still collected as usual.
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    gc.freeze()


# --- Hypothesis: every failure replayable (issue 38). A failure prints its example in full with the
# @reproduce_failure blob that replays it; locally, what a run finds is kept in .hypothesis/examples (git-ignored)
# and tried first by the next run; under CI (the CI variable set) the examples are derived from each test alone,
# the same on every run, so a CI failure reproduces exactly. The machine's speed fails no test: no deadline, no
# too-slow health check (a test's own @settings still wins where it names the same setting).
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402

settings.register_profile(
    "trainbench", print_blob=True, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
    database=None if os.environ.get("CI") else DirectoryBasedExampleDatabase(REPO / ".hypothesis" / "examples"))
settings.load_profile("trainbench")
# --- end of the Hypothesis block


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m trainbench ARGS`` as a user runs it; CUDA hidden so the CPU paths are tested everywhere."""
    full_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run([sys.executable, "-m", "trainbench", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_main(*args: str, cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``trainbench ARGS`` through the CLI's own ``main`` in this process (what ``run_cli`` checks, without a new
    interpreter's seconds of start-up): environment and working folder set for the call and restored after. For
    commands that start no worker; keep one ``run_cli`` case per command for the real process."""
    from contextlib import chdir, redirect_stderr, redirect_stdout
    from io import StringIO

    from trainbench.cli.main import main

    changes = {"CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    saved = {key: os.environ.get(key) for key in changes}
    out, err = StringIO(), StringIO()
    try:
        os.environ.update(changes)
        with chdir(cwd or REPO), redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return subprocess.CompletedProcess(["trainbench", *args], code, out.getvalue(), err.getvalue())


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, exactly one line on stderr that contains every fragment, and no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def linked_tools(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """``tmp_path/tools`` holding links to the named programs found on PATH: with stand-ins beside it, a PATH on
    which a script under test finds only what the test chose."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for name in names:
        found = shutil.which(name)
        if found and not (tools / name).exists():
            (tools / name).symlink_to(found)
    return tools


@pytest.fixture
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is absent")
    return SHARED_FIXTURES


# Seconds each file took in a measured `make test` (tests/file_seconds.py writes it from a --durations=0 log). Only
# the order of the run depends on it: xdist hands files out in collection order, so the longest go first and no
# worker starts a two-minute file while the others have finished (longest-first scheduling). A stale or missing
# entry costs time, never correctness.
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the files that took longest come first (the Makefile's ``--no-loadscope-reorder`` keeps this
    order: by default xdist hands out the files with the most tests first). Each file stays on one worker (``--dist
    loadfile``: a module fixture is made once), so what must share one process, such as the one-node Slurm, shares
    one file.
    (``--dist loadgroup`` with an xdist_group mark per file scheduled every test apart under pytest 9.2: xdist 3.8
    marks a group by editing the test's id, which pytest 9.2 no longer reads, pytest-xdist issue 1386.)"""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seconds: dict[str, float] = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}
    items.sort(key=lambda item: -seconds.get(item.path.name, 0.0))  # stable: a file's own order is kept
