"""What the harness knows of each framework (``trainbench.frameworks``: plain data, read without importing the
framework), and the guard that keeps framework knowledge there: no module outside ``trainbench.engines`` compares a
framework's name to a literal.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from trainbench.bench.launch import under_launcher, worker_command
from trainbench.config import FRAMEWORKS, BenchConfig, LaunchConfig, ModelConfig
from trainbench.engines.launchers import TORCHRUN, process_place
from trainbench.errors import UsageError
from trainbench.frameworks import TENSORFLOW, TORCH, capabilities_of
from trainbench.profile import markers

SOURCE = Path(__file__).resolve().parents[1] / "source"
PACKAGE = SOURCE / "trainbench"

# --- the records -------------------------------------------------------------------------------------------------


def test_every_framework_has_its_record_and_an_unknown_one_is_a_usage_error() -> None:
    assert {capabilities_of(name).framework for name in FRAMEWORKS} == set(FRAMEWORKS)
    with pytest.raises(UsageError, match="unknown framework 'mxnet': choose one of tf, torch"):
        capabilities_of("mxnet")


def test_the_records_are_read_without_importing_a_framework() -> None:
    """The sweep, the launcher, the profiler session and the input benchmark's command ask the records in
    processes that must not pay for (or mix) TensorFlow and torch."""
    code = ("import sys\n"
            "import trainbench.bench.launch, trainbench.bench.input_bench, trainbench.cli.train_cmd\n"
            "import trainbench.profile.session, trainbench.profile.markers\n"
            "from trainbench.frameworks import capabilities_of\n"
            "assert all(capabilities_of(name).loaders for name in ('tf', 'torch'))\n"
            "print(sorted(name for name in ('tensorflow', 'torch') if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def bench(framework: str, launch: LaunchConfig | None = None) -> BenchConfig:
    model = ModelConfig(framework=framework, precision="fp32", device="cpu")
    return BenchConfig(model=model, batch_size=8, launch=launch or LaunchConfig())


def test_torch_launches_several_processes_under_torchrun_and_tensorflow_plainly() -> None:
    several = LaunchConfig(2, 2, "node01:29500", "job7")
    command = worker_command(bench("torch", several), "trainbench.bench.worker")
    assert command[:3] == [sys.executable, "-m", TORCHRUN]
    assert "--rdzv-id=job7-batch8" in command  # each batch size its own rendezvous
    assert command[-2:] == ["--module", "trainbench.bench.worker"]
    assert under_launcher(bench("torch", LaunchConfig(torchrun=True)))  # --torchrun: even one process
    assert not under_launcher(bench("torch"))
    # TensorFlow: one process per node whatever the nodes; the user's srun starts the others.
    tf_nodes = bench("tf", LaunchConfig(1, 2, "node01:29500"))
    assert worker_command(tf_nodes, "trainbench.bench.worker") == [sys.executable, "-m", "trainbench.bench.worker"]
    assert not under_launcher(tf_nodes)


def test_the_records_are_plain_data() -> None:
    """Names and flags only, no functions: what a record names (its launcher) the engines layer resolves, so the
    record sits below every layer that asks it."""
    for record in (TENSORFLOW, TORCH):
        assert all(isinstance(value, str | bool | tuple | type(None)) for value in vars(record).values()), record
    assert TORCH.launcher == "torchrun" and TENSORFLOW.launcher is None


def test_who_drives_which_gpus() -> None:
    assert TENSORFLOW.drives_every_gpu  # MirroredStrategy: one process, every GPU it sees
    assert not TORCH.drives_every_gpu  # one process per GPU, its local rank's


def test_the_place_of_a_process_comes_from_the_launchers_environment() -> None:
    alone = process_place({})
    assert (alone.rank, alone.local_rank, alone.world_size, alone.ranked) == (0, 0, 1, False)
    third = process_place({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"})
    assert (third.rank, third.local_rank, third.world_size, third.ranked) == (5, 1, 8, True)


def test_markers_follow_the_api_the_engine_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setitem(markers._MARKERS, "cuda_runtime", lambda: made.append("ctypes") or "ctypes markers")
    monkeypatch.setitem(markers._MARKERS, "torch.cuda", lambda: made.append("torch") or "torch markers")
    assert markers.markers_for(TENSORFLOW.markers, "cuda") == "ctypes markers"
    assert markers.markers_for(TORCH.markers, "cuda") == "torch markers"
    assert isinstance(markers.markers_for(TORCH.markers, "cpu"), markers.NoMarkers)  # no CUDA profiler to tell
    assert made == ["ctypes", "torch"]


# --- the guard: framework names are compared inside trainbench.engines only ---------------------------------------

# Comparisons left outside the engines, as ``ast.unparse`` writes them. Add nothing here that the framework's
# record (trainbench.frameworks) could answer instead: the settings' rules in config.py ask it.
SETTINGS_RULES = {
    # Not a framework at all: the tf *profiler*'s output folder, read after the run (profile/framework.py).
    ("profile/framework.py", "self.name == 'tf'"),
}


def _names_a_framework(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in FRAMEWORKS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_framework(element) for element in node.elts)
    return False


def framework_comparisons(path: Path) -> list[tuple[int, str]]:
    """Every comparison in ``path`` with a framework's name as a literal (alone or in a tuple, list or set)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [(node.lineno, ast.unparse(node)) for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(_names_a_framework(side) for side in (node.left, *node.comparators))]


def test_the_guard_finds_a_comparison_written_any_way(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('if config.framework == "tf": pass\nok = tool in ("ncu", "torch")\nname = "tf"\n'
                      'if "torch" != framework: pass\n')
    assert framework_comparisons(module) == [(1, "config.framework == 'tf'"), (2, "tool in ('ncu', 'torch')"),
                                             (4, "'torch' != framework")]


def test_no_module_outside_the_engines_compares_a_framework_name() -> None:
    found = {(path.relative_to(PACKAGE).as_posix(), line, text)
             for path in sorted(PACKAGE.rglob("*.py")) if PACKAGE / "engines" not in path.parents
             for line, text in framework_comparisons(path)}
    unexpected = sorted(f"source/trainbench/{path}:{line}: {text}" for path, line, text in found
                        if (path, text) not in SETTINGS_RULES)
    assert not unexpected, "ask the engine's capability record (trainbench.frameworks) instead:\n" + \
        "\n".join(unexpected)
    stale = SETTINGS_RULES - {(path, text) for path, _, text in found}
    assert not stale, f"no longer in the code, drop from SETTINGS_RULES: {sorted(stale)}"
