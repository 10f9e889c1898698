"""Performance models (``trainbench model``) fitted by the real Extra-P (.venv-extrap, made by the Makefile)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench.analysis import extrap
from trainbench.analysis.measurements import COLUMNS, GPU_STEP, KERNEL_PREFIX, TRAIN_STEP, collect, gather, run_settings
from trainbench.analysis.perf_models import Model, check, curve, evaluate, fit, measured, split_out, value_at
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.cli.main import main
from trainbench.errors import UsageError
from trainbench.results.files import write_json_atomic
from trainbench.results.records import BatchResult, Status

BATCHES, GPUS = (8, 16, 32, 64, 128), (1, 2, 4, 8, 16)


def known(batch_size: float, gpus: float) -> float:
    return 0.012 + 0.0021 * batch_size + 0.004 * math.log2(gpus)


def points_of(function, parameters: dict[str, tuple[float, ...]], noise: float = 0.02, repetitions: int = 5,
              seed: int = 0) -> pd.DataFrame:
    """A tidy measurements table: every combination of the parameters' values, repetitions with relative noise."""
    rng = np.random.default_rng(seed)
    names = list(parameters)
    grid = pd.MultiIndex.from_product(list(parameters.values()), names=names).to_frame(index=False)
    rows = []
    for _, at in grid.iterrows():
        true = function(**at.to_dict())
        for _ in range(repetitions):
            rows.append({"config": "synthetic", "region": TRAIN_STEP, "batch_size": 32, "gpus": 1, "image_size": 224,
                         **at.to_dict(), "metric": "step_time", "value": true * (1 + rng.normal(0, noise)),
                         "source": "generated"})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def terms(function: str) -> set[str]:
    """The non-constant terms of an Extra-P function text: 'c + c * x^(1) + c * log2(y)^(1)' -> {x^(1), ...}."""
    return {part.split(" * ", 1)[1].strip() for part in function.replace(" - ", " + ").split(" + ") if " * " in part}


def test_a_known_function_is_recovered_with_its_true_terms() -> None:
    """0.012 + 0.0021 b + 0.004 log2 g, 5 repetitions with 2 % noise: the true terms, and within 5 % everywhere."""
    (model,) = fit(points_of(known, {"batch_size": BATCHES, "gpus": GPUS}), ["batch_size", "gpus"], ["step_time"])
    assert terms(model.function) == {"batch_size^(1)", "log2(gpus)^(1)"}
    for batch in BATCHES:
        for gpus in GPUS:
            assert model(batch_size=batch, gpus=gpus) == pytest.approx(known(batch, gpus), rel=0.05)
    assert model.smape < 5 and model.adjusted_r2 > 0.99 and model.values == 125
    assert model.points == {"batch_size": [float(b) for b in BATCHES], "gpus": [float(g) for g in GPUS]}
    assert model.warnings == []


def test_strong_scaling_finds_the_negative_exponent() -> None:
    """A fixed global batch split over g GPUs: 0.01 + 2 / g. Only with negative exponents allowed is it found."""
    points = points_of(lambda gpus: 0.01 + 2.0 / gpus, {"gpus": (1, 2, 4, 8, 16, 32)})
    (strong,) = fit(points, ["gpus"], ["step_time"], strong_scaling=True)
    (plain,) = fit(points, ["gpus"], ["step_time"])
    assert terms(strong.function) == {"gpus^(-1)"}
    assert strong(gpus=64) == pytest.approx(0.01 + 2 / 64, rel=0.1)
    assert strong.smape < 5 < plain.smape


def test_predictions_say_when_they_extrapolate() -> None:
    points = points_of(known, {"batch_size": BATCHES, "gpus": GPUS})
    requests = [{"batch_size": 512, "gpus": 16}, {"batch_size": 64, "gpus": 4}, {"gpus": 2}]
    (model,) = fit(points, ["batch_size", "gpus"], ["step_time"], requests=requests)
    far, inside = model.predictions  # the request without batch_size names another set of parameters
    assert far.extrapolated == ["batch_size"] and inside.extrapolated == []
    assert far.value == pytest.approx(known(512, 16), rel=0.05)
    assert inside.value == pytest.approx(model(batch_size=64, gpus=4))


def test_a_point_left_out_is_predicted_and_compared() -> None:
    points = points_of(known, {"batch_size": (*BATCHES, 256), "gpus": GPUS})
    fitted, held = split_out(points, [{"batch_size": 256}])
    assert set(held["batch_size"]) == {256} and 256 not in set(fitted["batch_size"])
    (model,) = fit(fitted, ["batch_size", "gpus"], ["step_time"])
    model = check(model, held)
    assert len(model.checks) == len(GPUS)
    for held_point in model.checks:
        assert held_point.extrapolated == ["batch_size"]
        truth = known(256, held_point.at["gpus"])
        assert held_point.measured == pytest.approx(truth, rel=0.05)
        assert held_point.relative_error == pytest.approx(held_point.predicted / held_point.measured - 1)
        assert abs(held_point.relative_error) < 0.1


def test_few_points_and_a_constant_parameter_are_warned_about() -> None:
    points = points_of(lambda batch_size: 0.01 + 0.002 * batch_size, {"batch_size": (8, 16, 32)})
    (model,) = fit(points, ["batch_size", "gpus"], ["step_time"])
    assert model.parameters == ["batch_size"]
    assert any("gpus takes one value" in warning for warning in model.warnings)
    assert any("3 measured values, fewer than Extra-P's minimum of 5" in warning for warning in model.warnings)


def test_each_configuration_gets_its_own_model() -> None:
    slow = points_of(lambda batch_size: 0.02 + 0.004 * batch_size, {"batch_size": BATCHES})
    fast = points_of(lambda batch_size: 0.01 + 0.001 * batch_size, {"batch_size": BATCHES}).assign(config="fast")
    models = fit(pd.concat([slow, fast]), ["batch_size"], ["step_time"])
    by_config = {model.config: model for model in models}
    assert by_config["fast"](batch_size=64) == pytest.approx(0.01 + 0.064, rel=0.05)
    assert by_config["synthetic"](batch_size=64) == pytest.approx(0.02 + 0.256, rel=0.05)


def test_plot_tables_follow_the_model_and_the_measurements() -> None:
    points = points_of(known, {"batch_size": BATCHES, "gpus": (1, 4)})
    (model,) = fit(points, ["batch_size", "gpus"], ["step_time"])
    table = measured(model, points)
    assert len(table) == 10 and (table["count"] == 5).all()
    assert (table["min"] <= table["median"]).all() and (table["median"] <= table["max"]).all()
    line = curve(model)
    assert set(line["gpus"]) == {1.0, 4.0} and line["batch_size"].min() == 8 and line["batch_size"].max() == 128
    row = line.iloc[7]
    assert row["value"] == pytest.approx(model(batch_size=row["batch_size"], gpus=row["gpus"]))


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "gpus.real", "open('x')", "[1][0]",
                                        "gpus if gpus else 1"])
def test_model_functions_are_evaluated_never_executed(expression: str) -> None:
    with pytest.raises(ValueError, match="not a model function"):
        evaluate(expression, {"gpus": 2.0})


def test_extra_p_s_python_form_evaluates() -> None:
    assert evaluate("0.5+2*batch_size**(1)*log2(gpus)**(2)-gpus**(-1)", {"batch_size": 3, "gpus": 4}) == \
        pytest.approx(0.5 + 2 * 3 * 4 - 0.25)


# --- from run folders -------------------------------------------------------------------------------------------


def write_run(folder: Path, rates: dict[int, list[float]], world: int = 1, framework: str = "torch") -> Path:
    """A throughput run folder as the suite writes it (ThroughputRun), with each batch size's window rates."""
    header = {"framework": framework, "precision": "fp32", "image_size": 64, "data": "synthetic", "device": "cpu",
              "model": {"framework": framework, "compile": False}, "launch": {"processes_per_node": world}}
    (folder / "logs").mkdir(parents=True)  # as create_run_dir leaves a run folder
    store = ThroughputRun(folder, header)
    for batch, windows in rates.items():
        store.add(BatchResult(batch, Status.OK, None, {"samples_per_sec": sum(windows) / len(windows),
                                                       "window_samples_per_sec": windows, "world_size": world}))
    store.add(BatchResult.failed(999, Status.OOM, "out of memory"))
    return folder


def test_gather_keeps_every_window_and_skips_unfinished_campaign_runs(tmp_path: Path) -> None:
    write_run(tmp_path / "run_0_a_ret_0", {8: [100.0, 80.0], 16: [160.0]}, world=2)
    write_run(tmp_path / "run_1_a_inprogress", {8: [1.0]})
    table = gather([tmp_path])
    steps = table[table["metric"] == "step_time"].sort_values(["batch_size", "value"])
    assert steps["batch_size"].tolist() == [8, 8, 16] and (steps["gpus"] == 2).all()
    assert steps["value"].tolist() == pytest.approx([8 * 2 / 100, 8 * 2 / 80, 16 * 2 / 160])
    assert set(table["config"]) == {"torch fp32 cpu synthetic"} and (table["image_size"] == 64).all()


def test_nsys_profiles_give_step_and_kernel_regions(tmp_path: Path) -> None:
    profile = tmp_path / "profiled_data_nsys"
    profile.mkdir()
    results = []
    for batch in (8, 16):
        kernels = [{"name": f"k{i}", "total_ns": batch * 1e6 * (i + 1), "instances": 3} for i in range(7)]
        write_json_atomic(profile / f"batch_{batch}.timeline.json",
                          {"step_gpu_ms": [batch * 1.0, batch * 1.1], "top_kernels": kernels})
        results.append(BatchResult(batch, Status.OK, None, {"gpu_busy_fraction": 0.5}).to_row())
    write_json_atomic(profile / "profile.json", {"profiler": "nsys", "model": {"framework": "torch",
                      "precision": "bf16", "device": "cuda", "image_size": 224}, "results": results})
    table = gather([tmp_path])
    step = table[table["region"] == GPU_STEP]
    assert sorted(step["value"]) == pytest.approx([0.008, 0.0088, 0.016, 0.0176])
    kernels = sorted(set(table["region"]) - {GPU_STEP})
    assert kernels == [f"{KERNEL_PREFIX}k{i}" for i in range(2, 7)]  # the five with the most time
    k6 = table[(table["region"] == f"{KERNEL_PREFIX}k6") & (table["batch_size"] == 16)]["value"]
    assert k6.tolist() == pytest.approx([16e6 * 7 / 1e9 / 2])  # GPU time per step
    assert table["config"].iloc[0] == "torch bf16 cuda synthetic under nsys"


# --- the command ----------------------------------------------------------------------------------------------


def test_model_command_writes_model_json_plot_and_extrap_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rates = {b: [b / (0.02 + 0.001 * b) * (1 + rng.normal(0, 0.01)) for _ in range(3)] for b in (2, 4, 8, 16, 32)}
    write_run(tmp_path / "runs" / "one", rates)
    write_run(tmp_path / "runs" / "two", {64: [64 / (0.02 + 0.064)] * 3})
    done = run_cli("model", str(tmp_path / "runs"), "--predict", "batch_size=64", "--leave-out", "batch_size=64",
                   "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    out = Path(done.stdout.strip().splitlines()[-1])
    assert "SMAPE" in done.stdout and "(extrapolated: batch_size beyond the measured range)" in done.stdout
    saved = json.loads((out / "model.json").read_text())
    (model,) = saved["models"]
    assert model["metric"] == "step_time" and model["values"] == 15
    assert model["predictions"][0]["value"] == pytest.approx(0.02 + 0.064, rel=0.05)
    (held,) = model["checks"]
    assert held["measured"] == pytest.approx(0.084) and abs(held["relative_error"]) < 0.05
    assert "left out at batch_size=64: measured 0.084 s (median)" in done.stdout
    assert (out / "model.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "extrap_batch_size.jsonl").is_file() and (out / "extrap_batch_size.extra-p").is_file()
    assert len((out / "measurements.csv").read_text().splitlines()) == 1 + 15 * 2  # step_time and images/s


@pytest.mark.parametrize(("args", "fragments"), [
    (["--param", "nodes"], ["--param", "unknown parameter 'nodes'"]),
    (["--metric", "speed"], ["--metric", "'speed'"]),
    (["--predict", "batch_size"], ["--predict", "PARAMETER=NUMBER"]),
    (["--predict", "batch_size=-3"], ["--predict", "from 1 to 16777216"]),
    (["--predict", "batch_size=1e300"], ["--predict", "from 1 to 16777216"]),
    (["--predict", "batch_size=4,batch_size=8"], ["--predict", "batch_size is given more than once"]),
    (["--param", "batch_size", "--param", "gpus"], ["--param", "more than once"]),
    (["--param", "batch_size,batch_size"], ["more than once"]),
    (["--leave-out", "gpus=x"], ["--leave-out", "'x' is not a number"]),
])
def test_bad_options_are_one_line(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    assert_one_line_error(run_main("model", str(tmp_path), *args), *fragments)


def test_a_folder_without_runs_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_main("model", str(tmp_path), "--output", str(tmp_path / "o")), str(tmp_path),
                          "no measured batch size")
    assert_one_line_error(run_main("model", str(tmp_path / "nope")), "no such folder")


def test_missing_extra_p_is_one_line_saying_how_to_get_it(tmp_path: Path) -> None:
    write_run(tmp_path / "run", {b: [10.0 * b] for b in (2, 4, 8, 16, 32)})
    done = run_main("model", str(tmp_path / "run"), "--output", str(tmp_path / "o"),
                   env={extrap.EXTRAP_ENV: str(tmp_path / "no-extrap")})
    assert_one_line_error(done, "no such program")


def test_extrap_failure_names_its_input(tmp_path: Path) -> None:
    bad = tmp_path / "in.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(UsageError, match=r"in\.jsonl: Extra-P made no model"):
        extrap.run(bad, 1)


@pytest.mark.slow
def test_a_real_cpu_sweep_gives_a_model_and_a_plot(tmp_path: Path) -> None:
    """Three batch sizes (a worker each) measured for real: the fewest that give a curve, not a line through two
    points. The tiny Transformer: the model is fitted to whatever network was measured."""
    sweep = run_main("throughput", "--framework", "torch", "--device", "cpu", "--batch-sizes", "2,4,8",
                     "--workload", "transformer", "--size", "tiny", "--warmup", "1", "--steps", "1", "--repeats", "2",
                     "--output", str(tmp_path / "runs"))
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    done = run_main("model", str(tmp_path / "runs"), "--metric", "step_time,samples_per_sec", "--predict",
                   "batch_size=16", "--output", str(tmp_path / "models"))
    assert done.returncode == 0, done.stderr
    saved = json.loads((Path(done.stdout.strip().splitlines()[-1]) / "model.json").read_text())
    assert [model["metric"] for model in saved["models"]] == ["step_time", "samples_per_sec"]
    for model in saved["models"]:
        assert model["points"]["batch_size"] == [2.0, 4.0, 8.0] and model["values"] == 6
        assert math.isfinite(model["smape"]) and model["predictions"][0]["extrapolated"] == ["batch_size"]
    assert (Path(done.stdout.strip().splitlines()[-1]) / "model.png").stat().st_size > 10_000


def test_leaving_out_a_point_never_measured_is_one_line(tmp_path: Path) -> None:
    write_run(tmp_path / "run", {b: [10.0 * b] for b in (2, 4, 8, 16, 32)})
    done = run_main("model", str(tmp_path / "run"), "--leave-out", "batch_size=3", "--output", str(tmp_path / "o"))
    assert_one_line_error(done, "--leave-out", "no measurement at that point")


# --- values that are no measurement, settings, fit quality, points asked for --------------------------------------


def _edit(folder: Path, index: int, field: str, value: object) -> None:
    path = folder / "summary.json"
    data = json.loads(path.read_text())
    data["results"][index][field] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("field", "value", "named"), [
    ("samples_per_sec", math.nan, "results[1].samples_per_sec is nan"),
    ("samples_per_sec", -math.inf, "results[1].samples_per_sec is -inf"),
    ("window_samples_per_sec", [80.0, -1.0], "results[1].window_samples_per_sec is [80.0, -1.0]"),
    ("samples_per_sec", "fast", "results[1].samples_per_sec is 'fast'"),
    ("window_samples_per_sec", [0.0], "results[1].window_samples_per_sec[0] is 0.0, not a finite positive number"),
    ("world_size", 0, "results[1].world_size is 0, not a positive whole number"),
])
def test_a_result_that_is_no_measurement_is_left_out_and_named(tmp_path: Path, field: str, value: object,
                                                                named: str) -> None:
    run = write_run(tmp_path / "run", {8: [100.0], 16: [160.0], 32: [200.0]})
    _edit(run, 1, field, value)
    gathered = collect([tmp_path])
    assert sorted(set(gathered.table["batch_size"])) == [8, 32]
    assert (gathered.table["value"] > 0).all()
    (reason,) = gathered.left_out
    assert reason.startswith(f"{run / 'summary.json'}: ") and named in reason
    assert gathered.left_out_line().startswith("1 result left out (no measurement): ")


def test_fit_refuses_a_value_that_is_no_measurement_before_extra_p_runs() -> None:
    points = points_of(lambda batch_size: 0.01 * batch_size, {"batch_size": BATCHES})
    points.loc[3, "value"] = -0.5
    with pytest.raises(UsageError, match=r"generated: a step_time of -0\.5 is no measurement"):
        fit(points, ["batch_size"], ["step_time"])


def test_run_settings_hold_every_setting_but_the_parameters_and_where_a_run_met() -> None:
    header = {"framework": "torch", "image_size": 64, "device": "cuda", "timed_steps": 20,
              "model": {"framework": "torch", "num_classes": 10, "image_size": 64, "compile": False},
              "launch": {"processes_per_node": 4, "nodes": 2, "rdzv_endpoint": "h:1", "rdzv_id": "7",
                         "torchrun": True}}
    env = {"cpu_model": "Xeon", "gpu": {"gpus": [{"name": "H100"}, {"name": "H100"}]}}
    assert run_settings(header, env) == {"CPU": "Xeon", "GPU": "H100", "compile": "false", "device": "cuda",
                                         "framework": "torch", "launch.torchrun": "true", "num_classes": "10",
                                         "timed_steps": "20"}
    assert "GPU" not in run_settings({**header, "device": "cpu"}, env)  # a CPU run: the GPU played no part


@pytest.mark.slow
def test_runs_that_differ_in_a_setting_are_modelled_apart_and_labelled() -> None:
    """10 and 1,000 classes at other batch sizes: two models (two Extra-P runs: its input wants one set of
    points), each label naming its number of classes; the same settings twice stay one model."""
    ten = points_of(lambda batch_size: 0.01 + 0.001 * batch_size, {"batch_size": BATCHES})
    thousand = points_of(lambda batch_size: 0.02 + 0.002 * batch_size, {"batch_size": (*BATCHES, 256)})
    ten["settings"] = json.dumps({"framework": "torch", "num_classes": "10"})
    thousand["settings"] = json.dumps({"framework": "torch", "num_classes": "1000"})
    models = fit(pd.concat([ten, thousand], ignore_index=True), ["batch_size"], ["step_time"])
    assert [model.settings for model in models] == [{"num_classes": "10"}, {"num_classes": "1000"}]
    assert models[0].label.endswith("| num_classes=10") and models[0](batch_size=64) == pytest.approx(0.074, rel=0.05)
    assert models[1](batch_size=64) == pytest.approx(0.148, rel=0.05)
    assert len(measured(models[0], pd.concat([ten, thousand]))) == len(BATCHES)


def _model(python: str, smape: float = 3.0, adjusted_r2: float = 0.9, rss: float = 0.1) -> Model:
    return Model("c", TRAIN_STEP, {}, {}, "step_time", ["batch_size"], python, python, smape, adjusted_r2, rss, 0.0,
                 {"batch_size": [2.0, 4.0]}, 6)


@pytest.mark.parametrize(("model", "says"), [
    (_model("0.25", smape=21.0, adjusted_r2=1.0), "constant: no parameter explains the values (SMAPE 21.00 %"),
    (_model("1+2*batch_size**(1)", adjusted_r2=-math.inf), "adjusted R^2 undefined"),
    (_model("1+2*batch_size**(1)", smape=math.nan, adjusted_r2=math.nan), "failed: Extra-P gave no error figure"),
    (_model("1+2*batch_size**(1)", adjusted_r2=0.98765), "SMAPE 3.00 %, adjusted R^2 0.9877"),
])
def test_fit_quality_is_said_never_made_up(model: Model, says: str) -> None:
    assert says in model.quality
    if "0.9877" not in says:
        assert "R^2 1.0000" not in model.quality and "inf" not in model.quality and "nan" not in model.quality
    saved = json.loads(json.dumps(model.to_json(), allow_nan=False))  # no NaN or Infinity in model.json
    assert saved["quality"] == model.quality
    assert (saved["adjusted_r2"] is None) == (model.constant or not math.isfinite(model.adjusted_r2))


def test_a_model_without_a_real_value_gives_nan_never_an_exception() -> None:
    assert math.isnan(value_at("batch_size**(3)", {"batch_size": 1e300}))
    assert math.isnan(value_at("log2(batch_size)**(-1)", {"batch_size": 1.0}))
    assert math.isnan(value_at("(batch_size-5)**(1/2)", {"batch_size": 1.0}))
    line = curve(replace(_model("log2(batch_size-2)"), points={"batch_size": [2.0, 4.0]}), samples=3)
    assert line["batch_size"].tolist() == pytest.approx([2 ** 1.5, 4.0])  # log2(0) at 2 has no value: not drawn
    with pytest.raises(ValueError, match="not a model function"):
        value_at("open('x')", {})


def test_a_left_out_point_measured_at_zero_has_no_relative_error() -> None:
    model = _model("0.001*batch_size**(1)")
    held = points_of(lambda batch_size: 0.0, {"batch_size": (8,)}).assign(config="c")
    (checked,) = check(model, held).checks
    assert checked.measured == 0 and checked.relative_error is None


@pytest.mark.slow
def test_a_prediction_at_a_parameter_measured_at_one_value_is_not_made() -> None:
    points = points_of(lambda batch_size: 0.01 + 0.002 * batch_size, {"batch_size": BATCHES})
    (model,) = fit(points, ["batch_size", "gpus"], ["step_time"],
                   requests=[{"batch_size": 64, "gpus": 16}, {"batch_size": 64, "gpus": 1}])
    (made,) = model.predictions
    assert made.at == {"batch_size": 64}
    assert "not predicted at batch_size=64,gpus=16: gpus=16 (measured at 1 only) is not modelled here" in \
        model.warnings


@pytest.mark.parametrize(("args", "fragments"), [
    (["--predict", "gpus=4"], ["--predict gpus=4", "gpus is not a parameter of the model (--param batch_size)"]),
    (["--param", "batch_size,gpus", "--predict", "batch_size=64"], ["--predict batch_size=64", "missing gpus"]),
    (["--predict", "batch_size=8", "--predict", "batch_size=8"], ["--predict batch_size=8 is given more than once"]),
    (["--leave-out", "gpus=1"], ["--leave-out gpus=1", "not a parameter"]),
    (["--leave-out", "batch_size=3"], ["--leave-out batch_size=3", "no measurement at that point"]),
])
def test_points_the_model_cannot_answer_are_refused_and_nothing_is_written(
        tmp_path: Path, args: list[str], fragments: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "run", {b: [10.0 * b] for b in (2, 4, 8, 16, 32)})
    assert main(["model", str(tmp_path / "run"), *args, "--output", str(tmp_path / "o")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainbench: ") and all(fragment in line for fragment in fragments), line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_command_names_what_it_left_out_and_writes_no_nan(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "run", {b: [b / (0.01 + 0.001 * b)] * 2 for b in (2, 4, 8, 16, 32, 64)})
    _edit(run, 5, "samples_per_sec", math.nan)
    _edit(run, 4, "window_samples_per_sec", [-1.0, 5.0])
    done = run_main("model", str(tmp_path / "runs"), "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert f"note: 2 results left out (no measurement): the first, {run / 'summary.json'}: results[4]." \
        "window_samples_per_sec is [-1.0, 5.0]" in done.stdout
    saved = json.loads((Path(done.stdout.strip().splitlines()[-1]) / "model.json").read_text(),
                       parse_constant=lambda name: pytest.fail(f"{name} in model.json"))
    assert len(saved["results_left_out"]) == 2 and saved["models"][0]["points"]["batch_size"] == [2, 4, 8, 16]
