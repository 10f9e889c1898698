"""``trainbench report``: one self-contained HTML page whose tables hold the results' own numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from trainbench.bench.store import ThroughputRun
from trainbench.report.html import SECTIONS, ReportData, cell, render
from trainbench.results.files import write_json_atomic
from trainbench.results.records import BatchResult, Status

TITLES = ("Environment", "Throughput against batch size", "Failed batch sizes", "Input-bound verdicts",
          "Campaigns and scaling efficiency", "GPU telemetry", "Core utilization (Nsight Compute, nvprof)",
          "GPU timeline (Nsight Systems)", "Variability across GPUs", "Comparisons", "Performance models",
          "Training curves")


def throughput_run(folder: Path, rates: dict[int, float], data: str = "synthetic") -> Path:
    """A run folder as the suite writes it: an ok batch size per rate (on real data, with the pipeline's own
    rate), and one that ran out of memory."""
    (folder / "logs").mkdir(parents=True)
    store = ThroughputRun(folder, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": data,
                                   "device": "cpu"})
    for batch, rate in rates.items():
        values = {"images_per_sec": rate, "images_per_sec_median": rate, "images_per_sec_min": rate * 0.9,
                  "images_per_sec_max": rate * 1.1, "windows": 3, "step_time_median_s": batch / rate,
                  "window_images_per_sec": [rate * 0.9, rate, rate * 1.1]}
        if data != "synthetic":
            values |= {"input_images_per_sec": rate * 1.05, "input_bound": True}
        store.add(BatchResult(batch, Status.OK, None, values), step_s=[batch / rate] * 3)
    store.add(BatchResult.failed(4096, Status.OOM, "CUDA out of memory <allocating 9 GiB>"))
    write_json_atomic(folder / "env.json", {"command": ["trainbench", "throughput"], "hostname": "node7",
                                            "cpu_count": 2, "gpu": {"gpus": [], "unavailable": "no NVML"},
                                            "framework": {"torch": "2.14.1"}})
    return folder


def page_of(tmp_path: Path, *folders: Path) -> str:
    done = run_cli("report", *map(str, folders), "-o", str(tmp_path / "report.html"))
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1]).read_text()


def test_a_throughput_run_s_numbers_are_in_the_page_and_absent_sections_say_why(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "runs" / "a", {8: 123.456, 16: 234.5678}, data="/data/imagenet")
    text = page_of(tmp_path, tmp_path / "runs")
    for title in TITLES:
        assert f">{title}</h2>" in text
    summary = json.loads((run / "summary.json").read_text())
    for row in summary["results"]:
        if row["status"] == "ok":
            for name in ("images_per_sec", "images_per_sec_min", "images_per_sec_max", "step_time_median_s",
                         "input_images_per_sec"):
                assert f"<td>{cell(row[name])}</td>" in text, (name, cell(row[name]))
    assert "CUDA out of memory &lt;allocating 9 GiB&gt;" in text  # the reason, escaped
    assert "No campaign folder given." in text and "No training run (metrics.jsonl) given." in text
    assert "node7" in text and "Fewer than two throughput runs" in text


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    throughput_run(tmp_path / "run", {8: 10.0})
    _png(tmp_path / "run" / "throughput.png")
    text = page_of(tmp_path, tmp_path / "run")
    assert not re.search(r"(src|href)=\"(?!data:|#)", text)  # images inline, links only within the page
    assert "http://" not in text and "https://" not in text
    assert text.count('src="data:image/png;base64,') == 1


def _png(path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    figure.subplots().plot([0, 1])
    figure.savefig(path)


def test_profiles_models_training_and_comparisons_get_their_sections(tmp_path: Path) -> None:
    throughput_run(tmp_path / "a", {8: 100.0, 16: 150.0})
    throughput_run(tmp_path / "b", {8: 110.0, 16: 160.0})
    profile = tmp_path / "profiled_data_nsys"
    profile.mkdir()
    write_json_atomic(profile / "profile.json", {"profiler": "nsys", "model": {"framework": "torch"}, "results": [
        BatchResult(16, Status.OK, None, {"gpu_busy_fraction": 0.8765, "step_gpu_ms_median": 21.5}).to_row()]})
    model = tmp_path / "model"
    model.mkdir()
    write_json_atomic(model / "model.json", {"models": [{
        "label": "torch | train step", "metric": "step_time", "function": "0.1 + 0.002 * batch_size^(1)",
        "smape": 3.21, "adjusted_r2": 0.99, "rss": 0.001, "values": 25,
        "predictions": [{"at": {"batch_size": 64.0}, "value": 0.228, "extrapolated": ["batch_size"]}],
        "checks": [{"at": {"batch_size": 24.0}, "measured": 0.15, "predicted": 0.148}]}]})
    training = tmp_path / "train"
    training.mkdir()
    (training / "metrics.jsonl").write_text("".join(json.dumps(
        {"epoch": epoch, "train_loss": 2.0 / epoch, "eval_loss": 2.1 / epoch, "eval_top1": 0.1 * epoch,
         "eval_top5": 0.3 * epoch, "train_images_per_sec": 50.0}) + "\n" for epoch in (1, 2, 3)) + "{cut")
    text = page_of(tmp_path, tmp_path)
    assert "<td>0.8765</td>" in text and "<td>21.5</td>" in text  # nsys
    assert "0.1 + 0.002 * batch_size^(1)" in text and "<td>3.21</td>" in text and "(extrapolated)" in text
    assert "left out {&#x27;batch_size&#x27;: 24.0}: measured 0.15, predicted 0.148" in text
    assert "<td>0.6667</td>" in text and "<td>0.3</td>" in text  # training: epoch 3's loss, epoch 1's top-1
    assert " against " in text and "p_value" in text  # the two runs compared
    assert "No ncu or nvprof profile" in text


def test_every_section_has_a_note_when_empty() -> None:
    text = render(ReportData(["nothing"]))
    assert text.count('class="absent"') == len(SECTIONS) == len(TITLES)


def test_values_are_escaped() -> None:
    assert cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert cell(float("nan")) == "" and cell(None) == "" and cell(True) == "yes" and cell(1234.5678) == "1235"


def test_nothing_to_report_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line_error(run_cli("report", str(tmp_path / "empty"), "-o", str(tmp_path / "r.html")),
                          "nothing to report")
    assert_one_line_error(run_cli("report", str(tmp_path / "missing")), "no such folder")
    assert not (tmp_path / "r.html").exists()


def test_a_report_is_never_overwritten(tmp_path: Path) -> None:
    throughput_run(tmp_path / "run", {8: 10.0})
    first = run_cli("report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    second = run_cli("report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    assert first.stdout.strip() == str(tmp_path / "r.html")
    assert second.stdout.strip() == str(tmp_path / "r-1.html")


@pytest.mark.slow
def test_a_real_campaign_and_sweep_in_a_headless_browser(tmp_path: Path) -> None:
    """The example campaign (real runs on the CPU) and its page, opened in Debian's chromium when installed: the
    scaling table holds the campaign summary's numbers, and the browser renders the page to a screenshot."""
    done = run_cli("campaign", "run", "configs/example_campaign.yaml", "--output", str(tmp_path / "campaign"))
    assert done.returncode == 0, done.stdout + done.stderr
    text = page_of(tmp_path, tmp_path / "campaign")
    summary = run_cli("campaign", "summary", str(tmp_path / "campaign"))
    assert summary.returncode == 0
    assert "campaign campaign" in text and "images_per_sec_median" in text and "No campaign folder" not in text
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium to render the page (apt-get install chromium)")
    shot = tmp_path / "page.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1400,2400", (tmp_path / "report.html").as_uri()], capture_output=True,
                   timeout=120, check=False)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
