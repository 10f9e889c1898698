"""The results store: new folders only, summaries always complete, rows appended as they come."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from trainbench.bench.throughput_run import JSON_ONLY_FIELDS, RESULT_FIELDS, ThroughputRun
from trainbench.errors import UsageError
from trainbench.results.files import create_fresh_dir, create_run_dir
from trainbench.results.records import FORMAT, BatchResult


def test_run_folders_are_never_reused(tmp_path: Path) -> None:
    first = create_run_dir(tmp_path, "torch_fp32_cpu")
    (first / "summary.json").write_text("precious")
    others = {create_run_dir(tmp_path, "torch_fp32_cpu") for _ in range(3)}
    assert first not in others and len(others) == 3
    assert (first / "summary.json").read_text() == "precious"


def test_a_root_that_cannot_hold_run_folders_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("kept")
    with pytest.raises(UsageError, match=r"notes\.txt: not a folder"):
        create_run_dir(a_file, "torch_fp32_cpu")
    with pytest.raises(UsageError, match=r"notes\.txt/runs: cannot make a run folder in it: Not a directory"):
        create_run_dir(a_file / "runs", "torch_fp32_cpu")
    assert a_file.read_text() == "kept"


def test_a_name_taken_by_a_file_is_skipped_not_reused(tmp_path: Path) -> None:
    (tmp_path / "profiled_data_ncu").write_text("kept")
    assert create_fresh_dir(tmp_path, "profiled_data_ncu") == tmp_path / "profiled_data_ncu-1"
    assert (tmp_path / "profiled_data_ncu").read_text() == "kept"


def test_summary_is_rewritten_complete_after_every_batch_size(tmp_path: Path) -> None:
    run = ThroughputRun(tmp_path, {"framework": "torch", "precision": "fp32", "image_size": 32, "data": "synthetic"})
    assert json.loads((tmp_path / "summary.json").read_text())["results"] == []
    ok = {"batch_size": 2, "status": "ok", "samples_per_sec": 10.0, "timed_steps": 2, "warmup_steps": 1}
    run.add(BatchResult.from_row(ok), warmup_s=[0.5], step_s=[0.1, 0.3])
    run.add(BatchResult.from_row({"batch_size": 4096, "status": "oom", "error": "RuntimeError: can't allocate memory"}))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["framework"] == "torch" and summary["format"] == FORMAT
    assert [r["status"] for r in summary["results"]] == ["ok", "oom"]
    assert set(summary["results"][1]) == set(RESULT_FIELDS + JSON_ONLY_FIELDS)
    with open(tmp_path / "summary.csv", newline="") as rows:
        table = list(csv.DictReader(rows))
    assert [row["batch_size"] for row in table] == ["2", "4096"]
    assert table[1]["error"].startswith("RuntimeError")
    with open(tmp_path / "steps.csv", newline="") as rows:
        steps = list(csv.DictReader(rows))
    assert [(s["phase"], float(s["seconds"])) for s in steps] == [("warmup", 0.5), ("timed", 0.1), ("timed", 0.3)]
    assert not list(tmp_path.glob(".*.tmp"))
