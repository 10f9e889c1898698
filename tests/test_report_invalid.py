"""``trainbench report`` on values that are no measurement, on many runs, and its ``-o``.

A value that no run measures (NaN, infinite, negative, a text where a number belongs) in any file the page reads
is shown where it was found, marked invalid with its file and field, counted at the top and on the terminal, and
left out of every figure, comparison and statistic. Folders are written by the suite's writers
(``tests/test_report_html.py``'s builders) and one value is then edited, as a hand-edited or damaged file holds it.
The study table ``tests/study/report.py`` holds the command's promises for the same inputs (exit, no traceback,
no warning, nothing overwritten); here the page itself is read back.
"""

from __future__ import annotations

import copy
import html
import json
import math
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tests.conftest import assert_one_line_error
from tests.test_report_html import (
    Page,
    campaign_folder,
    page_of,
    profile_folder,
    report_command,
    summary_rows,
    throughput_run,
)
from tests.test_telemetry_plot import _timeline
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.campaign.table import campaign_summary, campaign_table
from trainbench.render.plot import MAX_LINES, batch_size_figure
from trainbench.render.telemetry_plot import read_timeline, timeline_problems
from trainbench.report import gather as report_gather
from trainbench.report.found import short_names
from trainbench.report.gather import gather, write_new, write_report
from trainbench.report.html import render
from trainbench.report.sections.common import unique_labels
from trainbench.results.files import write_csv_atomic, write_json_atomic
from trainbench.results.layout import batch_file
from trainbench.results.records import BatchResult, Status
from trainbench.telemetry.schema import TELEMETRY_DIR, TELEMETRY_FIELDS, VARIABILITY_FILE


def edit(folder: Path, index: int, field: str, value: Any, name: str = "summary.json") -> None:
    """results[index].field of a summary set to ``value`` as raw JSON (NaN and Infinity as Python writes them)."""
    path = folder / name
    data = json.loads(path.read_text())
    data["results"][index][field] = value
    path.write_text(json.dumps(data))


def invalid_rows(page: Page) -> list[dict[str, str]]:
    return page.table("invalid", "reason")


def page_text(folders: list[Path], tmp_path: Path) -> tuple[Page, str]:
    """The page read back, and its text with the escapes undone (for the notes, which quote values)."""
    page, text = page_of(folders, tmp_path)
    return page, html.unescape(text)


# --- throughput runs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "shown"), [(math.nan, "nan"), (math.inf, "inf"), (-5.0, "-5"), ("fast", "fast"),
                                              (True, "yes")])
def test_a_rate_that_is_no_measurement_is_an_invalid_row_named_and_left_out(
        tmp_path: Path, value: Any, shown: str) -> None:
    good = throughput_run(tmp_path / "a")
    bad = throughput_run(tmp_path / "b")
    edit(bad, 0, "samples_per_sec", value)
    page, text = page_text([tmp_path], tmp_path)
    row = page.table("throughput", "samples_per_sec", 1)[0]
    assert (row["batch size"], row["status"], row["samples/s"]) == ("8", "invalid", shown)
    reason = f"{bad / 'summary.json'}: results[0].samples_per_sec is {value!r}, not a finite non-negative number"
    assert [(r["what"], r["reason"]) for r in invalid_rows(page)] == [("batch 8", reason)]
    assert "1 invalid value (NaN, infinite, negative or not a number) left out" in text
    assert f"1 invalid result (shaded) left out of the figure, and the run out of the comparisons: {reason}" in text
    # not a failure of the run; not compared, as trainbench compare refuses it, and the page says why
    assert all(r["status"] != "invalid" for r in page.table("failures", "reason"))
    # left out of the ranking and the comparisons; the run's other batch size stays in both
    assert sorted((row["source"], row["batch size"]) for row in page.table("headline", "rank")) == \
        [("a", "16"), ("a", "8"), ("b", "16")]
    pairs = [(row["A"], row["B"], *row["batch size: A -> B"].split(" -> "))
             for row in page.table("comparisons", "batch size: A -> B")]
    sides = {side for a, b, batch_a, batch_b in pairs for side in ((a, batch_a), (b, batch_b))}
    assert ("b", "16") in sides and ("b", "8") not in sides
    assert summary_rows(good)[0]["status"] == "ok"


def test_an_invalid_result_is_left_out_of_the_ranking_and_its_pairs(tmp_path: Path) -> None:
    first = throughput_run(tmp_path / "a")
    edit(first, 0, "samples_per_sec", math.nan)
    throughput_run(tmp_path / "b")
    data = gather([tmp_path])
    assert data.measured is not None
    assert list(zip(data.measured["source"], data.measured["batch_size"], strict=True)) == \
        [("a", 16), ("b", 8), ("b", 16)]


def test_the_spread_drawn_around_a_rate_is_checked_too(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "run")
    edit(run, 1, "samples_per_sec_max", "fast")
    data = gather([run])
    assert [row["status"] for row in data.runs[0].rows] == ["ok", "invalid", "oom"]
    assert data.runs[0].rows[1]["error"] == (f"{run / 'summary.json'}: results[1].samples_per_sec_max is 'fast', "
                                             "not a finite non-negative number")
    render(data)  # drawn without the invalid point: no ValueError from float("fast")


def test_a_figure_matplotlib_cannot_draw_is_one_line(tmp_path: Path) -> None:
    """1e308 images/s is finite, so a measurement to the results model, but overflows matplotlib's transforms; a
    max below the rate (a hand-edited file) would make an error bar point the wrong way."""
    throughput_run(tmp_path / "a")
    edit(throughput_run(tmp_path / "b"), 0, "samples_per_sec", 1e308)
    edit(throughput_run(tmp_path / "c"), 1, "samples_per_sec_max", 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page, _ = page_text([tmp_path], tmp_path)
    [why] = page.sections["throughput"]["absent"]
    assert why.startswith("The figure (images/s against batch size (64 px)) cannot be drawn: FloatingPointError: "
                          "overflow")
    assert len(page.tables("throughput", "samples_per_sec")) == 3  # the numbers are all there


def test_the_terminal_counts_what_was_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = throughput_run(tmp_path / "runs" / "run")
    edit(run, 0, "samples_per_sec", math.nan)
    edit(run, 1, "step_time_median_s", -1.0)
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "summary.json").write_text("{")
    done = report_command(capsys, str(tmp_path / "runs"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "left out, not readable: 1 file (named at the top of the page)",
        "left out of figures, comparisons and statistics: 2 invalid values (NaN, infinite, negative or not a number; "
        "listed under Invalid values)",
        str(tmp_path / "r.html")]


# --- campaigns and variability --------------------------------------------------------------------------------


def test_a_campaign_s_invalid_repetition_is_out_of_its_statistics(tmp_path: Path) -> None:
    campaign = campaign_folder(tmp_path / "campaign", {(1, 8): [100.0, 110.0, 90.0], (2, 8): [180.0, 170.0, 190.0]})
    edit(campaign / "run_1_torch_fp32_gpus1_b8_ret_0", 0, "samples_per_sec", math.nan)
    page, text = page_text([campaign], tmp_path)
    shown = page.table("campaigns", "scaling_efficiency")
    assert [(row["runs"], row["ok"], row["median samples/s"]) for row in shown] == \
        [("3", "2", "95"), ("3", "3", "180")]  # 100 and 90: the NaN repetition is neither counted nor averaged
    assert campaign_summary(campaign_table(campaign))["ok"].tolist() == [2, 3]
    assert "1 invalid result left out of the median, min, max, spread, CV and the figure: " \
           "run_1_torch_fp32_gpus1_b8_ret_0 batch 8: " in text
    assert [row["where"] for row in invalid_rows(page)] == ["campaign campaign: run_1_torch_fp32_gpus1_b8_ret_0"]


def test_a_campaign_run_whose_gpus_is_a_text_is_named(tmp_path: Path) -> None:
    campaign = campaign_folder(tmp_path / "campaign", {(1, 8): [100.0]})
    run_file = campaign / "run_0_torch_fp32_gpus1_b8_ret_0" / "campaign_run.json"
    run_file.write_text(run_file.read_text().replace('"gpus": 1', '"gpus": "two"'))
    throughput_run(tmp_path / "plain")
    data = gather([tmp_path])
    assert data.skipped == []  # the campaign is read; its table names the run file, as `campaign summary` does
    errors = data.campaigns[0].table.drop_duplicates("run_folder").set_index("run_folder")["error"]
    assert errors[run_file.parent.name] == f"{run_file}: values.gpus is 'two', not a whole number >= 1"


def test_a_variability_study_s_invalid_run_is_out_of_the_medians(tmp_path: Path) -> None:
    study = tmp_path / "study"
    study.mkdir()
    write_json_atomic(study / VARIABILITY_FILE, {"gpus": [{"index": 0}, {"index": 1}], "repetitions": 2})
    for gpu, repetition in ((0, 0), (0, 1), (1, 0), (1, 1)):
        (study / f"gpu{gpu}_rep{repetition}").mkdir()
        ThroughputRun(study / f"gpu{gpu}_rep{repetition}", {"framework": "torch"}).add(
            BatchResult(16, Status.OK, None, {"samples_per_sec": 100.0 + 10 * gpu + repetition}))
    edit(study / "gpu1_rep0", 0, "samples_per_sec", -1.0)
    page, text = page_text([study], tmp_path)
    medians = {row["gpu index"]: row["median samples/s"]
               for row in page.table("variability", "vs_median_pct")}
    assert medians == {"0": "100.5", "1": "111"}  # GPU 1: its one valid repetition
    assert "1 invalid result left out of the medians" in text
    assert invalid_rows(page)[0]["where"] == "variability study: gpu1_rep0"


# --- the other files the page reads ---------------------------------------------------------------------------


def test_telemetry_values_that_are_no_reading_are_named_and_not_drawn(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "run", batch_sizes=(32,))
    (run / TELEMETRY_DIR).mkdir()
    rows = _timeline(1000.0, 1, [(2, 5)])
    samples = [row for row in rows if row["event"] == "sample"]
    samples[0]["power_w"], samples[1]["power_w"], samples[2]["sm_clock_mhz"] = "hot", -3.0, math.inf
    path = batch_file(run / TELEMETRY_DIR, 32, ".csv")
    write_csv_atomic(path, TELEMETRY_FIELDS, rows)
    assert timeline_problems(run / TELEMETRY_DIR) == [
        f"{path}: sm_clock_mhz: 1 value not a finite non-negative number (first 'inf')",
        f"{path}: power_w: 2 values not a finite non-negative number (first 'hot')"]
    frame = read_timeline(run / TELEMETRY_DIR)
    read = frame[frame["event"] == "sample"]
    assert read["power_w"].isna().sum() == 2 and read["sm_clock_mhz"].isna().sum() == 1
    assert math.isfinite(read["sm_clock_mhz"].max()) and read["power_w"].min() > 0
    page, text = page_text([run], tmp_path)
    assert len(page.sections["telemetry"]["images"]) == 1  # drawn from the readings there are
    assert [row["what"] for row in invalid_rows(page)] == ["telemetry", "telemetry"]
    assert "2 columns with values that are no reading left out of the figure" in text


def test_training_lines_of_the_wrong_type_are_shaded_named_and_not_drawn(tmp_path: Path) -> None:
    folder = tmp_path / "train"
    folder.mkdir()
    epochs: list[Any] = [{"epoch": 1, "train_loss": 2.0, "eval_top1": 0.1}, {"epoch": 2, "train_loss": "low"},
                         "{cut in the middle", {"epoch": 3, "eval_top1": 1.5}, {"epoch": 4, "train_loss": math.nan}]
    (folder / "metrics.jsonl").write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in epochs))
    write_json_atomic(folder / "config.json", {"model": "resnet50", "batch_size": 256})  # model: not an object
    data = gather([tmp_path])
    training = data.trainings[0]
    metrics = folder / "metrics.jsonl"
    assert training.invalid == {1: f"{metrics}: line 2: train_loss is 'low', not a number",
                                2: f"{metrics}: line 4: eval_top1 is 1.5, not a fraction between 0 and 1"}
    assert training.left_out == [f"{metrics}: line 3: not a JSON object"]
    page = Page(render(data))
    assert [row["epoch"] for row in page.table("training", "epoch")] == ["1", "2", "3", "4"]
    assert len(page.sections["training"]["images"]) == 1  # epochs 1 and 4 (a diverged loss is a gap, not invalid)
    assert len(invalid_rows(page)) == 3


def test_a_model_with_a_value_of_the_wrong_type_is_left_out_named(tmp_path: Path) -> None:
    model = {"label": "torch", "metric": "step_time", "function": "0.1", "smape": 3.0, "adjusted_r2": 0.9,
             "rss": 0.1, "relative_error": 0.01, "values": 5}
    (tmp_path / "m").mkdir()
    write_json_atomic(tmp_path / "m" / "model.json", {"models": [
        model, {**model, "smape": "x"}, {**model, "predictions": 5}, {**model, "checks": [{"measured": "a"}]},
        {**model, "adjusted_r2": -math.inf}, "text"]})
    data = gather([tmp_path])
    path = tmp_path / "m" / "model.json"
    assert data.models[0].invalid == {1: f"{path}: models[1].smape is 'x', not a finite number",
                                      2: f"{path}: models[2].predictions is 5, not a list",
                                      3: f"{path}: models[3].checks[0].measured is 'a', not a finite number",
                                      4: f"{path}: models[4].adjusted_r2 is -inf, not a finite number",
                                      5: f"{path}: models[5] is 'text', not an object"}
    page = Page(render(data))
    assert len(page.table("models", "smape")) == 1
    assert len(invalid_rows(page)) == 5


def test_nsys_lists_of_the_wrong_type_are_left_out_named(tmp_path: Path) -> None:
    nsys = profile_folder(tmp_path / "profiled_data_nsys", "nsys", ("gpu_busy_fraction",),
                          {8: {"gpu_busy_fraction": 0.5}, 16: {"gpu_busy_fraction": 0.6}})
    write_json_atomic(batch_file(nsys, 8, ".timeline.json"), {"step_gpu_ms": [1.0, "x"], "top_kernels": [
        {"name": "gemm", "total_ns": 5.0, "instances": 1, "mean_ns": 5.0, "share": 1.0}]})
    write_json_atomic(batch_file(nsys, 16, ".timeline.json"), {"step_gpu_ms": [2.0], "top_kernels": [{"name": 1}]})
    data = gather([tmp_path])
    profile = data.profiles[0]
    assert profile.left_out == [f"{batch_file(nsys, 8, '.timeline.json')}: step_gpu_ms[1] is 'x', not a finite "
                                "non-negative number"]
    assert sorted(profile.step_gpu_ms) == [16] and sorted(profile.top_kernels) == [8, 16]
    page = Page(render(data))
    assert page.table("timeline", "total_ms", 1) == [{"name": "1", "total ms": "", "instances": "", "mean us": "",
                                                      "share": ""}]  # what is absent stays blank


@pytest.mark.parametrize(("env", "field"), [({"gpu": "H100"}, "gpu is 'H100'"), ({"gpu": {"gpus": 3}}, "gpu.gpus"),
                                            ({"framework": ["torch"]}, "framework"), ({"command": "x"}, "command")])
def test_an_env_json_of_the_wrong_shape_is_left_out_named(tmp_path: Path, env: dict[str, Any], field: str) -> None:
    run = throughput_run(tmp_path / "run")
    write_json_atomic(run / "env.json", env)
    data = gather([run])
    assert data.environments == [] and len(data.skipped) == 1
    assert data.skipped[0].startswith(f"{run / 'env.json'}: {field}")


# --- a hostile tester: every value of every file replaced -----------------------------------------------------


def _world(root: Path) -> Path:
    """One of everything the page reads, by the suite's writers."""
    run = throughput_run(root / "runs" / "a", data="/data/x")
    throughput_run(root / "runs" / "b")
    (run / TELEMETRY_DIR).mkdir()
    write_csv_atomic(batch_file(run / TELEMETRY_DIR, 8, ".csv"), TELEMETRY_FIELDS, _timeline(10.0, 2, [(2, 5)]))
    nsys = profile_folder(root / "profiled_data_nsys", "nsys", ("gpu_busy_fraction",), {8: {"gpu_busy_fraction": 0.5}})
    write_json_atomic(batch_file(nsys, 8, ".timeline.json"), {"step_gpu_ms": [1.0, 2.0], "top_kernels": [
        {"name": "gemm", "total_ns": 5.0, "instances": 1, "mean_ns": 5.0, "share": 1.0}]})
    campaign_folder(root / "campaign", {(1, 8): [100.0, 90.0], (2, 8): [150.0, 160.0]})
    (root / "m").mkdir()
    write_json_atomic(root / "m" / "model.json", {"models": [{
        "label": "t", "metric": "step_time", "smape": 1.0, "adjusted_r2": 0.9, "values": 5,
        "predictions": [{"at": {"batch_size": 4}, "value": 0.2, "extrapolated": []}],
        "checks": [{"at": {"batch_size": 2}, "measured": 0.1, "predicted": 0.1}]}]})
    (root / "t").mkdir()
    (root / "t" / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "train_loss": 2.0, "eval_top1": 0.1}) + "\n")
    (root / "t" / "failures.jsonl").write_text(json.dumps({"batch_size": 8, "status": "oom", "error": "out of memory",
                                                           "epochs_finished": 1}) + "\n")
    write_json_atomic(root / "t" / "config.json", {"model": {"framework": "tf"}, "batch_size": 8, "data": "/d"})
    return root


def _replaced(content: Any, value: Any, depth: int | None = None) -> Any:
    """The leaves of a JSON value (``depth`` None), or every value ``depth`` levels down (lists and objects
    included), replaced by ``value``; the format version kept, so that the file is still read."""
    if depth == 0:
        return value
    below = None if depth is None else depth - 1
    if isinstance(content, dict):
        return {key: item if key == "format" else _replaced(item, value, below) for key, item in content.items()}
    if isinstance(content, list):
        return [_replaced(item, value, below) for item in content]
    return value if depth is None else content


def _hostile(content: Any, value: Any, how: str) -> Any:
    """``content`` with ``value`` put in as ``how`` says: "leaves", "depth N", or "results": every result's
    leaves but its batch size and status (so that the results stay readable and their values reach the page)."""
    if how == "results" and isinstance(content, dict) and isinstance(content.get("results"), list):
        keep = ("batch_size", "status")
        return {**content, "results": [{key: item if key in keep else _replaced(item, value)
                                        for key, item in row.items()} for row in content["results"]]}
    if how.startswith("depth"):
        return _replaced(content, value, int(how.split()[1]))
    return _replaced(content, value)


HOSTILE = ["x", None, -1, math.nan, math.inf, [], {}, True, [1, "a"], {"a": [None]}]
WAYS = ("leaves", "results", "depth 1", "depth 2", "depth 3", "depth 4")
QUICK = ("x",)  # the value tried outside the slow tests


@pytest.mark.parametrize("value", [pytest.param(value, marks=[] if value in QUICK else [pytest.mark.slow])
                                   for value in HOSTILE], ids=[repr(value) for value in HOSTILE])
def test_no_value_of_any_type_anywhere_costs_the_page(tmp_path: Path, value: Any) -> None:
    """Every JSON file the page reads with one hostile value put in everywhere, in each of the ``WAYS``: the page
    is made (or nothing is left to report), no exception, no warning."""
    root = _world(tmp_path / "world")
    originals = {path: json.loads(path.read_text()) for path in root.rglob("*.json")}
    lines = {path: [json.loads(line) for line in path.read_text().splitlines()] for path in root.rglob("*.jsonl")}
    for how in WAYS:
        for path, content in originals.items():
            path.write_text(json.dumps(_hostile(copy.deepcopy(content), value, how)))
        for path, rows in lines.items():
            path.write_text("".join(json.dumps(_hostile(copy.deepcopy(row), value, how)) + "\n" for row in rows))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            data = gather([root])
            if not data.empty():
                Page(render(data))


# --- many runs ------------------------------------------------------------------------------------------------


def test_a_legend_stands_beside_the_axes_and_at_most_max_lines_are_drawn() -> None:
    results = [{"batch_size": 8, "status": "ok", "v": 1.0}, {"batch_size": 16, "status": "ok", "v": 2.0},
               {"batch_size": 32, "status": "oom"}]
    lines = {f"a long label of a run's settings and its folder, number {i}": (results, "v") for i in range(200)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's layout and legend warnings included
        figure = batch_size_figure(lines, "many", "images/s", width=10)
        FigureCanvasAgg(figure).draw()
    axes = figure.axes[0]
    legend = axes.get_legend()
    assert len(axes.get_lines()) == MAX_LINES + 1  # the lines and the failure mark
    assert legend.get_title().get_text() == f"first {MAX_LINES} of 200 drawn"
    renderer = figure.canvas.get_renderer()
    box, frame = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
    assert box.x0 >= frame.x1  # beside, never over the lines
    assert box.x1 <= figure.bbox.x1 + 1  # and inside the picture


@pytest.mark.slow
def test_a_report_of_200_runs_says_what_its_figure_leaves_out(tmp_path: Path) -> None:
    for index in range(200):
        throughput_run(tmp_path / "runs" / f"run{index:03d}", batch_sizes=(8,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page, text = page_text([tmp_path / "runs"], tmp_path)
    assert "The figure draws the first 10 of the 200 runs" in text
    assert "19900 pairs of rows measure the same settings" in text  # 200 x 199 / 2, none compared
    assert len(page.tables("throughput", "samples_per_sec")) == 200


# --- -o -------------------------------------------------------------------------------------------------------


def test_o_a_folder_writes_report_html_inside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = throughput_run(tmp_path / "run")
    (tmp_path / "out").mkdir()
    first = report_command(capsys, str(run), "-o", str(tmp_path / "out"))
    second = report_command(capsys, str(run), "-o", str(tmp_path / "out") + "/")
    assert first.stdout.strip().splitlines()[-1] == str(tmp_path / "out" / "report.html")
    assert second.stdout.strip().splitlines()[-1] == str(tmp_path / "out" / "report-1.html")
    assert (tmp_path / "out" / "ranking.csv").is_file() and (tmp_path / "out" / "ranking-1.csv").is_file()
    assert not (tmp_path / "out-1").exists()


@pytest.mark.parametrize(("output", "fragments"), [("missing/r.html", ("missing/r.html", "does not exist")),
                                                   ("new/", ("-o", "new/", "no such folder")),
                                                   ("file/r.html", ("file", "is a file"))])
def test_o_nowhere_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str,
                                              fragments: tuple[str, ...]) -> None:
    (tmp_path / "file").write_text("x")
    assert_one_line_error(report_command(capsys, str(tmp_path / "nothing-here"), "-o", f"{tmp_path}/{output}"),
                          *fragments)  # the folder does not exist either: -o is checked first
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]


def test_a_name_taken_while_the_page_was_made_is_not_overwritten(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.html"
    real_link = os.link

    def taken_just_before(source: Path, name: Path) -> None:
        if Path(name) == target and not target.exists():
            target.write_text("another process's report")  # created after any check, before the link
        real_link(source, name)

    monkeypatch.setattr(report_gather.os, "link", taken_just_before)
    assert write_new(target, "page") == tmp_path / "r-1.html"
    assert target.read_text() == "another process's report" and (tmp_path / "r-1.html").read_text() == "page"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["r-1.html", "r.html"]  # no temporary left


def test_without_hard_links_the_name_is_still_created_exclusively(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(source: Path, name: Path) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(report_gather.os, "link", no_links)
    (tmp_path / "r.html").write_text("kept")
    assert write_new(tmp_path / "r.html", "page") == tmp_path / "r-1.html"
    assert (tmp_path / "r.html").read_text() == "kept" and (tmp_path / "r-1.html").read_text() == "page"


def test_write_report_into_a_folder(tmp_path: Path) -> None:
    run = throughput_run(tmp_path / "run")
    assert write_report([run], tmp_path) == tmp_path / "report.html"


def test_runs_in_folders_of_the_same_name_are_told_apart(tmp_path: Path) -> None:
    """Two runs both in a folder called run: the page names them by as much of their path as tells them apart,
    so that neither's line in the figure nor its heading is taken for the other's."""
    for parent in ("a", "b"):
        throughput_run(tmp_path / parent / "run")
    throughput_run(tmp_path / "c" / "x")
    data = gather([tmp_path])
    assert [run.name for run in data.runs] == ["a/run", "b/run", "x"]
    page = Page(render(data))
    assert len(page.tables("throughput", "samples_per_sec")) == 3
    assert short_names([Path("/r/a/run"), Path("/r/b/run"), Path("/s/a/run")]) == {
        Path("/r/a/run"): "r/a/run", Path("/r/b/run"): "b/run", Path("/s/a/run"): "s/a/run"}
    lines = {label: (run.rows, "samples_per_sec") for label, run in zip(unique_labels(data.runs), data.runs,
                                                                         strict=True)}
    assert len(lines) == 3  # one line each in the figure


def test_a_campaign_s_second_folder_of_one_run_is_not_counted_and_says_so(tmp_path: Path) -> None:
    campaign = campaign_folder(tmp_path / "campaign", {(1, 8): [100.0, 110.0]})
    first = campaign / "run_0_torch_fp32_gpus1_b8_ret_0"
    shutil.copytree(first, campaign / "run_0_torch_fp32_gpus1_b8_ret_1")  # a requeued task finished it again
    os.utime(first / "summary.json", (1, 1))  # the older result
    page, text = page_text([campaign], tmp_path)
    assert [row["runs"] for row in page.table("campaigns", "scaling_efficiency")] == ["2"]
    assert "Not counted: run_0_torch_fp32_gpus1_b8_ret_0 left out: a second finished folder" in text
