"""The campaign runner's own promises, fast (no worker: the measurement is replaced by a recorder): a resumed
campaign runs only what is missing, and the folder's lock makes a second writer wait."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from trainbench.campaign import runner
from trainbench.campaign.matrix import load_matrix
from trainbench.campaign.runner import PlannedRun, campaign_lock, run_campaign

MATRIX = "axes: {framework: [torch], batch_size: [2], image_size: [32], device: [cpu]}\nrepeats: 3\n"


class Killed(KeyboardInterrupt):
    """Stands for a kill in the middle of a run."""


@pytest.fixture
def matrix_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX)
    return path


def measuring(record: list[int], kill_at: int | None = None) -> Callable[..., int]:
    """A stand-in for runner._measure that records the run numbers it is given (and is killed at one)."""

    def measure(matrix: object, run: PlannedRun, path: Path, echo: object) -> int:
        record.append(run.number)
        if run.number == kill_at:
            raise Killed
        return 0
    return measure


def test_a_resumed_campaign_runs_only_what_was_missing(matrix_file: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder, first = tmp_path / "c", []
    monkeypatch.setattr(runner, "_measure", measuring(first, kill_at=1))
    with pytest.raises(Killed):
        run_campaign(load_matrix(matrix_file), folder, lambda line: None)
    assert first == [0, 1]
    second: list[int] = []
    monkeypatch.setattr(runner, "_measure", measuring(second))
    outcome = run_campaign(load_matrix(matrix_file), folder, lambda line: None)
    assert second == [1, 2]
    assert [run.number for run in outcome.skipped] == [0]
    assert [(run.number, code) for run, code in outcome.ran] == [(1, 0), (2, 0)]
    names = sorted(path.name for path in folder.iterdir() if path.name.startswith("run_"))
    assert len([n for n in names if n.endswith("_ret_0")]) == 3 and any(n.endswith("_abandoned-1") for n in names)
    third: list[int] = []
    monkeypatch.setattr(runner, "_measure", measuring(third))
    assert run_campaign(load_matrix(matrix_file), folder, lambda line: None).ran == [] and third == []


def test_a_second_writer_waits_for_the_folder_lock(matrix_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """While another process holds the lock, a finishing run neither makes, renames nor tabulates anything; once
    the lock is released it does all of it (what keeps concurrent tasks from losing rows of results.csv)."""
    folder, measured = tmp_path / "c", []
    matrix = load_matrix(matrix_file)
    monkeypatch.setattr(runner, "_measure", measuring(measured))
    runner.open_campaign(folder, matrix, None, runner.plan(matrix), False)
    before = sorted(path.name for path in folder.iterdir())
    worker = threading.Thread(target=run_campaign, args=(matrix, folder, lambda line: None), kwargs={"only": [0]})
    with campaign_lock(folder):
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive(), "the run went ahead while the lock was held"
        assert sorted(path.name for path in folder.iterdir()) == before and measured == []
    worker.join(timeout=30)
    assert not worker.is_alive() and measured == [0]
    assert (folder / "results.csv").is_file() and any(p.name.endswith("_ret_0") for p in folder.iterdir())
