"""Derived figures checked where a run is read: MFU in [0, 1] and only with a peak, tokens/s and achieved FLOP/s as
the rate gives them; the worker's own figures pass, a file that disagrees with itself is invalid and named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_main
from tests.test_compare import write_windows_run
from trainbench.bench.work import work_values
from trainbench.results.peaks import Peak
from trainbench.results.records import RunSummary, Status

BERT = {"workload": "bert", "params": {"seq_len": 32}, "framework": "torch", "precision": "fp32", "data": "synthetic"}
RESNET = {"workload": "resnet50", "params": {"image_size": 64, "num_classes": 10}, "framework": "torch"}
RATE, FLOPS = 250.0, 4.0e6


def read(header: dict[str, Any], **values: Any) -> tuple[Status, str | None]:
    row = {"batch_size": 8, "status": "ok", "samples_per_sec": RATE, **values}
    (result,) = RunSummary.from_json({"format": 4, **header, "results": [row]}).results
    return result.status, result.error


def test_the_workers_own_figures_are_read_as_measured() -> None:
    on_a_gpu = work_values(RATE, 32.0, FLOPS, Peak(989e12, "H100 SXM, bf16"))
    on_the_cpu = work_values(RATE, 32.0, FLOPS, Peak(None, "the CPU"))
    assert read(BERT, **on_a_gpu) == (Status.OK, None) and 0 < on_a_gpu["mfu"] < 1
    recomputed = work_values(RATE, 32.0, FLOPS, Peak(989e12, "H100 SXM, bf16"), 1.3 * FLOPS)
    assert read(BERT, **recomputed, hardware_flops_per_sample=1.3 * FLOPS) == (Status.OK, None)
    assert read(BERT, **on_the_cpu) == (Status.OK, None)
    assert read(RESNET, **work_values(RATE, None, FLOPS, Peak(None, "the CPU"))) == (Status.OK, None)
    assert read({**BERT, "params": {}}, tokens_per_sec=123.0) == (Status.OK, None)  # no length recorded: no check


@pytest.mark.parametrize(("header", "values", "named"), [
    (BERT, {"mfu": 3.5, "peak_flops": 1e9, "achieved_flops": 3.5e9}, "results[0].mfu is 3.5: above 1"),
    (BERT, {"mfu": 0.2, "peak_flops": None}, "results[0].mfu is 0.2 with no peak_flops"),
    (BERT, {"mfu": 0.2, "peak_flops": 1e12, "achieved_flops": 1e9}, "not achieved_flops / peak_flops (0.001)"),
    (BERT, {"achieved_flops": 1e6, "train_flops_per_sample": FLOPS}, "not samples_per_sec x train_flops_per_sample"),
    (BERT, {"tokens_per_sec": 31 * RATE * 32}, "not samples_per_sec x 32 tokens per sample (8000)"),
    (RESNET, {"tokens_per_sec": 100.0}, "on a workload without tokens (resnet50)"),
    (BERT, {"hfu": 1.5, "peak_flops": 1e12}, "results[0].hfu is 1.5: above 1"),
    ({**BERT, "sample_unit": "image"}, {}, "results[0]: the file's sample_unit is 'image', but bert counts sequences"),
    (BERT, {"hfu": 0.2, "peak_flops": None}, "results[0].hfu is 0.2 with no peak_flops"),
    (BERT, {"hfu": 0.2, "peak_flops": 1e12, "hardware_flops_per_sample": 1e6},
     "not samples_per_sec x hardware_flops_per_sample / peak_flops"),
])
def test_a_figure_that_does_not_follow_from_the_rate_is_invalid(header: dict[str, Any], values: dict[str, Any],
                                                                 named: str) -> None:
    status, error = read(header, **values)
    assert status is Status.INVALID and error is not None and named in error, error


def test_compare_refuses_a_run_whose_mfu_is_above_the_peak_in_one_line(tmp_path: Path) -> None:
    good = write_windows_run(tmp_path / "good", {8: [100.0, 101.0, 99.0]}, BERT)
    bad = write_windows_run(tmp_path / "bad", {8: [100.0, 101.0, 99.0]}, BERT)
    summary = bad / "summary.json"
    data = json.loads(summary.read_text())
    data["results"][0] |= {"mfu": 3.5, "peak_flops": 1.0, "achieved_flops": 3.5}  # an MFU no GPU reaches
    summary.write_text(json.dumps(data))
    done = run_main("compare", str(good), str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{summary}: results[0].mfu is 3.5: above 1" in done.stderr
