"""The package's layers read one way: a module imports only its own layer or lower ones.

The order is the one the results model's docstring and the README's Layout table document. Imports inside functions
count too (a lazy import is still a dependency); a new sub-package must be given its place here before it can import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "source" / "trainbench"

# Bottom first. Each name is a sub-package or a top-level module of trainbench.
LAYERS = (
    "errors", "frameworks", "workloads", "results", "config", "telemetry", "render", "data", "analysis", "training",
    "engines", "bench", "profile", "campaign", "report", "cli", "demo", "__main__",
)
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def layer_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imported_layers(path: Path) -> list[tuple[int, str]]:
    """(line, layer) for every ``trainbench.<layer>`` a module imports, absolute or relative."""
    tree = ast.parse(path.read_text(), str(path))
    package_parts = path.relative_to(PACKAGE).parts[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [_absolute(node, package_parts)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "trainbench" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
            elif parts[0] == "trainbench" and isinstance(node, ast.ImportFrom):
                # ``from trainbench import x``: x is a layer, or a name the package's __init__ defines (no layer).
                found.extend((node.lineno, alias.name) for alias in node.names if _is_module(alias.name))
    return found


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _absolute(node: ast.ImportFrom, package_parts: tuple[str, ...]) -> str:
    if node.level == 0:
        return node.module or ""
    base = ("trainbench", *package_parts)[: len(package_parts) + 2 - node.level]
    return ".".join([*base, *([node.module] if node.module else [])])


def upward_imports(modules: list[Path]) -> list[str]:
    problems = []
    for path in modules:
        own = layer_of(path)
        if own in ("__init__",):
            continue
        for line, target in imported_layers(path):
            if target not in RANK or own not in RANK:
                unknown = target if target not in RANK else own
                problems.append(f"{path.relative_to(PACKAGE)}:{line}: layer {unknown!r} has no place in LAYERS")
            elif RANK[target] > RANK[own]:
                problems.append(f"{path.relative_to(PACKAGE)}:{line}: {own} imports the higher layer {target}")
    return problems


def test_no_module_imports_a_higher_layer() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    assert upward_imports(modules) == []


def test_the_scan_finds_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "trainbench"
    (fake / "results").mkdir(parents=True)
    (fake / "results" / "bad.py").write_text("from trainbench.cli import main\nfrom ..errors import UsageError\n")
    (fake / "results" / "lazy.py").write_text("def f():\n    from ..bench import sweep\n")
    (fake / "campaign").mkdir()
    (fake / "config.py").write_text("from trainbench import campaign, __version__\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    problems = upward_imports(sorted(fake.rglob("*.py")))
    assert problems == [
        "config.py:1: config imports the higher layer campaign",
        "results/bad.py:1: results imports the higher layer cli",
        "results/lazy.py:2: results imports the higher layer bench",
    ]


FRAMEWORKS = ("torch", "torchvision", "tensorflow", "tf_keras", "official", "transformers")


def framework_imports(modules: list[Path]) -> list[str]:
    """``path:line: module`` for every import of a deep-learning framework (lazy ones too) in ``modules``."""
    found = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {name}" for name in names
                      if name.split(".")[0] in FRAMEWORKS]
    return found


def test_data_imports_no_framework() -> None:
    """data/ converts, reads and checks records for both frameworks: their input pipelines live beside their
    engines (engines/torch/, engines/tf/), so converting a dataset never loads torch or TensorFlow."""
    modules = sorted((PACKAGE / "data").rglob("*.py"))
    assert len(modules) > 20
    assert framework_imports(modules) == []
    assert framework_imports(sorted((PACKAGE / "engines" / "torch").rglob("*.py")))  # the scan sees a real one


def name_literals(modules: list[Path], name: str) -> list[str]:
    """``path:line`` of every string constant that is exactly ``name`` (a docstring mentioning it is no literal)."""
    return [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in modules
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and node.value == name]


def test_no_module_but_its_own_names_the_first_workload() -> None:
    """The harness asks a workload's descriptor (its record kind, learnable set, pipelines), never its name: the
    name is written in its descriptor, its builders and the one default (workloads.DEFAULT) only."""
    own = {"workloads/resnet50.py", "engines/torch/workloads/resnet50.py", "engines/tf/workloads/resnet50.py"}
    found = name_literals(sorted(PACKAGE.rglob("*.py")), "resnet50")
    outside = [place for place in found if place.split(":")[0] not in own]
    assert [place.split(":")[0] for place in outside] == ["workloads/__init__.py"], outside  # workloads.DEFAULT
