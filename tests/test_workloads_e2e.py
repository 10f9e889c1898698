"""Every workload through the real command line: the example campaign over three workloads x both frameworks at
their tiny size on the CPU (half its pairs run: each workload once, each framework with a sequence workload), its
table and its report, each workload in its own unit; and each workload's real data, made by its converter from real
text and JPEG files, read by torch's pipeline in a throughput run. The one place the workloads run end to end
through the campaign's workers; every workload's runner in both frameworks is the engines' in-process tests'
(test_tf_workloads.py, test_torch_workloads.py), on the code path a worker takes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import run_cli
from trainbench import workloads

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "configs" / "workloads_campaign.yaml"
UNITS = {"resnet50": "images/s", "transformer": "sentence pairs/s", "bert": "sequences/s"}
# The pairs run: every workload once, a sequence workload (tokens/s) in each framework. The other three are the
# same worker code at seconds of start-up each (a TF worker: TensorFlow's import and tracing).
RUN_PAIRS = {("resnet50", "torch"), ("transformer", "tf"), ("bert", "torch")}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workloads")
    whole = run_cli("campaign", "run", str(MATRIX), "--dry-run")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert whole.stdout.strip().splitlines()[-1] == "6 experiments x 1 repeats = 6 runs"  # the example: all six
    matrix = yaml.safe_load(MATRIX.read_text())
    matrix["exclude"] = [{"workload": workload, "framework": framework} for workload in UNITS
                         for framework in ("torch", "tf") if (workload, framework) not in RUN_PAIRS]
    halved = root / "workloads_campaign.yaml"
    halved.write_text(yaml.safe_dump(matrix))
    folder = root / "campaign"
    result = run_cli("campaign", "run", str(halved), "--output", str(folder), timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.slow
def test_each_workload_and_framework_has_samples_and_tokens_per_second(campaign: Path) -> None:
    table = pd.read_csv(campaign / "results.csv")
    assert set(zip(table["workload"], table["framework"], strict=True)) == RUN_PAIRS and len(table) == len(RUN_PAIRS)
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


# --- real data: each converter's output read by each framework's pipeline, through the command line ------------

CONVERTED = {"bert": "bert", "gpt2": "gpt2", "transformer": "translation", "retinanet": "coco"}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small corpus, parallel corpus and COCO set made from real text and real JPEG files, converted by the
    real converters at the tiny models' vocabulary (512) and lengths."""
    root = tmp_path_factory.mktemp("real_data")
    synth = [("data", "synth-text", "--output", str(root / "text"), "--documents", "40", "--pairs", "200"),
             ("data", "synth-coco", "--output", str(root / "coco"), "--images", "12", "--size", "160x120")]
    convert = {
        "bert": ("data", "text", str(root / "text" / "corpus"), "--workload", "bert", "--vocab-size", "512",
                 "--seq-len", "32", "--shards", "2"),
        "gpt2": ("data", "text", str(root / "text" / "corpus"), "--workload", "gpt2", "--vocab-size", "512",
                 "--seq-len", "32", "--shards", "2"),
        "transformer": ("data", "translate", str(root / "text" / "parallel" / "source.txt"),
                        str(root / "text" / "parallel" / "target.txt"), "--vocab-size", "512", "--max-length", "16",
                        "--shards", "2"),
        "retinanet": ("data", "coco", str(root / "coco" / "annotations" / "instances_train2017.json"),
                      str(root / "coco" / "train2017"), "--shards", "2")}
    for args in [*synth, *((*args, "--output", str(root / name)) for name, args in convert.items())]:
        result = run_cli(*args, timeout=600)
        assert result.returncode == 0, (args, result.stderr[-2000:])
    return {name: root / name for name in convert}


@pytest.mark.slow
# TF's pipelines of these records (text and COCO) are checked in-process in tests/test_tf_records.py, and TF's
# --data path through the command line and its worker in tests/test_pipelines_cli.py: here each converter's output
# runs in torch's (a TF worker costs seconds of start-up and tracing more, for no promise of its own).
@pytest.mark.parametrize(("workload", "framework"), [
    ("bert", "torch"), ("gpt2", "torch"), ("transformer", "torch"), ("retinanet", "torch")])
def test_throughput_on_converted_data_has_the_input_bound_verdict(converted: dict[str, Path], workload: str,
                                                                 framework: str, tmp_path: Path) -> None:
    result = run_cli("throughput", "--workload", workload, "--framework", framework, "--data",
                     str(converted[workload]), "--device", "cpu", "--size", "tiny", "--batch-sizes", "2",
                     "--warmup", "0", "--steps", "1", "--output", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads((Path(result.stdout.strip().splitlines()[-1]) / "summary.json").read_text())
    [entry] = summary["results"]
    assert entry["status"] == "ok", entry["error"]
    assert entry["samples_per_sec"] > 0 and entry["input_samples_per_sec"] > 0
    assert entry["input_bound"] is (entry["input_samples_per_sec"] < 1.1 * entry["samples_per_sec"])
    assert summary["data"] == str(converted[workload])
    settings = json.loads((converted[workload] / "manifest.json").read_text())["settings"]
    if workload == "retinanet":  # the data's classes, with the background
        assert summary["model"]["num_classes"] == settings["num_classes"] + 1
    else:  # the pipeline alone, in sequences and tokens, in the batch's log
        log = (Path(result.stdout.strip().splitlines()[-1]) / "logs" / "batch_2.log").read_text()
        assert "tokens/s" in log.split("input pipeline alone")[1].splitlines()[0]
