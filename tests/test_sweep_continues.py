"""A sweep measures every batch size it was given: a batch size that fails (out of memory, reported by its worker
or seen in the log of a worker that died) is recorded as such, and the next batch size still runs.

The sweep's own code runs as it does for a user (one child process per batch size, its result file, its log,
its exit status); only the worker it starts is a few lines of Python that behave as a real worker would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from trainbench.bench import sweep
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.config import BenchConfig, ModelConfig

# argv: CONFIG_JSON RESULT_JSON [TIMELINE_CSV], as the real worker (trainbench.bench.worker.main).
FAKE_WORKER = """
import json, sys
config_path, result_path = sys.argv[1:3]
batch = json.load(open(config_path))["batch_size"]
if batch == 32:  # dies without a result, as a process the CUDA allocator or the OOM killer ends
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
if batch == 16:  # catches the allocation failure and reports it, as the real worker does
    row = {"batch_size": batch, "status": "oom", "error": "CUDA out of memory. Tried to allocate 1.00 GiB"}
    payload = {"result": row, "warmup_s": [], "step_s": [], "versions": {"torch": "x"}, "rank": None}
else:
    row = {"batch_size": batch, "status": "ok", "samples_per_sec": 10.0 * batch, "window_s": 0.3,
           "timed_steps": 3, "warmup_steps": 1}
    payload = {"result": row, "warmup_s": [0.5], "step_s": [0.1, 0.1, 0.1], "versions": {"torch": "x"},
               "rank": None}
json.dump(payload, open(result_path, "w"))
sys.exit(0 if row["status"] == "ok" else 1)
"""


@pytest.fixture
def fake_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "worker_command", lambda config, module: [sys.executable, "-I", "-c", FAKE_WORKER])


def test_a_failing_batch_size_is_recorded_and_the_sweep_goes_on(tmp_path: Path, fake_worker: None) -> None:
    model = ModelConfig(framework="torch", precision="fp32", device="cpu")
    configs = [BenchConfig(model=model, batch_size=batch, warmup_steps=1, steps=3) for batch in (8, 16, 32, 64)]
    (tmp_path / "run").mkdir()
    run = ThroughputRun(tmp_path / "run", {"framework": "torch", "precision": "fp32", "data": "synthetic"})
    said: list[str] = []
    versions = sweep.run_sweep(configs, run, said.append)
    assert [(row["batch_size"], row["status"]) for row in run.rows()] == [
        (8, "ok"), (16, "oom"), (32, "oom"), (64, "ok")]
    rows = {row["batch_size"]: row for row in run.rows()}
    assert rows[64]["samples_per_sec"] == 640.0
    assert "exited with status 1" in rows[32]["error"] and "out of memory" in rows[32]["error"]
    assert versions == {"torch": "x"}
    assert any(line.startswith("batch size 64: 640.00 images/s") for line in said)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [result["batch_size"] for result in summary["results"]] == [8, 16, 32, 64]
    timed = pd.read_csv(tmp_path / "run" / "steps.csv").query("phase == 'timed'")
    assert sorted(set(timed["batch_size"])) == [8, 64]
