"""``trainbench report``: one self-contained HTML page whose tables hold the results' own numbers.

Run folders are made by the suite's own writers (the stores, the statistics, the campaign and variability layouts)
or by real CLI runs at tiny sizes (slow); the page is read back with an HTML parser, table by table, and every
number is checked against what the results files say.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from tests.test_profile_standins import TINY, standin_env
from tests.test_telemetry_plot import _timeline
from trainbench import workloads
from trainbench.analysis.variability import across, load_runs, per_gpu
from trainbench.bench.compare import compare_runs
from trainbench.bench.stats import summarize_windows
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.timing import Window
from trainbench.campaign.table import campaign_summary, campaign_table
from trainbench.cli.main import main
from trainbench.profile.run import ProfileRun
from trainbench.render import readable
from trainbench.render.page import cell, cell_text
from trainbench.report.found import ReportData
from trainbench.report.gather import gather, write_report
from trainbench.report.html import SECTIONS, render
from trainbench.results.files import write_csv_atomic, write_json_atomic
from trainbench.results.layout import batch_file
from trainbench.results.records import BatchResult, Status
from trainbench.results.significance import compare_results
from trainbench.telemetry.schema import TELEMETRY_DIR, TELEMETRY_FIELDS, VARIABILITY_FILE

SECTION_IDS = tuple(make(ReportData(["x"])).key for make in SECTIONS)
RNG = random.Random(16)


# --- reading the page back ------------------------------------------------------------------------------------


class Page(HTMLParser):
    """The page as data: per section id, its tables (header + rows of cell texts), absent notes and images."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, dict[str, Any]] = {}
        self.missing: dict[str, str] = {}  # the closing line's sections with nothing to show: id -> "Title (why)"
        self.nav: list[str] = []  # the navigation's links
        self.current: dict[str, Any] | None = None
        self.row: list[str] | None = None
        self.text: list[str] | None = None
        self.absent = False
        self.in_nav = False
        self.missing_key: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "nav":
            self.in_nav = True
        elif tag == "a" and self.in_nav:
            self.nav.append(str(attributes["href"]).removeprefix("#"))
        elif tag == "span" and self.current is None and attributes.get("id"):
            self.missing_key, self.text = str(attributes["id"]), []
        if tag == "section":
            self.current = self.sections.setdefault(str(attributes["id"]), {"tables": [], "absent": [], "images": []})
        elif self.current is None:
            return
        elif tag == "table":
            self.current["tables"].append([])
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th", "h3") or (tag == "p" and attributes.get("class") == "absent"):
            self.text, self.absent = [], tag == "p"
        elif tag == "img":
            self.current["images"].append(attributes["src"])

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self.in_nav = False
        elif tag == "span" and self.missing_key is not None:
            self.missing[self.missing_key] = "".join(self.text or [])
            self.missing_key, self.text = None, None
            return
        if self.current is None or (self.text is None and tag not in ("tr", "section")):
            return
        if tag in ("td", "th") and self.row is not None:
            self.row.append("".join(self.text or []))
            self.text = None
        elif tag == "tr" and self.row is not None:
            self.current["tables"][-1].append(self.row)
            self.row = None
        elif tag == "p" and self.absent:
            self.current["absent"].append("".join(self.text or []))
            self.text, self.absent = None, False
        elif tag == "h3":
            self.text = None
        elif tag == "section":
            self.current = None

    def why(self, section: str) -> str:
        """Why a section has nothing to show, as the closing line gives it (the title's bracket)."""
        return self.missing[section].split(" (", 1)[1].removesuffix(")")

    def tables(self, section: str, column: str) -> list[list[dict[str, str]]]:
        """The section's tables that have ``column``, each as rows keyed by the header."""
        found = []
        for rows in self.sections[section]["tables"]:
            if rows and (column in rows[0] or readable.header(column) in rows[0]):  # the page's header, or the field's
                found.append([dict(zip(rows[0], row, strict=True)) for row in rows[1:]])
        return found

    def table(self, section: str, column: str, index: int = 0) -> list[dict[str, str]]:
        return self.tables(section, column)[index]


def page_of(folders: list[Path], tmp_path: Path) -> tuple[Page, str]:
    path = write_report(folders, tmp_path / "report.html")
    text = path.read_text(encoding="utf-8")
    return Page(text), text


def assert_shows(text: str, value: Any) -> None:
    """The cell's text is the value: a number to the page's 4 significant digits, read back as a number (not
    through the page's own formatting), yes/no, the text itself, or empty for nothing."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        assert text == ""
    elif isinstance(value, bool):
        assert text == ("yes" if value else "no")
    elif isinstance(value, int | float):
        assert float(text) == pytest.approx(value, rel=6e-4, abs=1e-12)
    else:
        assert text == str(value)


def assert_rows(shown: list[dict[str, str]], expected: list[dict[str, Any]], columns: list[str]) -> None:
    """Each shown row holds the expected record's values in the named columns."""
    assert len(shown) == len(expected)
    for row, record in zip(shown, expected, strict=True):
        for column in columns:
            value = record.get(column)
            if column not in row:  # headed in words, in the page's unit (ms for a step's seconds)
                column, value = readable.header(column), readable.shown(column, value)
            try:
                assert_shows(row[column], value.item() if hasattr(value, "item") else value)
            except (AssertionError, ValueError) as failure:
                raise AssertionError(f"{column}: shown {row[column]!r}, recorded {value!r}") from failure


def assert_every_section_present_or_explained(page: Page) -> None:
    """Each section is shown (and linked from the navigation) or named with why in the closing line, in order."""
    assert page.nav == list(page.sections)
    assert not set(page.sections) & set(page.missing)
    assert [key for key in SECTION_IDS if key in page.sections or key in page.missing] == list(SECTION_IDS)
    assert list(page.sections) == [key for key in SECTION_IDS if key in page.sections]
    assert list(page.missing) == [key for key in SECTION_IDS if key in page.missing]
    for key, section in page.sections.items():
        assert section["tables"] or section["images"] or section["absent"], key
    for key, why in page.missing.items():
        assert why.endswith(")") and page.why(key), key


# --- run folders made by the suite's writers ------------------------------------------------------------------


def measured(batch_size: int, windows: int = 3, steps: int = 4) -> dict[str, Any]:
    """A batch size's values as the sweep computes them (``summarize_windows``) from random step times."""
    made = []
    for _ in range(windows):
        step_s = tuple(RNG.uniform(0.05, 0.2) for _ in range(steps))
        made.append(Window((0.2,), step_s, sum(step_s) + RNG.uniform(0.0, 0.01)))
    return summarize_windows(batch_size, made)


def throughput_run(folder: Path, batch_sizes: tuple[int, ...] = (8, 16), data: str = "synthetic",
                   framework: str = "torch", extra: dict[str, Any] | None = None, image_size: int = 64,
                   windows: int = 3) -> Path:
    """A run folder as the sweep writes it: an ok result per batch size (on real data with the pipeline's own
    rate), then one that ran out of memory; env.json beside it."""
    folder.mkdir(parents=True)
    store = ThroughputRun(folder, {"framework": framework, "precision": "fp32", "image_size": image_size,
                                   "data": data, "device": "cpu", "warmup_steps": 1, "timed_steps": 4})
    for batch in batch_sizes:
        values = measured(batch, windows) | (extra or {})
        if data != "synthetic":
            values |= {"input_samples_per_sec": values["samples_per_sec"] * 1.05, "input_bound": True}
        store.add(BatchResult(batch, Status.OK, None, values), step_s=[0.1] * 12)
    store.add(BatchResult.failed(4096, Status.OOM, "CUDA out of memory <allocating 9 GiB>"))
    write_json_atomic(folder / "env.json", {
        "trainbench_version": "0.1.0", "command": ["trainbench", "throughput"], "hostname": "node7", "cpu_count": 2,
        "gpu": {"driver": "550.54.15", "cuda_driver": "12.4", "gpus": [
            {"index": 0, "name": "NVIDIA H100 80GB HBM3", "sm_clock_mhz": 345, "sm_clock_max_mhz": 1980,
             "power_limit_w": 700.0}]}, "framework": {"framework": framework, framework: "2.14.1"}})
    return folder


def summary_rows(folder: Path, name: str = "summary.json") -> list[dict[str, Any]]:
    return json.loads((folder / name).read_text())["results"]


# --- throughput runs ------------------------------------------------------------------------------------------


def test_a_throughput_run_s_tables_hold_its_numbers_and_absent_sections_say_why(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "runs" / "a", data="/data/imagenet/TFRecords")
    page, _ = page_of([tmp_path / "runs"], tmp_path)
    assert_every_section_present_or_explained(page)
    rows = summary_rows(run)
    columns = ["batch_size", "status", "samples_per_sec", "samples_per_sec_median", "samples_per_sec_min",
               "samples_per_sec_max", "windows", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
               "step_time_mad_s", "input_samples_per_sec", "input_bound"]
    assert_rows(page.table("throughput", "samples_per_sec"), rows, columns)
    assert page.table("throughput", "samples_per_sec")[-1]["status"] == "oom"
    assert len(page.sections["throughput"]["images"]) == 1  # the figure of every run
    failures = page.table("failures", "reason")
    assert [(row["batch_size"], row["status"], row["reason"]) for row in failures] == \
        [("4096", "oom", "CUDA out of memory <allocating 9 GiB>")]
    verdicts = page.table("input", "input_bound")
    assert [row["pipeline alone images/s"] for row in verdicts] == \
        [cell_text(row["input_samples_per_sec"]) for row in rows if row["status"] == "ok"]
    environment = {row[""]: row for row in page.table("environment", "")}
    assert environment["host"]["a"] == "node7" and environment["GPU driver"]["a"] == "550.54.15"
    gpus = page.table("environment", "sm_clock_max_mhz")
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["sm clock max mhz"] == "1980"
    for key, why in (("campaigns", "No campaign folder"), ("training", "No training run"),
                     ("telemetry", "No GPU telemetry")):
        assert key not in page.sections and page.why(key).startswith(why), key
    assert [row["batch size: A -> B"] for row in page.table("comparisons", "batch size: A -> B")] == ["8 -> 16"]


def test_runs_that_differ_in_framework_are_compared_with_compare_s_verdict(tmp_path: Path) -> None:
    first = throughput_run(tmp_path / "a")
    second = throughput_run(tmp_path / "b", framework="tf")
    page, _ = page_of([tmp_path], tmp_path)
    shown = page.table("comparisons", "framework: A -> B")
    expected = [compare_results(a, b) for a, b in zip(summary_rows(first)[:2], summary_rows(second)[:2], strict=True)]
    assert [(row["framework: A -> B"], row["where"], row["why"]) for row in shown] == \
        [("torch -> tf", f"batch {batch}", verdict.text) for batch, verdict in zip((8, 16), expected, strict=True)]
    assert [row["why"] for row in shown] == list(compare_runs(first, second)["verdict"])  # trainbench compare's
    assert "Fewer than two" not in json.dumps(page.sections["comparisons"])


def test_telemetry_numbers_and_the_timeline_figure(tmp_path: Path) -> None:
    energy = {"energy_j": 1234.5, "joules_per_sample": 0.75, "samples_per_joule": 1.3333, "mean_power_w": 310.25,
              "sm_clock_median_mhz": 1980.0, "temperature_max_c": 71.0, "throttle_power_fraction": 0.125,
              "telemetry_samples": 40}
    run = throughput_run(tmp_path / "run", batch_sizes=(32,), extra=energy)
    (run / TELEMETRY_DIR).mkdir()
    write_csv_atomic(batch_file(run / TELEMETRY_DIR, 32, ".csv"), TELEMETRY_FIELDS, _timeline(1000.0, 1, [(2, 5)]))
    page, _ = page_of([run], tmp_path)
    shown = page.table("telemetry", "joules_per_sample")
    assert_rows(shown, [row for row in summary_rows(run) if row["energy_j"] is not None], list(energy))
    assert len(page.sections["telemetry"]["images"]) == 1  # drawn from telemetry/ by render.telemetry_plot


# --- profiles -------------------------------------------------------------------------------------------------


def profile_folder(folder: Path, profiler: str, fields: tuple[str, ...], rows: dict[int, dict[str, Any]]) -> Path:
    """A profiled sweep's folder as ``trainbench profile`` writes it (ProfileRun)."""
    (folder / "logs").mkdir(parents=True)
    store = ProfileRun(folder, {"profiler": profiler, "model": {"framework": "torch", "precision": "bf16",
                                                                "device": "cuda", "image_size": 224}}, fields)
    for batch, values in rows.items():
        store.add(BatchResult(batch, Status.OK, None, {"profiler": profiler, "profiled_iterations": [5, 6], **values}))
    return folder


def test_coreutil_and_nsys_profiles_show_their_units_kernels_and_steps(tmp_path: Path) -> None:
    cores = {2: {"kernels": 812, "fma": 11.25, "fp16": 0.5, "tensor": 41.75, "sfu": 1.125},
             4: {"kernels": 812, "fma": 12.5, "fp16": 0.25, "tensor": 47.5, "sfu": 1.0}}
    ncu = profile_folder(tmp_path / "profiled_data_ncu", "ncu", ("kernels", "fma", "fp16", "tensor", "sfu"), cores)
    kernels = pd.DataFrame({"kernel": [f"sm90_xmma_gemm_{i}" for i in range(12)], "launches": range(12, 0, -1),
                            "weight_share": [30.0, 20.0, *[5.0] * 10], "fma": 1.5, "fp16": 0.0, "tensor": 60.0,
                            "sfu": 0.5})
    kernels.to_csv(batch_file(ncu, 2, ".kernels.csv"), index=False)
    timeline = {8: {"gpu_busy_fraction": 0.8765, "window_ms": 61.5, "steps": 3, "step_gpu_ms_median": 18.0,
                    "memcpy_ms": 0.25, "kernels": 2400, "top_kernel": "sm90_xmma_gemm"}}
    nsys = profile_folder(tmp_path / "profiled_data_nsys", "nsys", tuple(timeline[8]), timeline)
    write_json_atomic(batch_file(nsys, 8, ".timeline.json"), {
        "step_gpu_ms": [17.5, 18.0, 19.25], "top_kernels": [
            {"name": "sm90_xmma_gemm", "total_ns": 30_000_000, "instances": 300, "mean_ns": 100_000.0, "share": 0.6}]})
    page, _ = page_of([tmp_path], tmp_path)
    assert_rows(page.table("coreutil", "tensor"), summary_rows(ncu, "profile.json"),
                ["batch_size", "kernels", "fma", "fp16", "tensor", "sfu"])
    top = page.table("coreutil", "weight_share")
    assert_rows(top, kernels.head(10).to_dict("records"), list(kernels.columns))  # the first 10 of 12
    assert_rows(page.table("timeline", "gpu_busy_fraction"), summary_rows(nsys, "profile.json"),
                ["batch_size", *timeline[8]])
    steps = page.table("timeline", "median (ms)")
    assert steps == [{"batch size": "8", "steps": "3", "min (ms)": "17.5", "median (ms)": "18", "max (ms)": "19.25",
                      "each step (ms)": "17.5, 18, 19.25"}]
    assert page.table("timeline", "total_ms")[0] == {"name": "sm90_xmma_gemm", "total ms": "30",
                                                     "instances": "300", "mean us": "100", "share": "0.6"}


# --- campaigns, variability, models, training -----------------------------------------------------------------


def campaign_folder(folder: Path, rates: dict[tuple[int, int], list[float]]) -> Path:
    """A campaign over a gpus axis as the runner leaves it: campaign.json, one run folder per (gpus, batch size,
    repetition) with campaign_run.json and the run's summary (ThroughputRun)."""
    folder.mkdir()
    write_json_atomic(folder / "campaign.json", {"fingerprint": "test", "runs": 0})
    planned = 0
    for experiment, ((gpus, batch), repetitions) in enumerate(rates.items()):
        config = f"torch_fp32_gpus{gpus}_b{batch}"
        for repetition, rate in enumerate(repetitions):
            run = folder / f"run_{repetition}_{config}_ret_0"
            run.mkdir()
            write_json_atomic(run / "campaign_run.json", {
                "run": planned, "repetition": repetition, "experiment": experiment, "config": config,
                "values": {"framework": "torch", "precision": "fp32", "gpus": gpus, "batch_size": [batch]}})
            store = ThroughputRun(run, {"framework": "torch", "precision": "fp32"})
            store.add(BatchResult(batch, Status.OK, None, {"samples_per_sec": rate, "timed_steps": 4}))
            planned += 1
    return folder


def test_a_campaign_s_summary_and_scaling_efficiency_are_in_the_page(tmp_path: Path) -> None:
    campaign = campaign_folder(tmp_path / "campaign", {(1, 8): [100.0, 110.0, 90.0], (2, 8): [180.0, 170.0, 190.0]})
    page, _ = page_of([campaign], tmp_path)
    summary = campaign_summary(campaign_table(campaign))
    shown = page.table("campaigns", "scaling_efficiency")
    assert_rows(shown, summary.to_dict("records"), list(summary.columns))
    assert [row["scaling efficiency"] for row in shown] == ["1", cell_text(180.0 / (2 * 100.0))]
    assert len(page.sections["campaigns"]["images"]) == 1
    assert page.why("throughput")  # the campaign's runs are shown by their section only


UNITS = {"resnet50": "images/s", "transformer": "sentence pairs/s", "bert": "sequences/s"}


def workloads_campaign(folder: Path) -> Path:
    """A campaign over the workload axis as the runner leaves it, each run's summary naming its workload (the
    stores write the header) and what its samples cost."""
    folder.mkdir()
    write_json_atomic(folder / "campaign.json", {"fingerprint": "test", "runs": 0})
    for planned, name in enumerate(UNITS):
        spec = workloads.get(name)
        tokens = spec.tokens_per_sample({param: spec.default(param, "tiny") for param in spec.params})
        config = f"{name}-torch-fp32-tiny"
        run = folder / f"run_0_{config}_ret_0"
        run.mkdir()
        write_json_atomic(run / "campaign_run.json", {
            "run": planned, "repetition": 0, "experiment": planned, "config": config,
            "values": {"workload": name, "framework": "torch", "size": "tiny", "batch_size": [2]}})
        store = ThroughputRun(run, {"workload": name, "sample_unit": spec.sample_unit, "size": "tiny",
                                    "framework": "torch", "precision": "fp32"})
        rate = 10.0 * (planned + 1)
        store.add(BatchResult(2, Status.OK, None, {
            "samples_per_sec": rate, "timed_steps": 4, "parameters": 1000 * (planned + 1),
            "train_flops_per_sample": 1e6, "achieved_flops": 1e6 * rate, "mfu": None,
            "tokens_per_sec": None if tokens is None else tokens * rate}))
    return folder


def test_a_campaign_over_workloads_draws_each_in_its_own_unit(tmp_path: Path) -> None:
    campaign = workloads_campaign(tmp_path / "campaign")
    page, text = page_of([campaign], tmp_path)
    assert len(page.sections["campaigns"]["images"]) == len(UNITS)  # one figure per workload
    table = campaign_table(campaign)
    for name, unit in UNITS.items():
        assert f"{workloads.get(name).title}: {unit}" in text and f'alt="campaign {unit} against batch size"' in text
    assert "tokens/s" in text
    tables = page.tables("campaigns", "parameters")  # one per workload, in the order of the matrix
    assert [[row["config"] for row in rows] for rows in tables] == [[config] for config in table["config"]]
    for rows, record in zip(tables, table.to_dict("records"), strict=True):
        assert_shows(rows[0]["parameters"], record["parameters"])
        if record["workload"] == "resnet50":  # images hold no tokens: no column of blanks
            assert "tokens/s" not in rows[0]
        else:
            assert_shows(rows[0]["tokens/s"], record["tokens_per_sec"])


def test_variability_per_gpu_and_across(tmp_path: Path) -> None:
    study = tmp_path / "variability_torch_fp32"
    study.mkdir()
    gpus = [{"index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H100"} for index in range(3)]
    write_json_atomic(study / VARIABILITY_FILE, {"host": "node7", "gpus": gpus, "repetitions": 2,
                                                 "outlier_threshold": 0.05})
    for gpu, rate in ((0, 100.0), (1, 101.0), (2, 80.0)):
        for repetition in range(2):
            (study / f"gpu{gpu}_rep{repetition}").mkdir()
            store = ThroughputRun(study / f"gpu{gpu}_rep{repetition}", {"framework": "torch"})
            store.add(BatchResult(16, Status.OK, None, {"samples_per_sec": rate + repetition}))
    page, _ = page_of([tmp_path], tmp_path)
    runs = load_runs(study)
    expected = per_gpu(runs, 0.05)
    assert_rows(page.table("variability", "vs_median_pct"), expected.to_dict("records"), list(expected.columns))
    assert_rows(page.table("variability", "spread_pct"), across(runs, expected).to_dict("records"),
                ["batch_size", "scope", "n", "samples_per_sec_median", "spread_pct", "outliers"])
    assert page.table("variability", "outlier")[2]["outlier"] == "yes"


def test_models_and_training_curves(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    write_json_atomic(model / "model.json", {"models": [{
        "label": "torch | train step", "metric": "step_time", "function": "0.1 + 0.002 * batch_size^(1)",
        "smape": 3.21, "adjusted_r2": 0.99, "rss": 0.001, "relative_error": 0.02, "values": 25, "warnings": [],
        "predictions": [{"at": {"batch_size": 64.0}, "value": 0.228, "extrapolated": ["batch_size"]}],
        "checks": [{"at": {"batch_size": 24.0}, "measured": 0.15, "predicted": 0.148}]}]})
    training = tmp_path / "train"
    training.mkdir()
    epochs = [{"epoch": epoch, "train_loss": 2.0 / epoch, "eval_loss": 2.1 / epoch, "eval_top1": 0.1 * epoch,
               "eval_top5": 0.3 * epoch, "train_images_per_sec": 50.0} for epoch in (1, 2, 3)]
    (training / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in epochs) + "{cut")
    write_json_atomic(training / "config.json", {"model": {"framework": "tf", "precision": "fp32"}, "epochs": 90,
                                                 "batch_size": 384})
    page, text = page_of([tmp_path], tmp_path)
    shown = page.table("models", "smape")[0]
    assert shown["function"] == "0.1 + 0.002 * batch_size^(1)" and shown["SMAPE (%)"] == "3.21"
    assert shown["verdict"] == "good"  # SMAPE 3.21 % <= 5 %, adjusted R² 0.99 >= 0.9
    assert shown["predictions"] == "at batch_size=64: 0.228 s (extrapolated: batch_size)"
    assert shown["left-out checks"] == "left out batch_size=24: measured 0.15 s, predicted 0.148 s"
    assert_rows(page.table("training", "eval_top5"), epochs, ["epoch", "train_loss", "eval_loss", "eval_top1",
                                                              "eval_top5"])
    # Rows written before the rate was renamed (train_images_per_sec) are read under today's name.
    assert [row["train samples per sec"] for row in page.table("training", "eval_top5")] == ["50"] * 3
    assert "tf fp32 batch 384 90 epochs planned synthetic data (train)" in text
    assert len(page.sections["training"]["images"]) == 1


# --- the page as a file ---------------------------------------------------------------------------------------


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "run")
    (run / "throughput.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # the run's own picture is not needed: drawn anew
    page, text = page_of([run], tmp_path)
    assert not re.search(r"\b(src|href|action|poster|data)=\"(?!data:image/png;base64,|#)", text)
    assert not re.search(r"https?://|<link|<script|@import|url\(", text)
    sources = [src for section in page.sections.values() for src in section["images"]]
    assert sources and all(src.startswith("data:image/png;base64,") for src in sources)


def test_every_value_is_escaped(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "<b>run</b>")
    _, text = page_of([run], tmp_path)
    assert "<b>" not in text and "&lt;b&gt;run&lt;/b&gt;" in text
    assert "&lt;allocating 9 GiB&gt;" in text
    assert cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert cell(float("nan")) == "" and cell(None) == "" and cell(True) == "yes" and cell(1234.5678) == "1235"
    assert cell(pd.NA) == "" and cell([1.0, "<x>"]) == "1, &lt;x&gt;"


def test_every_section_has_a_one_line_note_when_empty() -> None:
    page = Page(render(ReportData(["nothing"])))
    assert_every_section_present_or_explained(page)
    assert all(len(section["absent"]) == 1 for section in page.sections.values())


def test_an_unreadable_summary_is_left_out_and_named(tmp_path: Path) -> None:
    throughput_run(tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "summary.json").write_text("{not json")
    data = gather([tmp_path])
    assert [run.path.name for run in data.runs] == ["good"]
    assert len(data.skipped) == 1 and str(tmp_path / "bad" / "summary.json") in data.skipped[0]


def report_command(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``trainbench report ARGS`` in this process (the CLI's own entry point, a second faster than a new one)."""
    code = main(["report", *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["trainbench", "report", *args], code, out.out, out.err)


def test_nothing_to_report_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line_error(report_command(capsys, str(tmp_path / "empty"), "-o", str(tmp_path / "r.html")),
                          "nothing to report", str(tmp_path / "empty"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "summary.json").write_bytes(b"\xff\xfe\x00garbage")
    assert_one_line_error(report_command(capsys, str(tmp_path / "bad")), str(tmp_path / "bad" / "summary.json"))
    assert_one_line_error(report_command(capsys, str(tmp_path / "missing")), "no such folder")
    assert_one_line_error(report_command(capsys, str(tmp_path / "bad" / "summary.json")), "not a folder (a file)")
    assert not (tmp_path / "r.html").exists()


def test_a_report_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    throughput_run(tmp_path / "run")
    first = report_command(capsys, str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    second = report_command(capsys, str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines() == [f"ranking table: {tmp_path / 'ranking.csv'}", str(tmp_path / "r.html")]
    assert second.stdout.strip().splitlines() == [f"ranking table: {tmp_path / 'ranking-1.csv'}",
                                                  str(tmp_path / "r-1.html")]
    assert (tmp_path / "ranking.csv").read_text() == (tmp_path / "ranking-1.csv").read_text()
    assert (tmp_path / "r.html").read_text() == (tmp_path / "r-1.html").read_text()  # the same page, twice


# --- real CLI runs and a real browser (slow) -----------------------------------------------------------------


@pytest.mark.slow
def test_real_ncu_and_nsys_profiles_through_the_stand_ins(tmp_path: Path) -> None:
    """``trainbench profile ncu`` and ``nsys`` (stand-in profilers, real CLI, sweep and worker on the CPU): the
    page's tables hold profile.json's units, the per-kernel table ncu's analysis wrote and nsys' per-step time."""
    env = standin_env(tmp_path)
    folders = []
    for tool in ("ncu", "nsys"):
        done = run_cli("profile", tool, *TINY, "--batch-sizes", "2", "--iterations", "2", "--output",
                       str(tmp_path / "out"), env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"report: trainbench report {tmp_path / 'out'}/profiled_data_{tool}" in done.stdout
        folders.append(Path(done.stdout.strip().splitlines()[-1]))
    page, _ = page_of([tmp_path / "out"], tmp_path)
    ncu, nsys = folders
    assert_rows(page.table("coreutil", "tensor"), summary_rows(ncu, "profile.json"),
                ["batch_size", "status", "kernels", "fma", "fp16", "tensor", "sfu"])
    kernels = pd.read_csv(batch_file(ncu, 2, ".kernels.csv"))
    assert_rows(page.table("coreutil", "weight_share"), kernels.to_dict("records"), list(kernels.columns))
    assert_rows(page.table("timeline", "gpu_busy_fraction"), summary_rows(nsys, "profile.json"),
                ["batch_size", "gpu_busy_fraction", "steps", "step_gpu_ms_median", "kernels"])
    steps = json.loads(batch_file(nsys, 2, ".timeline.json").read_text())["step_gpu_ms"]
    assert page.table("timeline", "median (ms)")[0]["each step (ms)"] == ", ".join(map(cell_text, steps))
    assert len(page.sections["coreutil"]["images"]) == 1  # coreutil's figure, summary.png
    assert_every_section_present_or_explained(page)


@pytest.mark.slow
def test_a_real_campaign_s_summary_and_failures_are_in_the_page(tmp_path: Path) -> None:
    """A real campaign on the CPU at 32 px: batch 2 runs, batch 1 fails (BatchNorm refuses one value per channel
    once ResNet-50 has pooled 32 px down to 1x1), so the page shows both a summary and a real failure with its
    reason. One repetition (each is a worker per batch size): the spread across repetitions is the synthetic
    campaign's test's."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text("axes:\n  framework: [torch]\n  precision: [fp32]\n  batch_size: [1, 2]\n  image_size: [32]\n"
                      "  device: [cpu]\nrepeats: 1\nwarmup: 1\nsteps: 1\n")
    done = run_cli("campaign", "run", str(matrix), "--output", str(tmp_path / "campaign"))
    assert done.returncode == 1, done.stdout + done.stderr  # a batch size failed
    assert f"report: trainbench report {tmp_path / 'campaign'}" in done.stdout
    made = run_main("report", str(tmp_path / "campaign"), "-o", str(tmp_path / "campaign.html"))
    assert made.returncode == 0 and made.stdout.strip().splitlines()[-1] == str(tmp_path / "campaign.html"), made.stderr
    page = Page((tmp_path / "campaign.html").read_text())
    summary = campaign_summary(campaign_table(tmp_path / "campaign")).drop(columns="scaling_efficiency")
    shown = page.table("campaigns", "spread_pct")
    assert_rows(shown, summary.to_dict("records"), list(summary.columns))
    assert [(row["batch size"], row["ok"]) for row in shown] == [("1", "0"), ("2", "1")]
    failures = page.table("failures", "reason")
    assert len(failures) == 1 and all("Expected more than 1 value per channel" in row["reason"] for row in failures)
    assert_every_section_present_or_explained(page)


def browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, shot: Path, height: int = 3000) -> subprocess.CompletedProcess[str]:
    """Debian's chromium, headless, the page as a local file (nothing else can be reached)."""
    # The background-networking flags keep chromium from trying hosts a closed network refuses, and a fresh
    # profile folder from reading a user's.
    return subprocess.run([str(browser()), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={shot.parent / 'chromium-profile'}",
                           f"--screenshot={shot}", f"--window-size=1400,{height}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_the_page_renders_in_a_headless_browser(tmp_path: Path) -> None:
    """Rendered by a real browser to a PNG that holds a drawn page (not blank), with the network cut off by the
    sandbox of a file:// page: the figures must come from the page itself."""
    if browser() is None:
        if os.environ.get("CI"):  # `make test` installs chromium under CI: a browser test skipped there guards nothing
            pytest.fail("CI is set but no chromium is on PATH (make test installs it as root)")
        pytest.skip("no chromium to render the page (apt-get install chromium)")
    throughput_run(tmp_path / "a", data="/data/x")
    throughput_run(tmp_path / "b", framework="tf")
    path = write_report([tmp_path], tmp_path / "report.html")
    shot = tmp_path / "page.png"
    done = screenshot(path, shot)
    assert shot.is_file(), done.stderr
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (3000, 1400)
    not_white = (pixels < 0.9).any(axis=2)
    assert not_white.mean() > 0.02  # text, tables and the figure drawn
    assert not_white[:, 700:].any()  # the tables and the figure reach the right half


def test_every_table_sits_in_a_box_that_scrolls_inside_the_page(tmp_path: Path) -> None:
    """A run's table is wider than a laptop's window: every table is inside a div.wide box that scrolls (both ways,
    at most 85 % of the window high, so its sideways scrollbar is on the screen with the table's top)."""
    throughput_run(tmp_path / "a", data="/data/x")
    throughput_run(tmp_path / "b", framework="tf")
    text = write_report([tmp_path], tmp_path / "report.html").read_text()
    tables = text.count("<table")
    assert tables >= 4 and text.count('<div class="wide"><table>') == tables
    assert "div.wide{overflow:auto;max-width:100%;max-height:85vh}" in text


PROBE = """<script>(() => { const out = {page: document.documentElement.scrollWidth, window: innerWidth,
height: innerHeight, tables: []}; document.querySelectorAll('table').forEach(t => { const box = t.parentElement;
out.tables.push({box: box.className, overflow: getComputedStyle(box).overflowX,
right: box.getBoundingClientRect().right, boxHeight: box.clientHeight, width: t.getBoundingClientRect().width,
client: box.clientWidth, scroll: box.scrollWidth});
}); const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre); })();</script>"""


@pytest.mark.slow
def test_no_table_reaches_past_the_page_in_a_browser(tmp_path: Path) -> None:
    """Chromium at a laptop's 1280 px: the page is no wider than the window; every table's box ends inside it, and
    a table wider than its box scrolls inside it (its box's scroll width holds it) with the scrollbar on screen."""
    if browser() is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium is on PATH (make test installs it as root)")
        pytest.skip("no chromium to render the page (apt-get install chromium)")
    throughput_run(tmp_path / "a", data="/data/x")
    throughput_run(tmp_path / "b", framework="tf")
    path = write_report([tmp_path], tmp_path / "report.html")
    probed = tmp_path / "probed.html"
    probed.write_text(path.read_text().replace("</body>", PROBE + "</body>"))
    done = subprocess.run([str(browser()), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,800",
                           "--dump-dom", probed.resolve().as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-500:]
    import html

    probe = json.loads(html.unescape(found[1]))
    assert probe["page"] <= probe["window"]
    assert len(probe["tables"]) >= 4
    for table in probe["tables"]:
        assert table["box"] == "wide" and table["overflow"] == "auto", table
        assert table["right"] <= probe["window"], table
        assert table["scroll"] >= table["width"] - 1, table  # all of it reachable by scrolling the box
        assert table["boxHeight"] <= 0.85 * probe["height"] + 1, table
    assert any(table["width"] > table["client"] for table in probe["tables"])  # a run's table: wider, scrolled
