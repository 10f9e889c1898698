"""Configuration in one place: the dataclasses' defaults are the command line's, one loader per configuration reads
back what the suite writes (with its "format" stamp), one bounds check per kind of number, one parser class."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, run_main
from trainbench.bench.input_bench import InputBench
from trainbench.cli import input_bench_cmd
from trainbench.cli.main import build_parser
from trainbench.cli.options import bench_configs
from trainbench.cli.parsing import Parser
from trainbench.cli.train_cmd import CONFIG_FILE, new_config, resumed_config
from trainbench.config import (
    DEVICES,
    FRAMEWORKS,
    PRECISIONS,
    PROFILERS,
    BenchConfig,
    ConfigError,
    ModelConfig,
    OptimizerConfig,
    ProfileConfig,
    TrainConfig,
    bench_config_from_dict,
    choice,
    field_default,
    float_problem,
    int_problem,
    loader_problem,
    step_mode_problem,
    to_dict,
    train_config_from_dict,
    uses_cuda_graphs,
)
from trainbench.errors import UsageError
from trainbench.results.files import write_json_atomic

CPU_MODEL = ModelConfig(device="cpu", image_size=32, num_classes=2)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


# --- names and defaults ------------------------------------------------------------------------------------------


def test_name_lists_come_from_the_literal_types_in_their_documented_order() -> None:
    # The order is the help texts' ("one of tf, torch") and the error messages'.
    assert FRAMEWORKS == ("tf", "torch")
    assert PRECISIONS == ("fp32", "fp16", "bf16")
    assert DEVICES == ("auto", "cpu", "cuda")
    assert PROFILERS == ("ncu", "nsys", "nvprof", "torch", "tf")


def test_field_default_reads_plain_defaults_and_factories() -> None:
    assert field_default(ModelConfig, "workload") == "resnet50"
    assert field_default(ModelConfig, "image_size") is None  # the workload's default: ModelConfig().param()
    assert ModelConfig().param("image_size") == 224 and ModelConfig(size="tiny").param("image_size") == 64
    assert field_default(TrainConfig, "optimizer") == OptimizerConfig(label_smoothing=0.1)
    with pytest.raises(LookupError):
        field_default(TrainConfig, "model")  # required: no default to offer
    with pytest.raises(LookupError):
        field_default(TrainConfig, "no_such_field")


def test_choice_types_a_known_name_and_refuses_any_other_in_one_line() -> None:
    assert choice("device", "cuda", DEVICES) == "cuda"
    for wrong in ("tpu", "CUDA", None, 1):
        with pytest.raises(UsageError, match=r"^unknown device .+: choose one of auto, cpu, cuda$"):
            choice("device", wrong, DEVICES)


def test_train_command_defaults_are_train_configs() -> None:
    assert new_config(parse("train", "--device", "cpu")) == TrainConfig(model=ModelConfig(device="cpu"))


@pytest.mark.parametrize("option", ["--windows", "--repeats"])
def test_windows_and_its_older_name_repeats_set_the_timed_windows(option: str) -> None:
    args = build_parser().parse_args(["throughput", option, "3", "--device", "cpu", "--batch-sizes", "1,2"])
    assert [config.windows for config in bench_configs(args, CPU_MODEL)] == [3, 3]


def test_the_windows_help_names_repeats_as_its_older_name() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("throughput", "variability"):
        parser = commands.choices[command]
        if command == "variability":  # its sweep options are under `variability run`
            parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
        (action,) = [a for a in parser._actions if "--windows" in a.option_strings]
        assert action.option_strings == ["--windows", "--repeats"] and "--repeats is its older name" in action.help


def test_throughput_command_defaults_are_bench_configs() -> None:
    args = parse("throughput", "--device", "cpu", "--batch-sizes", "4")
    assert bench_configs(args, CPU_MODEL) == [BenchConfig(model=CPU_MODEL, batch_size=4)]


def test_profile_window_defaults_are_profile_configs() -> None:
    args = parse("profile", "nsys")
    window = ProfileConfig(tool=args.profiler, start_iteration=args.start_iteration, iterations=args.iterations)
    assert window == ProfileConfig(tool="nsys")


def test_input_bench_command_defaults_are_input_benches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_bench_cmd, "existing_data_dir", lambda path: path)  # no data folder needed here
    assert input_bench_cmd.bench_from_args(parse("input-bench", "DIR")) == InputBench("torch", "DIR")


# --- loaders -----------------------------------------------------------------------------------------------------


def written_and_read(config: Any, tmp_path: Path) -> Any:
    """``config`` as the suite writes it (with the "format" stamp) and reads it back as JSON."""
    path = tmp_path / "config.json"
    write_json_atomic(path, to_dict(config))
    raw = json.loads(path.read_text())
    assert "format" in raw
    return raw


def test_train_config_round_trip(tmp_path: Path) -> None:
    config = TrainConfig(model=CPU_MODEL, optimizer=OptimizerConfig(momentum=0.8), epochs=3, decay_epochs=(1, 2),
                         steps_per_epoch=2, data="/data")
    loaded = train_config_from_dict(written_and_read(config, tmp_path))
    assert loaded == config
    assert isinstance(loaded.decay_epochs, tuple)
    assert isinstance(loaded.model, ModelConfig) and isinstance(loaded.optimizer, OptimizerConfig)


@pytest.mark.parametrize("profile", [None, ProfileConfig(tool="torch", start_iteration=2, iterations=3)])
def test_bench_config_round_trip(tmp_path: Path, profile: ProfileConfig | None) -> None:
    config = BenchConfig(model=CPU_MODEL, batch_size=8, steps=3, windows=2, profile=profile)
    assert bench_config_from_dict(written_and_read(config, tmp_path)) == config


def test_absent_optional_parts_take_their_defaults() -> None:
    raw = {"model": to_dict(CPU_MODEL)}
    assert train_config_from_dict(raw) == TrainConfig(model=CPU_MODEL)
    assert bench_config_from_dict({**raw, "batch_size": 2}) == BenchConfig(model=CPU_MODEL, batch_size=2)


def _train_dict(**changes: Any) -> dict[str, Any]:
    """A training configuration as JSON gives it back, with ``changes``."""
    return {**json.loads(json.dumps(to_dict(TrainConfig(model=CPU_MODEL)))), **changes}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([1, 2], "a configuration must be a JSON object, got list"),
        ("text", "got str"),
        ({k: v for k, v in _train_dict().items() if k != "model"}, "model must be a JSON object, got NoneType"),
        (_train_dict(model=[1]), "model must be a JSON object, got list"),
        (_train_dict(optimizer="sgd"), "optimizer must be a JSON object, got str"),
        (_train_dict(decay_epochs=30), "decay_epochs must be a JSON list, got int"),
        (_train_dict(unknown=1), "unknown"),
        (_train_dict(model={**to_dict(CPU_MODEL), "colour": "red"}), "colour"),
    ],
)
def test_a_malformed_training_configuration_is_a_config_error(raw: Any, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as caught:
        train_config_from_dict(raw)
    assert isinstance(caught.value, UsageError) and "\n" not in str(caught.value)  # one line, as every mistake


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (_train_dict(epochs="90"), "epochs must be a whole number from 1 to 1000000000, got '90'"),
        (_train_dict(epochs=2.5), "epochs must be a whole number"),
        (_train_dict(decay_epochs=[60, 30]), "decay epochs must be increasing"),
        (_train_dict(optimizer={"momentum": "high"}), "momentum must be a finite number at least 0 and below 1, "
                                                      "got 'high'"),
        (_train_dict(model={**to_dict(CPU_MODEL), "framework": "jax"}), "unknown framework 'jax'"),
    ],
)
def test_a_bad_value_in_a_training_configuration_is_a_usage_error(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        train_config_from_dict(raw)


def test_a_malformed_worker_configuration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        bench_config_from_dict({"model": to_dict(CPU_MODEL)})
    with pytest.raises(ConfigError, match="profile must be a JSON object"):
        bench_config_from_dict({"model": to_dict(CPU_MODEL), "batch_size": 2, "profile": "ncu"})
    with pytest.raises(ConfigError, match="'repeats' is 'windows''s older name"):
        bench_config_from_dict({"model": to_dict(CPU_MODEL), "batch_size": 2, "repeats": 2, "windows": 2})


def test_a_worker_configuration_written_before_windows_reads_its_repeats() -> None:
    """logs/batch_<X>.config.json of older runs: "repeats" was the timed windows' field."""
    old = {"model": to_dict(CPU_MODEL), "batch_size": 2, "steps": 3, "repeats": 4}
    assert bench_config_from_dict(old) == BenchConfig(model=CPU_MODEL, batch_size=2, steps=3, windows=4)


def test_resume_reads_a_stamped_config_json(tmp_path: Path) -> None:
    config = TrainConfig(model=CPU_MODEL, epochs=2)
    write_json_atomic(tmp_path / CONFIG_FILE, to_dict(config))
    assert resumed_config(tmp_path, 3) == dataclasses.replace(config, epochs=3, resume=True)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("[1, 2]", "not a trainbench training run (a configuration must be a JSON object, got list)"),
        ("{not json", "not a trainbench training run (JSONDecodeError"),
        (json.dumps({"epochs": 3}), "not a trainbench training run (model must be a JSON object"),
        (json.dumps(_train_dict(epochs=0)), "epochs must be a whole number from 1 to 1000000000, got 0"),
    ],
)
def test_resume_of_a_bad_config_json_is_one_line_naming_it(tmp_path: Path, raw: str, fragment: str) -> None:
    (tmp_path / CONFIG_FILE).write_text(raw)
    with pytest.raises(UsageError) as caught:
        resumed_config(tmp_path, None)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / CONFIG_FILE}: ") and fragment in message and "\n" not in message


# --- checks ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 11, True, 2.0, "3", None])
def test_int_problem_refuses_what_is_not_a_whole_number_in_bounds(value: Any) -> None:
    assert int_problem(value, 1, 10) is not None


def test_int_problem_accepts_the_bounds_and_says_what_is_wrong() -> None:
    assert int_problem(1, 1, 10) is None and int_problem(10, 1, 10) is None
    assert int_problem(11, 1, 10) == "must be a whole number from 1 to 10, got 11"


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.5, 1.0, "0.5", True, None])
def test_float_problem_refuses_what_is_not_a_finite_number_in_bounds(value: Any) -> None:
    assert float_problem(value, 0.0, 1.0, below=True) is not None


def test_float_problem_accepts_ints_and_floats_within_bounds() -> None:
    assert float_problem(0, 0.0, 1.0, below=True) is None and float_problem(0.5, 0.0, 1.0, below=True) is None
    assert float_problem(-1.0, 0.0) == "must be a finite number at least 0, got -1.0"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"framework": "jax"}, "unknown framework 'jax': choose one of tf, torch"),
        ({"batch_size": 0}, "batch size must be a whole number from 1 to 16777216, got 0"),
        ({"image_size": 31}, "image size"),
        ({"warmup": -1}, "warm-up batches"),
        ({"steps": 0}, "timed batches"),
        ({"workers": -1}, "workers must be a whole number from 0 to 1024, got -1"),
        ({"seed": -1}, "seed"),
    ],
)
def test_input_bench_validates_itself(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        InputBench(**{"framework": "torch", "data": "DIR", **changes})


def test_input_bench_workers_none_means_all_cores() -> None:
    assert InputBench("tf", "DIR").workers is None and InputBench("tf", "DIR", workers=0).workers == 0


# --- the parser --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prog", "expected"),
    [("trainbench", "bad"), ("trainbench throughput", "throughput: bad"), ("trainbench data convert",
                                                                          "data convert: bad"),
     ("coreutil", "coreutil: bad")],
)
def test_parser_errors_name_what_follows_the_program(prog: str, expected: str) -> None:
    with pytest.raises(UsageError) as caught:
        Parser(prog=prog).error("bad")
    assert str(caught.value) == expected


GPU_MODEL = ModelConfig(device="cuda", precision="bf16")


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"compile": True, "cuda_graph": True}, "choose one"),
    ({"cuda_graph": True, "precision": "fp16"}, "loss scaling"),
    ({"framework": "tf", "compile": True}, "--xla"),
])
def test_step_settings_that_cannot_work_together_are_refused(settings: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        dataclasses.replace(GPU_MODEL, **settings)


@pytest.mark.parametrize(("mode", "graphs"), [("default", False), ("reduce-overhead", True),
                                               ("max-autotune", True), ("max-autotune-no-cudagraphs", False)])
def test_which_steps_replay_cuda_graphs(mode: str, graphs: bool) -> None:
    model = dataclasses.replace(GPU_MODEL, compile=True, compile_mode=mode)
    assert uses_cuda_graphs(model) is graphs
    assert (step_mode_problem(model, "cpu") is not None) is graphs  # refused on the CPU exactly then
    assert step_mode_problem(model, "cuda") is None


def test_training_refuses_a_captured_step_whose_learning_rate_would_freeze() -> None:
    with pytest.raises(UsageError, match="learning rate"):
        TrainConfig(model=dataclasses.replace(GPU_MODEL, cuda_graph=True))
    TrainConfig(model=dataclasses.replace(GPU_MODEL, compile=True, compile_mode="reduce-overhead"))  # compiled: fine


@pytest.mark.parametrize(("loader", "framework", "data", "device", "fragment"), [
    ("gpu", "tf", "/d", "cuda", "TensorFlow"),
    ("gpu", "torch", None, "cuda", "--data"),
    ("gpu", "torch", "/d", "cpu", "on a GPU"),
    ("gpu", "torch", "/d", "cuda", None),
    ("gpu", "torch", "/d", "auto", None),  # judged again once 'auto' is resolved (torch_engine._device)
    ("cpu", "tf", None, "cpu", None),
])
def test_loader_rule(loader: str, framework: str, data: str | None, device: str, fragment: str | None) -> None:
    problem = loader_problem(loader, framework, data, device)
    assert problem is None if fragment is None else fragment in problem


def test_gpu_loader_and_compile_mode_survive_the_worker_config_round_trip() -> None:
    model = dataclasses.replace(GPU_MODEL, compile=True, compile_mode="max-autotune")
    config = BenchConfig(model=model, batch_size=8, data="/d", loader="gpu")
    assert bench_config_from_dict(json.loads(json.dumps(to_dict(config)))) == config


def test_the_optimizer_is_sgd_adam_or_adamw(tmp_path: Path) -> None:
    assert OptimizerConfig().name == "sgd" and OptimizerConfig(name="adamw").name == "adamw"
    result = run_main("train", "--optimizer", "lamb", "--device", "cpu", "--output", str(tmp_path))
    assert_one_line_error(result, "unknown optimizer 'lamb': choose one of sgd, adam, adamw")
    assert not any(tmp_path.iterdir())  # refused before a run folder is made
