"""The report page reads without the field registry at hand: every run of an environment named, versions in two
notations one environment, headers in words with step times in ms, the windows' CV and spread, one figure per
image size, the statistic a figure draws named, absent sections in one closing line, models with a verdict."""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.test_report_html import page_of, summary_rows, throughput_run
from tests.test_report_ranking import RECOMPUTE, section_text, step_run, step_values
from trainbench.render.console import format_table
from trainbench.render.readable import header, short_numbers, shown, verdict, with_trust
from trainbench.report.sections import throughput
from trainbench.results.files import write_json_atomic
from trainbench.results.trust import window_spread


def set_env(run: Path, **changes: Any) -> None:
    env = json.loads((run / "env.json").read_text())
    framework = env["framework"] | changes.pop("framework", {})
    write_json_atomic(run / "env.json", env | changes | {"framework": framework})


def test_an_environment_names_every_run_and_versions_in_two_notations_are_one(tmp_path: Path) -> None:
    runs = [throughput_run(tmp_path / name, batch_sizes=(8,)) for name in ("a", "b", "c")]
    set_env(runs[0], framework={"cudnn": 90100, "cuda": "12.4"}, time_utc="2024-05-01T10:00:00")
    set_env(runs[1], framework={"cudnn": "9.1.0", "cuda": "12.4.0"}, time_utc="2024-05-01T11:00:00")
    set_env(runs[2], framework={"cudnn": 90100, "cuda": 12040}, time_utc="2024-05-01T12:00:00",
            command=["trainbench", "throughput", "--batch-sizes", "8"])
    page, _ = page_of([tmp_path], tmp_path)
    [table] = page.tables("environment", "")
    columns = [name for name in table[0] if name]
    assert columns == ["a and 2 more"]  # one environment: cuDNN 90100 is 9.1.0, CUDA 12040 is 12.4
    rows = {row[""]: row[columns[0]] for row in table}
    assert rows["runs"] == "a, b, c"
    assert rows["time (UTC)"] == "a: 2024-05-01T10:00:00; b: 2024-05-01T11:00:00; c: 2024-05-01T12:00:00"
    assert rows["command"] == ("a: trainbench throughput; b: trainbench throughput; "
                               "c: trainbench throughput --batch-sizes 8")
    set_env(runs[2], framework={"cudnn": 8902})  # another cuDNN: another environment
    page, _ = page_of([tmp_path], tmp_path)
    [table] = page.tables("environment", "")
    assert [name for name in table[0] if name] == ["a and 1 more", "c"]


def test_tables_are_headed_in_words_with_step_times_in_ms_and_the_windows_spread(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "run", batch_sizes=(8, 16))
    page, _ = page_of([run], tmp_path)
    shown = page.table("throughput", "median step (ms)")
    recorded = [row for row in summary_rows(run) if row["status"] == "ok"]
    for row, record in zip(shown, recorded, strict=False):
        assert float(row["median step (ms)"]) == pytest.approx(record["step_time_median_s"] * 1000, rel=6e-4)
        assert float(row["p10 step (ms)"]) == pytest.approx(record["step_time_p10_s"] * 1000, rel=6e-4)
        assert float(row["window (s)"]) == pytest.approx(record["window_s"], rel=6e-4)
        windows = record["window_samples_per_sec"]
        cv = statistics.stdev(windows) / statistics.fmean(windows) * 100
        spread = (max(windows) - min(windows)) / statistics.median(windows) * 100
        assert float(row["CV (%)"]) == pytest.approx(cv, rel=6e-4)
        assert float(row["spread (%)"]) == pytest.approx(spread, rel=6e-4)
        assert row["checks"].startswith("windows of ")  # a test's windows last well under 5 s
    assert not any("_" in name for name in shown[0])  # no raw field name in the page's table
    with (run / "summary.csv").open() as file:  # the files keep the raw names and seconds
        assert {"step_time_median_s", "samples_per_sec"} <= set(next(csv.reader(file)))


def test_one_figure_per_image_size_naming_its_statistic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    throughput_run(tmp_path / "big", image_size=224)
    throughput_run(tmp_path / "small", image_size=64, windows=1)
    titles: list[tuple[str, Any]] = []
    drawn = throughput.batch_size_figure

    def recorded(lines: Any, title: str, ylabel: str, spread: Any = None, width: float = 7.0,
                 sample_unit: str = "image") -> Any:
        titles.append((title, spread))
        return drawn(lines, title, ylabel, spread=spread, width=width, sample_unit=sample_unit)

    monkeypatch.setattr(throughput, "batch_size_figure", recorded)
    page, text = page_of([tmp_path], tmp_path)
    assert len(page.sections["throughput"]["images"]) == 2
    assert 'alt="images/s against batch size (224 px)"' in text and 'alt="images/s against batch size (64 px)"' in text
    big, small = titles
    assert big[0] == ("ResNet-50, 224 px: overall images/s: all timed samples / timed wall time; bars: slowest to "
                      "fastest window") and big[1] is not None
    assert small[0] == "ResNet-50, 64 px: overall images/s: all timed samples / timed wall time" and small[1] is None


def test_absent_sections_are_one_closing_line_and_not_in_the_navigation(tmp_path: Path) -> None:
    throughput_run(tmp_path / "run")
    page, text = page_of([tmp_path], tmp_path)
    assert "throughput" in page.nav and "training" not in page.nav and "models" not in page.nav
    assert "training" not in page.sections
    assert page.missing["training"] == "Training curves (No training run (metrics.jsonl) in the folders given)"
    assert page.missing["models"].startswith("Performance models (No performance model")
    closing = text[text.index('<p class="absent" id="not-here">'):]
    assert closing.startswith('<p class="absent" id="not-here">Not in these folders: ')
    assert closing.index('id="models"') < closing.index('id="training"') and "<section" not in closing


def test_a_model_shows_its_function_at_4_digits_a_verdict_its_check_and_its_runs(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    write_json_atomic(model / "model.json", {"sources": ["/runs/sweep"], "models": [{
        "label": "torch | train step", "config": "torch_fp32", "metric": "step_time", "values": 10,
        "function": "0.012345678901234567 + 0.00098765432109876 * batch_size^(1)", "smape": 34.0,
        "adjusted_r2": -0.25, "rss": 0.5, "run_settings": {"framework": "torch", "precision": "fp32"},
        "checks": [{"at": {"batch_size": 64.0}, "measured": 0.08, "predicted": 0.1, "relative_error": 0.25,
                    "extrapolated": ["batch_size"]}]}]})
    page, text = page_of([tmp_path], tmp_path)
    [row] = page.table("models", "verdict")
    assert row["function"] == "0.01235 + 0.0009877 * batch_size^(1)"
    assert row["verdict"] == "poor" and row["adjusted R²"] == "-0.25"
    assert row["left-out checks"] == ("left out batch_size=64: measured 0.08 s, predicted 0.1 s, error +25 % "
                                      "(extrapolated)")
    assert row["runs"] == "config torch_fp32; framework=torch, precision=fp32"
    assert "Fitted on the runs under: /runs/sweep." in text and "good: SMAPE ≤ 5 %" in text


def test_the_rules_behind_the_page() -> None:
    assert verdict(4.0, 0.95) == "good" and verdict(4.0, None) == "good" and verdict(4.0, 0.5) == "usable"
    assert verdict(15.0, 0.99) == "usable" and verdict(34.0, -0.2) == "poor" and verdict(None, 1.0) == "unknown"
    assert short_numbers("1.23456789e-05 * log2(p)^(1.5) + 12") == "1.235e-05 * log2(p)^(1.5) + 12"
    assert window_spread([100.0]) == {"window_cv_pct": None, "window_spread_pct": None}
    spread = window_spread([90.0, 100.0, 110.0])
    assert spread["window_cv_pct"] == pytest.approx(10.0) and spread["window_spread_pct"] == pytest.approx(20.0)
    old = {"status": "ok", "windows": 2, "window_s": 20.0, "window_samples_per_sec": [100.0, 101.0]}
    assert with_trust(old)["checks"] == "ok" and with_trust(old)["window_spread_pct"] == pytest.approx(1.0 / 1.005)
    short = with_trust({**old, "window_s": 4.0, "window_samples_per_sec": [90.0, 110.0]})["checks"]
    assert short.startswith("windows of 2 s, under the 5 s minimum") and "windows spread 20 %" in short


# --- format 6: HFU beside MFU, what a process holds, how the step ran ------------------------------------------------


def test_hfu_and_the_format_6_fields_read_in_words_and_percent() -> None:
    assert (header("hfu"), header("mfu")) == ("HFU (%)", "MFU (%)")
    assert shown("hfu", 0.25) == pytest.approx(25.0)
    assert header("hardware_flops_per_sample") == "hardware FLOP per sample (FLOP)"
    assert (header("parameters_held"), header("activation_checkpointing"), header("shard")) == \
        ("parameters held", "activation checkpointing", "shard")


def test_the_throughput_tables_show_hfu_and_what_a_process_holds_only_where_they_differ(tmp_path: Path) -> None:
    """Each run's table: HFU right after MFU, the hardware FLOPs after the training FLOPs where recomputation makes
    them differ; the parameters held after the parameters under FSDP; none of them where they repeat their
    counterpart. The label names a step other than the defaults, the step line what the results record."""
    step_run(tmp_path / "runs" / "a_plain", "none", "ddp")
    step_run(tmp_path / "runs" / "b_full", "full", "ddp")
    step_run(tmp_path / "runs" / "c_fsdp", "none", "fsdp")
    page, text = page_of([tmp_path / "runs"], tmp_path)
    plain, full, fsdp = (table[0] for table in page.tables("throughput", "samples_per_sec"))
    assert not {"HFU (%)", "hardware FLOP per sample (FLOP)", "parameters held"} & set(plain)
    columns = list(full)
    assert columns[columns.index("MFU (%)") + 1] == "HFU (%)"
    assert columns[columns.index("training FLOP per sample (FLOP)") + 1] == "hardware FLOP per sample (FLOP)"
    assert "parameters held" not in full
    recorded = summary_rows(tmp_path / "runs" / "b_full")[0]
    assert float(full["HFU (%)"]) == pytest.approx(100 * recorded["hfu"], rel=6e-4)
    assert float(full["HFU (%)"]) == pytest.approx(float(full["MFU (%)"]) * RECOMPUTE, rel=1e-3)
    assert list(fsdp)[list(fsdp).index("parameters") + 1] == "parameters held" and fsdp["parameters held"] == "500"
    assert "HFU (%)" not in fsdp
    labels = re.findall(r"<h3>([^<]*)</h3>", text)
    assert "GPT-2 small torch bf16 checkpointing full on cuda tiny seq_len 32 synthetic data (b_full)" in labels
    assert "GPT-2 small torch bf16 fsdp on cuda tiny seq_len 32 synthetic data (c_fsdp)" in labels
    assert "GPT-2 small torch bf16 on cuda tiny seq_len 32 synthetic data (a_plain)" in labels  # the defaults
    words = section_text(text, "throughput")
    assert "image layout" not in words and "activation checkpointing full; shard ddp." in words
    assert "Step: matmul precision highest; optimizer adamw; activation checkpointing none; shard fsdp." in words


def test_a_run_from_before_format_6_says_nothing_of_recomputation_or_shards(tmp_path: Path) -> None:
    step_run(tmp_path / "runs" / "old", None, None)
    _, text = page_of([tmp_path / "runs"], tmp_path)
    words = section_text(text, "throughput")
    assert "Step: matmul precision highest; optimizer adamw." in words  # the header's: ran none, DDP, said nowhere
    assert "checkpointing" not in words and "shard" not in words and "HFU" not in words


def test_a_campaign_s_work_table_shows_hfu_beside_mfu_where_a_configuration_recomputes(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    write_json_atomic(campaign / "campaign.json", {"fingerprint": "test", "runs": 0})
    for planned, recompute in enumerate(("none", "full")):
        config = f"gpt2-torch-bf16-tiny-seq32-recompute_{recompute}"
        run = campaign / f"run_0_{config}_ret_0"
        step_run(run, recompute, "ddp", processes=1)
        write_json_atomic(run / "campaign_run.json", {
            "run": planned, "repetition": 0, "experiment": planned, "config": config,
            "values": {"workload": "gpt2", "size": "tiny", "activation_checkpointing": recompute, "batch_size": [8]}})
    page, _ = page_of([campaign], tmp_path)
    [work] = page.tables("campaigns", "mfu")
    columns = list(work[0])
    assert columns[columns.index("MFU (%)") + 1] == "HFU (%)"
    by_config = {row["config"]: row for row in work}
    plain, full = (by_config[f"gpt2-torch-bf16-tiny-seq32-recompute_{name}"] for name in ("none", "full"))
    assert plain["HFU (%)"] == plain["MFU (%)"]
    assert float(full["HFU (%)"]) == pytest.approx(float(full["MFU (%)"]) * RECOMPUTE, rel=1e-3)
    assert "parameters held" not in columns  # one process holds every parameter: it would repeat them
    ranked = {row["source"].split(": ")[1]: row for row in page.table("headline", "rank")}
    assert {config: row["activation checkpointing"] for config, row in ranked.items()} == {
        "gpt2-torch-bf16-tiny-seq32-recompute_none": "none", "gpt2-torch-bf16-tiny-seq32-recompute_full": "full"}
    assert "HFU %" in next(iter(ranked.values()))


def test_the_console_table_shows_hfu_only_where_it_differs_from_mfu() -> None:
    plain = step_values(8, [1.0, 1.1, 1.2], "none", "ddp", 2)
    full = step_values(8, [1.0, 1.1, 1.2], "full", "ddp", 2)
    assert "HFU %" not in format_table([{"batch_size": 8, "status": "ok", **plain}]).splitlines()[0]
    head = format_table([{"batch_size": 8, "status": "ok", **full}]).splitlines()[0]
    assert "MFU %" in head and "HFU %" in head
