"""Every workload through the real command line: a campaign over three workloads x both frameworks at their tiny
size on the CPU, its table and its report, each workload in its own unit. The one place the new workloads run end
to end (workers, both frameworks); the engines' own tests build each workload in-process."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import run_cli
from trainbench import workloads

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "configs" / "workloads_campaign.yaml"
UNITS = {"resnet50": "images/s", "transformer": "sentence pairs/s", "bert": "sequences/s"}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("workloads") / "campaign"
    result = run_cli("campaign", "run", str(MATRIX), "--output", str(folder), timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.slow
def test_each_workload_and_framework_has_samples_and_tokens_per_second(campaign: Path) -> None:
    table = pd.read_csv(campaign / "results.csv")
    assert sorted(zip(table["workload"], table["framework"], strict=True)) == sorted(
        (workload, framework) for workload in UNITS for framework in ("torch", "tf"))
    assert set(table["status"]) == {"ok"} and (table["samples_per_sec"] > 0).all()
    for _, row in table.iterrows():
        spec = workloads.get(row["workload"])
        tokens = spec.tokens_per_sample({name: spec.default(name, "tiny") for name in spec.params})
        if tokens is None:  # images have no tokens: the column is empty, not zero
            assert math.isnan(row["tokens_per_sec"]), row.to_dict()
        else:  # tokens/s is samples/s times the tokens each sample holds (a sentence pair: source and target)
            assert row["tokens_per_sec"] == pytest.approx(row["samples_per_sec"] * tokens, rel=1e-6)
        assert row["train_flops_per_sample"] > 0 and row["parameters"] > 0
        assert math.isnan(row["mfu"])  # the CPU has no peak in the table: MFU is left empty


@pytest.mark.slow
def test_the_report_shows_each_workload_in_its_own_unit(campaign: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run_cli("report", str(campaign), "--output", str(page))
    assert result.returncode == 0, result.stderr[-3000:]
    html = page.read_text()
    for name, unit in UNITS.items():
        assert workloads.get(name).title in html and unit in html, (name, unit)
    assert "tokens/s" in html
