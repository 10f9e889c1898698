"""The study commands under bad, odd and hostile input: every case of ``tests/study/`` keeps its promise.

Cases run in this process through the CLI's own ``main`` (the subprocess path is held by test_adversarial's rows
and each command's end-to-end test). A world folder per case table is built once; each case checks that files
there were not changed or removed (and, for a refusal, that nothing was written), that stderr has no traceback,
and that no Python warning escaped the command.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import tests.study
from tests.study import StudyCase
from trainbench.cli.main import main

TABLES: dict[str, ModuleType] = {
    info.name: importlib.import_module(f"tests.study.{info.name}")
    for info in pkgutil.iter_modules(tests.study.__path__)
}
CASES = [pytest.param(table, case, id=f"{table}:{case.name}", marks=[pytest.mark.slow] if case.slow else [])
         for table, module in sorted(TABLES.items()) for case in module.CASES]


def _snapshot(world: Path) -> dict[str, str]:
    """Every file under ``world``: its content's digest (a symlink: its target)."""
    found: dict[str, str] = {}
    for root, dirs, files in os.walk(world):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            path = Path(root, name)
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            else:
                try:
                    found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as error:  # unreadable on purpose: its mode stands for it
                    found[str(path)] = f"{type(error).__name__} {path.stat().st_mode:o}"
    return found


@pytest.fixture(scope="session")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made: dict[str, Path] = {}
    for table, module in TABLES.items():
        world = tmp_path_factory.mktemp(f"study_{table}")
        module.build(world)
        made[table] = world
    return made


def _filled(text: str, world: Path) -> str:
    return text.replace("{w}", str(world))


def _run(case: StudyCase, world: Path, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str, list[str]]:
    for key, value in case.env.items():
        monkeypatch.setenv(key, _filled(value, world))
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = main([_filled(word, world) for word in case.argv])
        except SystemExit as leaving:  # argparse's --help
            code = leaving.code if isinstance(leaving.code, int) else 2
    out = capsys.readouterr()
    return code, out.out, out.err, [f"{w.category.__name__}: {w.message}" for w in caught]


@pytest.mark.parametrize(("table", "case"), CASES)
def test_the_case_keeps_its_promise(table: str, case: StudyCase, worlds: dict[str, Path],
                                    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    world = worlds[table]
    before = _snapshot(world)
    code, out, err, caught = _run(case, world, capsys, monkeypatch)
    after = _snapshot(world)
    assert "Traceback" not in err, err
    assert not caught, caught
    assert code == case.exit, (code, out, err)
    named = [_filled(fragment, world) for fragment in case.named]
    if case.exit == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trainbench: "), err
        assert all(fragment in lines[0] for fragment in named), (named, lines[0])
    else:
        assert all(fragment in out + err for fragment in named), (named, out, err)
    assert not any(_filled(fragment, world) in out + err for fragment in case.absent), (case.absent, out, err)
    changed = [path for path, digest in before.items() if after.get(path) != digest]
    assert not changed, f"changed or removed: {changed}"
    if not case.writes:
        assert sorted(after) == sorted(before), f"written: {sorted(set(after) - set(before))}"


def test_every_table_names_its_cases_once() -> None:
    for table, module in TABLES.items():
        names = [case.name for case in module.CASES]
        assert len(names) == len(set(names)), table
        assert all(case.kind for case in module.CASES), table
