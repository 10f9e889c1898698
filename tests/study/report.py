"""``trainbench report`` under bad, odd and hostile input: values that are no measurement in every file the page
reads, files of the wrong shape, 200 runs at once, and ``-o`` pointing at folders, taken names and nowhere.

Runs, campaigns and variability studies are written by the suite's own writers (``ThroughputRun`` through
``tests/test_report_html.py``'s builders) and then one value is edited as a hostile or unlucky file would hold it
(NaN, Infinity, a negative rate, a text). A case that makes a page writes it under ``{w}/pages`` with a name of its
own; what the page shows is checked by ``tests/test_report_invalid.py``, here the command's promise: exit status,
the lines it prints, no traceback, no warning, nothing existing changed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from tests.study import StudyCase
from tests.test_report_html import campaign_folder, throughput_run
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.results.files import write_json_atomic
from trainbench.results.layout import batch_file
from trainbench.results.records import BatchResult, Status
from trainbench.telemetry.schema import TELEMETRY_DIR, TELEMETRY_FIELDS, VARIABILITY_FILE

MANY = 200  # runs in one report: the figure's legend and matplotlib's warnings


def _edit(folder: Path, index: int, field: str, value: Any, name: str = "summary.json") -> None:
    """Set results[index].field of a summary as raw JSON (NaN and Infinity included)."""
    path = folder / name
    data = json.loads(path.read_text())
    data["results"][index][field] = value
    path.write_text(json.dumps(data, indent=2))


def _edited_run(world: Path, name: str, field: str, value: Any, index: int = 0) -> None:
    _edit(throughput_run(world / name / "run"), index, field, value)


def _telemetry(world: Path) -> None:
    """A run whose telemetry/batch_8.csv holds a text, an infinite and a negative reading."""
    run = throughput_run(world / "telemetry" / "run", batch_sizes=(8,))
    (run / TELEMETRY_DIR).mkdir()
    rows = [{"time_s": 100.0 + 0.5 * tick, "event": "sample", "phase": "timed", "window": 0, "gpu": 0,
             "sm_clock_mhz": 1980, "power_w": 300.0, "temperature_c": 60} for tick in range(10)]
    rows[2]["power_w"], rows[3]["sm_clock_mhz"], rows[4]["temperature_c"] = "hot", "inf", -40
    lines = [",".join(TELEMETRY_FIELDS)] + [",".join(str(row.get(name, "")) for name in TELEMETRY_FIELDS)
                                            for row in rows]
    batch_file(run / TELEMETRY_DIR, 8, ".csv").write_text("\n".join(lines) + "\n")


def _training(folder: Path, rows: list[Any], config: dict[str, Any] | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                                                  for row in rows))
    write_json_atomic(folder / "config.json", config or {"model": {"framework": "torch"}, "epochs": 3})


def _epoch(epoch: Any, **values: Any) -> dict[str, Any]:
    return {"epoch": epoch, "train_loss": 2.0, "eval_loss": 2.1, "eval_top1": 0.2, "eval_top5": 0.5,
            "train_images_per_sec": 50.0, "train_s": 10.0, "learning_rate_end": 0.1, **values}


def _model(folder: Path, models: Any) -> None:
    folder.mkdir(parents=True)
    write_json_atomic(folder / "model.json", {"models": models})


def _a_model(**values: Any) -> dict[str, Any]:
    return {"label": "torch | train step", "metric": "step_time", "function": "0.1 + 0.002 * batch_size",
            "smape": 3.2, "adjusted_r2": 0.99, "rss": 0.001, "relative_error": 0.02, "values": 25,
            "predictions": [{"at": {"batch_size": 64}, "value": 0.228}], **values}


def _nsys(folder: Path, steps: Any, kernels: Any) -> None:
    """An nsys profile folder (as ``trainbench profile nsys`` leaves it) whose timeline summary holds the given
    per-step times and top kernels."""
    folder.mkdir(parents=True)
    results = [BatchResult(8, Status.OK, None, {"profiler": "nsys", "gpu_busy_fraction": 0.8}).to_row()]
    write_json_atomic(folder / "profile.json", {"profiler": "nsys", "model": {"framework": "torch"},
                                                "results": results})
    write_json_atomic(batch_file(folder, 8, ".timeline.json"), {"step_gpu_ms": steps, "top_kernels": kernels})


def _variability(folder: Path, rate: Any) -> None:
    """A variability study of two GPUs, two repetitions each; GPU 1's first repetition holds ``rate``."""
    folder.mkdir(parents=True)
    gpus = [{"index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H100"} for index in range(2)]
    write_json_atomic(folder / VARIABILITY_FILE, {"host": "node7", "gpus": gpus, "repetitions": 2})
    for gpu in range(2):
        for repetition in range(2):
            run = folder / f"gpu{gpu}_rep{repetition}"
            run.mkdir()
            ThroughputRun(run, {"framework": "torch"}).add(
                BatchResult(16, Status.OK, None, {"samples_per_sec": 100.0 + gpu + repetition}))
    _edit(folder / "gpu1_rep0", 0, "samples_per_sec", rate)


def build(world: Path) -> None:
    (world / "pages").mkdir()
    throughput_run(world / "good" / "run")
    for name, field, value in (("nan", "samples_per_sec", math.nan), ("inf", "samples_per_sec", math.inf),
                               ("negative", "samples_per_sec", -5.0), ("text", "samples_per_sec", "fast"),
                               ("bool", "samples_per_sec", True), ("min_text", "samples_per_sec_min", "slow"),
                               ("windows_text", "window_samples_per_sec", ["a", 1.0]),
                               ("step_nan", "step_time_median_s", math.nan), ("null_rate", "samples_per_sec", None),
                               ("batch_text", "batch_size", "8"), ("energy_negative", "energy_j", -1.0),
                               ("huge", "samples_per_sec", 1e308), ("max_below", "samples_per_sec_max", 1.0)):
        _edited_run(world, name, field, value)
    (world / "results_object" / "run").mkdir(parents=True)
    (world / "results_object" / "run" / "summary.json").write_text('{"format": 2, "results": {"a": 1}}')
    (world / "deep" / "run").mkdir(parents=True)
    (world / "deep" / "run" / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    throughput_run(world / "deep" / "good")
    _telemetry(world)
    _training(world / "train_bad" / "t", [_epoch(1), _epoch(2, train_loss="x"), "{not json", _epoch("three"),
                                          _epoch(4, eval_top1=1.5), _epoch(5, train_s=-1.0), _epoch(6)],
              {"model": "resnet", "epochs": "many"})
    _training(world / "train_diverged" / "t", [_epoch(1), _epoch(2, train_loss=math.nan, eval_loss=math.inf)])
    _model(world / "model_bad" / "m", [_a_model(), _a_model(smape="x"), _a_model(predictions=5), "a model",
                                       _a_model(adjusted_r2=-math.inf)])
    _model(world / "model_not_list" / "m", "x")
    _nsys(world / "nsys_bad" / "profiled_data_nsys", ["x", 1.0], "top")
    _nsys(world / "nsys_kernels" / "profiled_data_nsys", [17.5, 18.0], [{"name": "gemm", "total_ns": "long"}])
    campaign = campaign_folder(world / "campaign_nan", {(1, 8): [100.0, 110.0, 90.0], (2, 8): [180.0, 170.0]})
    _edit(campaign / "run_1_torch_fp32_gpus1_b8_ret_0", 0, "samples_per_sec", math.nan)
    (world / "campaign_gpus_text").mkdir()
    campaign = campaign_folder(world / "campaign_gpus_text" / "campaign", {(1, 8): [100.0]})
    run_file = campaign / "run_0_torch_fp32_gpus1_b8_ret_0" / "campaign_run.json"
    run_file.write_text(run_file.read_text().replace('"gpus": 1', '"gpus": "two"'))
    throughput_run(world / "campaign_gpus_text" / "plain")
    _variability(world / "variability_nan" / "study", math.nan)
    throughput_run(world / "env_bad" / "run")
    write_json_atomic(world / "env_bad" / "run" / "env.json", {"gpu": "H100", "hostname": "node7"})
    throughput_run(world / "png_folder" / "run")
    (world / "png_folder" / "run" / "figure.png").mkdir()
    throughput_run(world / "loop" / "run")
    (world / "loop" / "run" / "up").symlink_to("..")
    for index in range(MANY):
        throughput_run(world / "many" / f"run{index:03d}", batch_sizes=(8,))
    (world / "empty").mkdir()
    (world / "outdir").mkdir()
    (world / "taken").mkdir()
    (world / "taken" / "report.html").write_text("a report kept")
    (world / "existing.html").write_text("kept")
    os.symlink(world / "nowhere.html", world / "dangling.html")


def _page(case: str, *folders: str, expect: tuple[str, ...] = (), absent: tuple[str, ...] = (),
          kind: str = "silent-wrong", slow: bool = False) -> StudyCase:
    """``report FOLDERS -o {w}/pages/CASE.html``: a page made (exit 0), its path the last line."""
    return StudyCase(case, ("report", *(f"{{w}}/{folder}" for folder in folders), "-o", f"{{w}}/pages/{case}.html"),
                     (*expect, f"{{w}}/pages/{case}.html"), exit=0, absent=absent, writes=True, kind=kind, slow=slow)


INVALID_ONE = "1 invalid value (NaN, infinite, negative or not a number"
ALL_RIGHT = ("invalid value", "left out")

CASES: list[StudyCase] = [
    _page("baseline", "good", absent=ALL_RIGHT, kind="baseline"),
    # a rate or time that no run measures: marked invalid, counted, never an "ok" row or a traceback
    _page("rate_nan", "good", "nan", expect=(INVALID_ONE,)),
    _page("rate_inf", "inf", expect=(INVALID_ONE,)),
    _page("rate_negative", "negative", expect=(INVALID_ONE,)),
    _page("rate_text", "text", expect=(INVALID_ONE,), kind="traceback"),
    _page("rate_true", "bool", expect=(INVALID_ONE,)),
    _page("spread_text", "min_text", expect=(INVALID_ONE,), kind="traceback"),
    _page("window_text", "windows_text", expect=(INVALID_ONE,), kind="traceback"),
    _page("step_time_nan", "step_nan", expect=(INVALID_ONE,)),
    _page("energy_negative", "energy_negative", expect=(INVALID_ONE,)),
    _page("rate_not_measured", "null_rate", absent=("invalid value",), kind="check"),
    _page("rate_near_the_float_limit", "good", "huge", absent=ALL_RIGHT, kind="traceback"),
    _page("spread_not_around_the_rate", "max_below", absent=ALL_RIGHT, kind="traceback"),
    _page("every_kind_at_once", "good", "nan", "inf", "negative", "text",
          expect=("4 invalid values (NaN, infinite, negative or not a number",)),
    # the other files the page reads
    _page("telemetry_values", "telemetry", expect=("3 invalid values",), kind="traceback"),
    _page("training_values", "train_bad", expect=("5 invalid values",), kind="traceback"),
    _page("training_diverged", "train_diverged", absent=ALL_RIGHT, kind="check"),
    _page("model_values", "model_bad", expect=("4 invalid values",), kind="traceback"),
    _page("nsys_lists", "nsys_bad", expect=("2 invalid values",), kind="traceback"),
    _page("nsys_kernel_text", "nsys_kernels", expect=(INVALID_ONE,), kind="traceback"),
    _page("campaign_rate_nan", "campaign_nan", expect=(INVALID_ONE,)),
    _page("campaign_axis_text", "campaign_gpus_text", absent=("not readable",), kind="traceback"),
    _page("variability_rate_nan", "variability_nan", expect=(INVALID_ONE,)),
    _page("env_shape", "env_bad", expect=("left out, not readable: 1 file",), kind="traceback"),
    _page("json_nested_deep", "deep", expect=("left out, not readable: 1 file",), kind="traceback"),
    _page("a_folder_named_png", "png_folder", absent=ALL_RIGHT, kind="traceback"),
    _page("symlink_loop", "loop", absent=ALL_RIGHT, kind="odd-path"),
    _page("same_folder_twice", "good", "good/run", absent=ALL_RIGHT, kind="odd-path"),
    _page("runs_200", "many", absent=ALL_RIGHT, kind="warning", slow=True),
    # nothing to report: one line naming the file and the field
    StudyCase("batch_size_text", ("report", "{w}/batch_text", "-o", "{w}/pages/x.html"),
              ("nothing to report", "{w}/batch_text/run/summary.json", "batch_size"), kind="bad-value"),
    StudyCase("results_not_a_list", ("report", "{w}/results_object", "-o", "{w}/pages/x.html"),
              ("nothing to report", "{w}/results_object/run/summary.json"), kind="bad-value"),
    StudyCase("models_not_a_list", ("report", "{w}/model_not_list", "-o", "{w}/pages/x.html"),
              ("nothing to report", "models is 'x'"), kind="bad-value"),
    StudyCase("empty_folder", ("report", "{w}/empty", "-o", "{w}/pages/x.html"),
              ("{w}/empty", "nothing to report"), kind="bad-input"),
    StudyCase("no_such_folder", ("report", "{w}/missing"), ("{w}/missing", "no such folder"), kind="bad-input"),
    StudyCase("a_file_for_a_folder", ("report", "{w}/existing.html"), ("{w}/existing.html", "a file"),
              kind="bad-input"),
    StudyCase("unknown_option", ("report", "{w}/good", "--title", "x"), ("--title",), kind="bad-option"),
    StudyCase("empty_output", ("report", "{w}/good", "-o", ""), ("-o",), kind="bad-option"),
    # -o: a folder gets report.html inside; nothing is ever overwritten; nowhere is refused before any work
    StudyCase("output_a_folder", ("report", "{w}/good", "-o", "{w}/outdir"), ("{w}/outdir/report.html",), exit=0,
              absent=("outdir-1",), writes=True, kind="silent-option"),
    StudyCase("output_a_folder_with_a_report", ("report", "{w}/good", "-o", "{w}/taken"),
              ("{w}/taken/report-1.html",), exit=0, writes=True, kind="overwrite"),
    StudyCase("output_an_existing_file", ("report", "{w}/good", "-o", "{w}/existing.html"),
              ("{w}/existing-1.html",), exit=0, writes=True, kind="overwrite"),
    StudyCase("output_a_dangling_link", ("report", "{w}/good", "-o", "{w}/dangling.html"),
              ("{w}/dangling-1.html",), exit=0, writes=True, kind="overwrite"),
    StudyCase("output_in_a_missing_folder", ("report", "{w}/good", "-o", "{w}/missing/r.html"),
              ("-o {w}/missing/r.html", "does not exist"), kind="odd-path"),
    StudyCase("output_a_missing_folder", ("report", "{w}/good", "-o", "{w}/new/"), ("-o {w}/new/", "no such folder"),
              kind="odd-path"),
    StudyCase("output_under_a_file", ("report", "{w}/good", "-o", "{w}/existing.html/r.html"),
              ("{w}/existing.html", "is a file"), kind="odd-path"),
]
