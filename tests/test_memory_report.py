"""Peak memory and how the step ran, where results are shown: the console table, memory.png beside throughput.png, the
report's tables, figures and memory breakdown, the ranking (and ranking.csv), a campaign's section, and the diverged
status shown as a failure. Run folders are written by the suite's own store with stand-in values; no training."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_report_html import Page, measured, page_of, workloads_campaign
from tests.test_report_ranking import section_text
from trainbench.bench import sweep
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.config import BenchConfig, ModelConfig, to_dict
from trainbench.render.console import format_table
from trainbench.render.plot import memory_figure, plot_memory
from trainbench.render.readable import header, shown, size_text, size_unit
from trainbench.report.gather import make_report
from trainbench.results.layout import MEMORY_PLOT, THROUGHPUT_PLOT
from trainbench.results.records import BatchResult, Status
from trainbench.results.store import read_summary

GIB, MIB = 2**30, 2**20
PARAMETERS = 100 * MIB
KIND = "torch.cuda.max_memory_allocated"


def memory(batch: int, optimizer: str = "sgd") -> dict[str, Any]:
    """What a worker records of the step and its memory at one batch size: the parts grow with the batch's
    activations, the peak holds them and 200 MiB more."""
    activations = batch * 50 * MIB
    state = PARAMETERS * (2 if optimizer.startswith("adam") else 1)
    return {"matmul_precision": "highest", "optimizer": f"{optimizer} (torch, foreach)", "image_layout": "NCHW",
            "peak_memory_bytes": 3 * PARAMETERS + state - PARAMETERS + activations + 200 * MIB,
            "peak_memory_kind": KIND, "memory_parameters_bytes": PARAMETERS, "memory_gradients_bytes": PARAMETERS,
            "memory_optimizer_bytes": state, "memory_activations_bytes": activations, "optimizer_state_bytes": state,
            "memory_note": None}


def run(folder: Path, batches: tuple[int, ...] = (8, 16), failure: Status = Status.OOM, step: bool = True,
        matmul: str = "highest", framework: str = "torch") -> Path:
    """A run folder as the sweep writes it, with (``step``) or without (a file from before format 5) the step's
    settings and memory; the batch size after the last ends in ``failure``."""
    folder.mkdir(parents=True)
    header: dict[str, Any] = {"framework": framework, "precision": "fp32", "image_size": 64, "data": "synthetic",
                              "device": "cuda", "warmup_steps": 1, "timed_steps": 4}
    if step:
        header |= {"model": {"framework": framework, "matmul_precision": matmul},
                   "optimizer": {"name": "sgd", "momentum": 0.9}}
    store = ThroughputRun(folder, header)
    for batch in batches:
        values = measured(batch) | (memory(batch) | {"matmul_precision": matmul} if step else {})
        store.add(BatchResult(batch, Status.OK, None, values))
    store.add(BatchResult.failed(2 * batches[-1], failure, "loss is nan at timed step 2" if failure is Status.DIVERGED
                                 else "CUDA out of memory"))
    return folder


# --- units -----------------------------------------------------------------------------------------------------


def test_sizes_read_in_the_binary_unit_they_hold_one_of() -> None:
    assert [size_text(value) for value in (96, 2048, 812.4 * MIB, 1.5339 * GIB, 3 * 2**40)] == \
        ["96 B", "2 KiB", "812.4 MiB", "1.534 GiB", "3 TiB"]
    assert size_unit(GIB - 1) == ("MiB", 1 / MIB) and size_unit(GIB) == ("GiB", 1 / GIB)
    assert (header("peak_memory_bytes"), header("memory_activations_bytes")) == ("peak memory", "activation memory")
    assert shown("peak_memory_bytes", 3 * GIB) == "3 GiB" and shown("samples_per_sec", 3.0) == 3.0
    assert shown("peak_memory_bytes", float("nan")) != shown("peak_memory_bytes", float("nan"))  # NaN kept as is


def test_the_console_table_shows_the_peak_in_mib_and_the_step_as_recorded() -> None:
    rows = [{"batch_size": 8, "status": "ok", **measured(8), **memory(8)},
            {"batch_size": 16, "status": "diverged", "error": "loss is nan at timed step 2"}]
    lines = format_table(rows, "image").splitlines()
    head = lines[0]
    assert "peak memory MiB" in head and "matmul" in head and "optimizer" in head
    assert lines[1].endswith(f"{memory(8)['peak_memory_bytes'] / MIB:.2f}")
    assert "sgd (torch, foreach)" in lines[1] and lines[2].split()[:2] == ["16", "diverged"]
    assert "batch 16 diverged: loss is nan at timed step 2" in lines


# --- memory.png ---------------------------------------------------------------------------------------------------


def rows_of(folder: Path) -> list[dict[str, Any]]:
    return [result.to_row() for result in read_summary(folder / "summary.json").results]


def test_the_memory_figure_draws_the_peak_in_its_unit_and_marks_the_failures(tmp_path: Path) -> None:
    rows = rows_of(run(tmp_path / "r", (8, 16, 32)))
    figure = memory_figure({"torch": (rows, "peak_memory_bytes")}, "ResNet-50")
    assert figure is not None
    axes = figure.axes[0]
    assert axes.get_ylabel() == "peak memory (GiB)" and KIND in axes.get_title()
    drawn: Any = axes.lines[0].get_ydata()
    assert list(drawn) == pytest.approx([memory(b)["peak_memory_bytes"] / GIB for b in (8, 16, 32)])
    assert any(text.get_text() == "oom" for text in axes.texts)  # where the memory ran out
    assert plot_memory({"torch": rows}, tmp_path / "m.png", "ResNet-50") and (tmp_path / "m.png").stat().st_size
    flat = [{"batch_size": b, "status": "ok", "peak_memory_bytes": 779 * MIB} for b in (2, 4)]  # a CPU's resident set
    flat_figure = memory_figure({"cpu": (flat, "peak_memory_bytes")}, "x")
    assert flat_figure is not None and flat_figure.axes[0].get_ylim()[1] >= 1.05 * 779  # not on the top edge
    old = rows_of(run(tmp_path / "old", step=False))
    assert not plot_memory({"torch": old}, tmp_path / "none.png", "x") and not (tmp_path / "none.png").exists()


def test_a_sweep_writes_memory_png_beside_throughput_png_and_its_header_records_the_optimizer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stand_in_workers(configs: list[BenchConfig], store: ThroughputRun, *_: Any) -> dict[str, Any]:
        for config in configs:
            store.add(BatchResult(config.batch_size, Status.OK, None, measured(config.batch_size)
                                  | memory(config.batch_size)))
        return {}

    monkeypatch.setattr(sweep, "run_sweep", stand_in_workers)
    configs = [BenchConfig(model=ModelConfig(device="cpu", image_size=64, matmul_precision="high"), batch_size=b)
               for b in (1, 2)]
    store = sweep.measure_throughput(configs, tmp_path, lambda _: None)
    assert (store.path / THROUGHPUT_PLOT).is_file() and (store.path / MEMORY_PLOT).is_file()
    summary = read_summary(store.path / "summary.json")
    assert summary.header["optimizer"] == to_dict(configs[0].optimizer)
    assert summary.header["model"]["matmul_precision"] == "high"


# --- the report -----------------------------------------------------------------------------------------------


def test_the_report_shows_the_peak_memory_its_figure_and_the_breakdown_at_the_largest_batch(tmp_path: Path) -> None:
    a = run(tmp_path / "runs" / "a", (8, 16, 32))
    run(tmp_path / "runs" / "old", (8,), step=False)
    page, text = page_of([tmp_path / "runs"], tmp_path)
    assert len(page.sections["throughput"]["images"]) == 2  # the rate's figure and the memory's
    assert 'alt="peak memory against batch size (64 px)"' in text
    table = page.table("throughput", "samples_per_sec")
    assert [row["peak memory"] for row in table] == [size_text(memory(b)["peak_memory_bytes"]) for b in (8, 16, 32)] \
        + [""]
    assert "activation memory" not in table[0]  # the breakdown has its own table
    [breakdown] = page.tables("throughput", "memory_activations_bytes")
    [row] = breakdown  # the old run records no memory: no row
    largest = memory(32)
    assert row["batch size"] == "32" and row["run"].endswith("(a)")  # 64 ran out of memory: not "ran"
    assert (row["peak memory"], row["peak memory measured by"], row["activation memory"]) == \
        (size_text(largest["peak_memory_bytes"]), KIND, size_text(largest["memory_activations_bytes"]))
    assert row["rest of peak"] == "200 MiB"  # the peak less parameters, gradients, optimizer and activations
    words = section_text(text, "throughput")
    assert "Step: matmul precision highest; optimizer sgd (torch, foreach); image layout NCHW." in words
    assert "Step: matmul precision and optimizer not recorded (a run from before format 5): unknown, not taken as " \
        "highest or the reference optimizer." in words
    assert summary_of(a)[-1]["status"] == "oom"


def summary_of(folder: Path) -> list[dict[str, Any]]:
    return json.loads((folder / "summary.json").read_text())["results"]


def test_a_diverged_batch_size_reads_and_renders_like_an_oom(tmp_path: Path) -> None:
    run(tmp_path / "runs" / "a", (8, 16), failure=Status.DIVERGED)
    page, _ = page_of([tmp_path / "runs"], tmp_path)
    failures = page.table("failures", "reason")
    assert [(row["batch_size"], row["status"], row["reason"]) for row in failures] == \
        [("32", "diverged", "loss is nan at timed step 2")]
    assert page.table("throughput", "samples_per_sec")[-1]["status"] == "diverged"
    assert read_summary(tmp_path / "runs" / "a" / "summary.json").results[-1].status is Status.DIVERGED


def test_the_ranking_holds_the_peak_memory_and_the_step_settings_that_pair_runs(tmp_path: Path) -> None:
    run(tmp_path / "runs" / "a", (8,))
    run(tmp_path / "runs" / "b", (8,), matmul="high")
    run(tmp_path / "runs" / "old", (8,), step=False)
    page_path, _, ranking = make_report([tmp_path / "runs"], tmp_path / "report.html")
    assert ranking is not None
    with open(ranking, newline="") as file:
        rows = {row["source"]: row for row in csv.DictReader(file)}
    assert rows["a"]["peak_memory_bytes"] == str(memory(8)["peak_memory_bytes"])  # bytes: a whole number
    assert rows["old"]["peak_memory_bytes"] == ""
    assert [(rows[name]["matmul_precision"], rows[name]["optimizer"]) for name in ("a", "b", "old")] == \
        [("highest", "sgd"), ("high", "sgd"), ("", "")]
    page = Page(page_path.read_text())
    ranked = {row["source"]: row for row in page.table("headline", "rank")}
    assert ranked["a"]["peak memory"] == size_text(memory(8)["peak_memory_bytes"])
    assert ranked["old"]["matmul precision"] == "not recorded"  # unknown, not "highest"
    pairs = [(row["matmul precision: A -> B"], row["A"], row["B"])
             for row in page.table("comparisons", "matmul precision: A -> B")]
    assert pairs == [("highest -> high", "a", "b")]
    uncompared = page.table("comparisons", "settings that differ")  # the old run's step is unknown: no pair
    assert [(row["which"], row["pairs"]) for row in uncompared] == [("matmul precision, optimizer", "2")]
    labels = re.findall(r"<h3>([^<]*)</h3>", page_path.read_text())
    assert "torch fp32 matmul high on cuda 64px synthetic data (b)" in labels  # not the default: in the label


def test_a_campaign_shows_its_median_peak_memory_and_draws_it(tmp_path: Path) -> None:
    campaign = workloads_campaign(tmp_path / "campaign")
    peaks = {"resnet50": GIB, "transformer": 2 * GIB, "bert": 3 * GIB}
    for path in campaign.glob("run_*/summary.json"):
        data = json.loads(path.read_text())
        data["results"][0] |= {"peak_memory_bytes": peaks[data["workload"]], "peak_memory_kind": KIND}
        path.write_text(json.dumps(data))
    page, text = page_of([campaign], tmp_path)
    tables = page.tables("campaigns", "parameters")  # in the matrix's order of workloads
    assert [rows[0]["peak memory"] for rows in tables] == ["1 GiB", "2 GiB", "3 GiB"]
    assert text.count('alt="campaign peak memory against batch size') == 3  # one per workload, beside its rate's
    assert len(page.sections["campaigns"]["images"]) == 6
