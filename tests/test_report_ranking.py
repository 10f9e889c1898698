"""``trainbench report``'s headline, ranking (and ranking.csv) and comparisons of settings that differ in one setting.

Run folders are written by the suite's own store (``ThroughputRun``) from windows of known length, so each window's
samples/s is known; the page is read back with ``tests/test_report_html.py``'s parser and checked against the
folders' summary.json files, the CSV against them too, and the interval against scipy's Welch test.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scipy.stats import ttest_ind

from tests.test_report_html import Page, campaign_folder, page_of, report_command
from trainbench.bench.stats import summarize_windows
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.timing import Window
from trainbench.campaign.table import campaign_summary
from trainbench.report.found import Campaign
from trainbench.report.ranking import campaign_rows
from trainbench.results.records import BatchResult, Status

STEPS = 4  # timed steps per window


def write_run(folder: Path, windows: dict[int, list[float]], framework: str = "torch", precision: str = "fp32",
              oom: bool = False, **header: Any) -> Path:
    """A run folder as the sweep writes it: per batch size, windows of the given lengths (s) of STEPS equal steps,
    so window i's samples/s is batch x STEPS / windows[i]; then, with ``oom``, a batch size out of memory."""
    folder.mkdir(parents=True)
    store = ThroughputRun(folder, {"framework": framework, "precision": precision, "image_size": 64,
                                   "data": "synthetic", "device": "cpu", "warmup_steps": 1, "timed_steps": STEPS,
                                   "windows": len(next(iter(windows.values()))), **header})
    for batch, lengths in windows.items():
        made = [Window((0.1,), (length / STEPS,) * STEPS, length) for length in lengths]
        store.add(BatchResult(batch, Status.OK, None, summarize_windows(batch, made)))
    if oom:
        store.add(BatchResult.failed(4096, Status.OOM, "CUDA out of memory"))
    return folder


def summary(folder: Path) -> list[dict[str, Any]]:
    return json.loads((folder / "summary.json").read_text())["results"]


def plain(text: str) -> str:
    """The page's text without its tags (the escapes undone as the parser does)."""
    return " ".join(Page(f"<section id='x'><p class='absent'>{text}</p></section>").sections["x"]["absent"])


def section_text(text: str, key: str) -> str:
    found = re.search(rf'<section id="{key}">(.*?)</section>', text, re.S)
    assert found, key
    return re.sub(r"\s+", " ", plain(re.sub("<[^>]+>", " ", found[1])))


def test_one_setting_pairs_are_compared_and_a_pair_differing_in_two_is_not(tmp_path: Path) -> None:
    windows = {8: [1.0, 1.1, 1.2]}
    write_run(tmp_path / "runs" / "a", windows, "torch", "fp32")
    write_run(tmp_path / "runs" / "b", windows, "tf", "fp32")
    write_run(tmp_path / "runs" / "c", windows, "tf", "bf16")
    page, text = page_of([tmp_path / "runs"], tmp_path)
    compared = {heading: rows for heading, rows in (
        ("framework", page.table("comparisons", "framework: A -> B")),
        ("precision", page.table("comparisons", "precision: A -> B")))}
    assert [(row["framework: A -> B"], row["A"], row["B"]) for row in compared["framework"]] == [("torch -> tf", "a",
                                                                                                  "b")]
    assert [(row["precision: A -> B"], row["A"], row["B"]) for row in compared["precision"]] == [("fp32 -> bf16", "b",
                                                                                                  "c")]
    assert compared["framework"][0]["where"] == "fp32 batch 8"  # what the pair shares, the differing setting apart
    uncompared = page.table("comparisons", "settings that differ")
    assert [(row["settings that differ"], row["which"], row["pairs"], row["for example"]) for row in uncompared] == \
        [("2", "framework, precision", "1", "a and c")]
    assert "Not compared: 1 pair that differ in several settings" in section_text(text, "comparisons")


def welch_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """scipy's Welch interval of mean(b) - mean(a), in % of mean(a), around the change of the overall rates."""
    interval = ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    mean_a = sum(a) / len(a)
    half = 100 * (interval.high - interval.low) / 2 / mean_a
    return -half, half


def test_three_windows_a_side_that_do_not_overlap_give_a_verdict_with_its_interval(tmp_path: Path) -> None:
    slow = write_run(tmp_path / "runs" / "slow", {8: [1.00, 1.02, 1.01]})
    fast = write_run(tmp_path / "runs" / "fast", {8: [0.90, 0.91, 0.92]}, precision="bf16")
    page, _ = page_of([tmp_path / "runs"], tmp_path)
    (row,) = page.table("comparisons", "precision: A -> B")
    a, b = (summary(folder)[0] for folder in (fast, slow))  # "fast" is found first: A
    assert min(a["window_samples_per_sec"]) > max(b["window_samples_per_sec"])  # no overlap
    change = 100 * (b["samples_per_sec"] / a["samples_per_sec"] - 1)
    low, high = welch_interval(a["window_samples_per_sec"], b["window_samples_per_sec"])
    assert row["change (95 % interval)"] == f"{change:+.1f} % ({change + low:+.1f} to {change + high:+.1f})"
    assert change + high < 0  # the whole interval below no change
    assert row["verdict"] == "B slower" and row["why"].startswith(f"B slower by {abs(change):.1f} %")
    assert float(row["A images/s"]) == pytest.approx(a["samples_per_sec"], rel=6e-4)
    assert "Welch p = " in row["why"]


def test_one_window_a_side_says_how_many_are_needed(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "a", {8: [1.0]})
    write_run(tmp_path / "runs" / "b", {8: [0.5]}, framework="tf")
    page, _ = page_of([tmp_path / "runs"], tmp_path)
    (row,) = page.table("comparisons", "framework: A -> B")
    assert row["change (95 % interval)"] == "+100.0 %" and row["verdict"] == "no verdict"
    assert "1 and 1 windows" in row["why"] and "at least 2 a side" in row["why"] and "--windows 3" in row["why"]


def test_headline_and_ranking_csv_hold_the_run_folders_numbers(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    runs = [write_run(tmp_path / "runs" / "torch", {8: [1.0, 1.1, 1.2], 16: [1.5, 1.6, 1.7]}, oom=True),
            write_run(tmp_path / "runs" / "tf", {8: [2.0, 2.1, 2.2], 16: [3.0, 3.1, 3.3]}, framework="tf", oom=True)]
    done = report_command(capsys, str(tmp_path / "runs"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2:] == [f"ranking table: {tmp_path / 'ranking.csv'}", str(tmp_path / "r.html")]
    expected = sorted(((folder.name, row["batch_size"], row["samples_per_sec"]) for folder in runs
                       for row in summary(folder) if row["status"] == "ok"), key=lambda item: -item[2])
    with open(tmp_path / "ranking.csv", newline="") as file:
        ranked = list(csv.DictReader(file))
    assert [(row["source"], int(row["batch_size"]), float(row["samples_per_sec"])) for row in ranked] == \
        [(name, batch, pytest.approx(rate)) for name, batch, rate in expected]  # one row per ok batch size
    assert [int(row["rank"]) for row in ranked] == list(range(1, len(expected) + 1))
    best_name, best_batch, best_rate = expected[0]
    slowest = expected[-1]
    page = Page((tmp_path / "r.html").read_text())
    assert next(iter(page.sections)) == "headline"  # the page opens with the answer
    text = section_text((tmp_path / "r.html").read_text(), "headline")
    assert f"ResNet-50 at 64 px on cpu: best {best_rate:.4g} images/s (spread" in text
    assert f"with {best_name} fp32 batch {best_batch}" in text
    assert f"{best_rate / slowest[2]:.3g} x the slowest of its 4 settings" in text
    # the constant settings, said once; files without the step's settings say so (unknown, not "highest"); files
    # without a size ran the full network (results.header.BEFORE_SIZES)
    assert ("All rows: fp32, on cpu, full size, 64 px, synthetic data, matmul precision not recorded, optimizer not "
            "recorded, 1 process.") in text
    shown = page.table("headline", "rank")
    assert [(row["source"], row["framework"], row["batch size"]) for row in shown] == \
        [(name, name, str(batch)) for name, batch, _ in expected]
    assert "precision" not in shown[0]  # the same in every row: no column


def test_sizes_and_lengths_are_ranked_apart_and_the_network_is_named_by_its_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Tiny BERT at 8 and 32 tokens and the full one at 32 measure three kinds of work: three headlines, ranks
    restarting in each, none "x the slowest" of another; the tiny network is not called BERT-base."""
    def bert(name: str, size: str, seq_len: int, seconds: float) -> None:
        write_run(tmp_path / "runs" / name, {8: [seconds, seconds * 1.05, seconds * 1.1]}, workload="bert",
                  sample_unit="sequence", size=size, image_size=None, params={"seq_len": seq_len})

    bert("tiny8", "tiny", 8, 0.01)
    bert("tiny32", "tiny", 32, 0.04)
    bert("tiny32b", "tiny", 32, 0.05)
    bert("full32", "full", 32, 2.0)
    done = report_command(capsys, str(tmp_path / "runs"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    text = section_text((tmp_path / "r.html").read_text(), "headline")
    titles = re.findall(r"((?:tiny )?BERT-base at seq_len \d+ on cpu): best", text)
    assert sorted(titles) == ["BERT-base at seq_len 32 on cpu", "tiny BERT-base at seq_len 32 on cpu",
                              "tiny BERT-base at seq_len 8 on cpu"]
    assert text.count("x the slowest of its 2 settings") == 1 and "of its 4 settings" not in text
    with open(tmp_path / "ranking.csv", newline="") as file:
        ranks = {row["source"]: (row["size"], row["seq_len"], int(row["rank"])) for row in csv.DictReader(file)}
    assert ranks == {"tiny8": ("tiny", "8", 1), "tiny32": ("tiny", "32", 1), "tiny32b": ("tiny", "32", 2),
                     "full32": ("full", "32", 1)}


def test_a_campaign_s_configurations_are_ranked_and_compared_on_repetitions(tmp_path: Path) -> None:
    rates = {(1, 8): [100.0, 104.0], (2, 8): [180.0, 186.0]}
    campaign = campaign_folder(tmp_path / "campaign", rates)
    page, text = page_of([campaign], tmp_path)
    shown = page.table("headline", "rank")
    assert [(row["processes"], float(row["images/s"]), row["over"]) for row in shown] == \
        [("2", 183.0, "2 repetitions"), ("1", 102.0, "2 repetitions")]  # the median over the repetitions
    (row,) = page.table("comparisons", "processes: A -> B")
    assert row["processes: A -> B"] == "1 -> 2" and row["verdict"] == "B faster"
    assert "only 2 repetitions a side" in row["why"] and "repeats: 3" in row["why"]
    assert "Fewer than two" not in text and "fewer than two" not in text


# --- format 6: recomputation and sharding --------------------------------------------------------------------------

RECOMPUTE = 4 / 3  # a transformer step's FLOPs with each block's forward (1 of its 3 parts) run again
PEAK = 1e9  # FLOP/s the stand-in runs' MFU is measured against


def step_values(batch: int, lengths: list[float], recompute: str | None, shard: str | None,
                processes: int) -> dict[str, Any]:
    """A batch size's values as a format-6 worker records them (none of format 6's with ``recompute`` None): MFU
    from the rate against ``PEAK``, HFU the same with the recomputed forward, the parameters one process holds."""
    made = [Window((0.1,), (length / STEPS,) * STEPS, length) for length in lengths]
    values: dict[str, Any] = summarize_windows(batch, made)
    rate, factor = values["samples_per_sec"], RECOMPUTE if recompute == "full" else 1.0
    values |= {"parameters": 1000, "train_flops_per_sample": 3e6, "achieved_flops": rate * 3e6, "peak_flops": PEAK,
               "mfu": rate * 3e6 / PEAK}
    if recompute is not None:
        values |= {"activation_checkpointing": recompute, "shard": shard if processes > 1 else None,
                   "parameters_held": 1000 // processes if shard == "fsdp" else 1000,
                   "hardware_flops_per_sample": 3e6 * factor, "hfu": rate * 3e6 * factor / PEAK}
    return values


def step_run(folder: Path, recompute: str | None, shard: str | None, processes: int = 2,
             lengths: tuple[float, ...] = (1.0, 1.1, 1.2)) -> Path:
    """A tiny GPT-2 run on two processes whose header's model records recomputation and the shard (format 6), or,
    with None, neither (a file from before)."""
    folder.mkdir(parents=True)
    model: dict[str, Any] = {"framework": "torch", "workload": "gpt2", "size": "tiny", "matmul_precision": "highest"}
    if recompute is not None:
        model |= {"activation_checkpointing": recompute, "shard": shard}
    store = ThroughputRun(folder, {"workload": "gpt2", "sample_unit": "sequence", "size": "tiny",
                                   "params": {"seq_len": 32}, "framework": "torch", "precision": "bf16",
                                   "data": "synthetic", "device": "cuda", "warmup_steps": 1, "timed_steps": STEPS,
                                   "windows": len(lengths), "model": model, "optimizer": {"name": "adamw"},
                                   "launch": {"processes_per_node": processes, "nodes": 1}})
    store.add(BatchResult(8, Status.OK, None, step_values(8, list(lengths), recompute, shard, processes)))
    return folder


def test_recomputation_and_the_shard_pair_runs_and_hfu_stands_beside_mfu(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Runs that differ in activation checkpointing or in the shard alone are compared; a file from before format 6
    ran none and DDP, so it pairs as that; HFU is a column where a row's differs from its MFU."""
    runs = tmp_path / "runs"
    step_run(runs / "a_plain", "none", "ddp")
    step_run(runs / "b_full", "full", "ddp", lengths=(1.3, 1.4, 1.5))
    step_run(runs / "c_fsdp", "none", "fsdp", lengths=(0.9, 1.0, 1.1))
    step_run(runs / "d_old", None, None, lengths=(1.05, 1.1, 1.15))
    done = report_command(capsys, str(runs), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    page = Page((tmp_path / "r.html").read_text())
    recompute = {(row["activation checkpointing: A -> B"], row["A"], row["B"])
                 for row in page.table("comparisons", "activation checkpointing: A -> B")}
    assert recompute == {("none -> full", "a_plain", "b_full"), ("full -> none", "b_full", "d_old")}
    shard = {(row["shard: A -> B"], row["A"], row["B"]) for row in page.table("comparisons", "shard: A -> B")}
    assert shard == {("ddp -> fsdp", "a_plain", "c_fsdp"), ("fsdp -> ddp", "c_fsdp", "d_old")}
    uncompared = page.table("comparisons", "settings that differ")
    assert [(row["which"], row["pairs"]) for row in uncompared] == [("activation checkpointing, shard", "1")]
    ranked = {row["source"]: row for row in page.table("headline", "rank")}
    assert {name: (row["activation checkpointing"], row["shard"]) for name, row in ranked.items()} == {
        "a_plain": ("none", "ddp"), "b_full": ("full", "ddp"), "c_fsdp": ("none", "fsdp"), "d_old": ("none", "ddp")}
    full = summary(runs / "b_full")[0]
    assert float(ranked["b_full"]["HFU %"]) == pytest.approx(100 * full["hfu"], rel=6e-4)
    assert float(ranked["b_full"]["HFU %"]) == pytest.approx(float(ranked["b_full"]["MFU %"]) * RECOMPUTE, rel=1e-3)
    assert ranked["a_plain"]["HFU %"] == ranked["a_plain"]["MFU %"] and ranked["d_old"]["HFU %"] == ""
    with open(tmp_path / "ranking.csv", newline="") as file:
        rows = {row["source"]: row for row in csv.DictReader(file)}
    assert (rows["d_old"]["activation_checkpointing"], rows["d_old"]["shard"], rows["d_old"]["hfu"]) == \
        ("none", "ddp", "")
    assert float(rows["b_full"]["hfu"]) == pytest.approx(full["hfu"])
    assert list(rows["a_plain"]).index("hfu") == list(rows["a_plain"]).index("mfu") + 1


def test_without_recomputation_hfu_is_no_column_and_the_defaults_need_no_words(tmp_path: Path) -> None:
    """HFU equal to MFU (no recomputation) would repeat it: no column; none and DDP, every row's, are not listed
    among the settings all rows share."""
    step_run(tmp_path / "runs" / "a", "none", "ddp")
    step_run(tmp_path / "runs" / "old", None, None, lengths=(0.9, 1.0, 1.1))
    page, text = page_of([tmp_path / "runs"], tmp_path)
    shown = page.table("headline", "rank")
    assert "MFU %" in shown[0] and "HFU %" not in shown[0]
    assert "activation checkpointing" not in shown[0] and "shard" not in shown[0]  # the same in both rows
    words = section_text(text, "headline")
    assert ("All rows: torch, bf16, on cuda, tiny size, seq_len 32, synthetic data, matmul precision highest, "
            "optimizer adamw, 2 processes, batch 8.") in words
    assert "checkpointing" not in words and "ddp" not in words
    assert not page.tables("comparisons", "shard: A -> B")  # the same settings: measured twice, not compared


def test_a_campaign_row_without_its_run_s_header_takes_the_step_from_its_axes_and_what_ran(tmp_path: Path) -> None:
    """Where a campaign run's summary cannot be read for its header, the row's settings are the matrix's axes
    (results.csv's columns): format 6's from their columns where the matrix or the run gave them, else what ran
    (none, ddp: one process records no shard), so the row pairs with a run of the same step."""
    rows = [{"config": config, "experiment": index, "run_folder": f"run_0_{config}_ret_0", "framework": "torch",
             "precision": "fp32", "batch_size": 8, "status": "ok", "samples_per_sec": 100.0 + index,
             "activation_checkpointing": recompute, "shard": shard, "gpus": gpus}
            for index, (config, recompute, shard, gpus) in enumerate([
                ("one", None, None, 1), ("full", "full", None, 1), ("fsdp", "none", "fsdp", 2)])]
    table = pd.DataFrame(rows)
    found = campaign_rows(Campaign(tmp_path, table, campaign_summary(table)))  # no run's summary: runs={}
    assert [(row["activation_checkpointing"], row["shard"]) for row in found] == [("none", "ddp"), ("full", "ddp"),
                                                                                   ("none", "fsdp")]


# --- the size column: never empty where the size can be known -------------------------------------------------


def old_run(folder: Path, fmt: int, model: dict[str, Any], rates: tuple[float, ...] = (100.0, 180.0)) -> Path:
    """A summary.json as the suite wrote it before sizes (format 1: no format key; 3: the last without a header
    size): ResNet-50's header with its settings inside ``model`` too, one ok row per batch size."""
    folder.mkdir(parents=True)
    header = {"framework": "torch", "precision": "fp32", "image_size": model.get("image_size", 224),
              "data": "synthetic", "device": "cpu", "model": {"framework": "torch", "precision": "fp32",
                                                              "device": "cpu", **model},
              "warmup_steps": 1, "timed_steps": STEPS}
    rate = "images_per_sec" if fmt < 3 else "samples_per_sec"  # formats 1 and 2 counted images
    rows = [{"batch_size": 8 * (index + 1), "status": "ok", rate: value} for index, value in enumerate(rates)]
    (folder / "summary.json").write_text(json.dumps({**({"format": fmt} if fmt > 1 else {}), **header,
                                                     "results": rows}))
    return folder


def test_files_from_before_sizes_rank_as_full_and_a_recorded_size_as_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ranking.csv's size is never empty for a run whose size is known: a summary from before sizes existed (no
    size at the top or in its model) ran the published ResNet-50, "full" (at its own image size: a 64 px run
    stays full at 64 px); one whose model records a size (the last format-3 files) reads it."""
    old_run(tmp_path / "runs" / "format1", 1, {"image_size": 224})
    old_run(tmp_path / "runs" / "format3_64px", 3, {"image_size": 64, "num_classes": 10})
    old_run(tmp_path / "runs" / "format3_tiny", 3, {"image_size": 64, "size": "tiny"})
    done = report_command(capsys, str(tmp_path / "runs"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "ranking.csv", newline="") as file:
        sizes = {(row["source"], row["batch_size"]): (row["size"], row["image_size"]) for row in csv.DictReader(file)}
    assert sizes == {("format1", "8"): ("full", "224"), ("format1", "16"): ("full", "224"),
                     ("format3_64px", "8"): ("full", "64"), ("format3_64px", "16"): ("full", "64"),
                     ("format3_tiny", "8"): ("tiny", "64"), ("format3_tiny", "16"): ("tiny", "64")}


def test_a_campaign_row_without_its_run_s_header_takes_its_size_axis_else_the_matrix_s_default(
        tmp_path: Path) -> None:
    """A campaign run whose summary cannot be read: its size is the matrix's axis (results.csv's column, empty for a
    run of an experiment without it) or, without the axis, the matrix's default, full: what ran, never empty."""
    def rows(sizes: list[str | None]) -> pd.DataFrame:
        made = [{"config": f"c{index}", "experiment": index, "run_folder": f"run_0_c{index}_ret_0",
                 "framework": "torch", "precision": "fp32", "batch_size": 8, "status": "ok",
                 "samples_per_sec": 100.0 + index, **({} if size == "no axis" else {"size": size})}
                for index, size in enumerate(sizes)]
        return pd.DataFrame(made)

    for sizes, expected in (([None, "tiny", "full"], ["full", "tiny", "full"]), (["no axis"], ["full"])):
        table = rows(sizes)
        found = campaign_rows(Campaign(tmp_path, table, campaign_summary(table)))  # no run's summary: runs={}
        assert [row["size"] for row in found] == expected
