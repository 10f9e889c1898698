"""Campaign matrices: reading a YAML matrix and overrides, exclusion and the legality filter, the
interleaved plan, config strings, the fingerprint, and one-line errors naming the file and the key. No training."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from trainbench.campaign import (
    Matrix,
    bench_configs,
    experiments,
    format_plan,
    load_matrix,
    parse_overrides,
    planned_runs,
)
from trainbench.campaign.matrix import illegal
from trainbench.config import BenchConfig, OptimizerConfig, ProfileConfig, field_default
from trainbench.errors import UsageError
from trainbench.results.layout import in_unfinished_run

SMALLEST = """\
axes:
  framework: [torch, tf]
  precision: [fp32]
  batch_size: [1, 2]
  image_size: [64]
repeats: 2
warmup: 1
steps: 2
"""


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def matrix_of(tmp_path: Path, raw: dict, *overrides: str) -> Matrix:
    return load_matrix(write(tmp_path, yaml.safe_dump(raw, sort_keys=False)), parse_overrides(overrides))


def names(matrix: Matrix) -> list[str]:
    return [experiment.name for experiment in experiments(matrix)]


def one_line_error(error: pytest.ExceptionInfo[UsageError], *fragments: str) -> str:
    message = str(error.value)
    assert "\n" not in message and "\r" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def image_tree(folder: Path, classes: int) -> Path:
    """The smallest image-folder tree data.source accepts (PyTorch only): <class>/<image>."""
    for i in range(classes):
        (folder / f"class{i}").mkdir(parents=True)
        (folder / f"class{i}" / "a.jpg").write_bytes(b"")
    return folder


# --- the smallest matrix and overrides ---------------------------------------------------------------------------


def test_smallest_matrix_plans_two_experiments_twice_with_its_settings(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, SMALLEST))
    assert list(matrix.axes) == ["framework", "precision", "batch_size", "image_size"]  # the file's order
    assert matrix.batch_sizes == (1, 2) and matrix.repeats == 2
    assert (matrix.settings.warmup, matrix.settings.steps) == (1, 2)
    assert matrix.settings.windows == field_default(BenchConfig, "windows")  # unset: the suite's default
    plan = experiments(matrix)
    assert [(e.index, e.name) for e in plan] == [(0, "torch-fp32-img64"), (1, "tf-fp32-img64")]
    assert all("batch_size" not in e.values for e in plan)  # swept inside each experiment

    configs = bench_configs(matrix, plan[1])
    assert [c.batch_size for c in configs] == [1, 2]
    for config in configs:
        model = config.model
        assert (model.framework, model.precision, model.image_size, model.device) == ("tf", "fp32", 64, "auto")
        assert (config.warmup_steps, config.steps, config.data, config.profile) == (1, 2, None, None)


def test_overrides_sweep_an_axis_set_settings_and_add_an_axis(tmp_path: Path) -> None:
    overrides = parse_overrides(["precision=fp32,bf16", "warmup=3", "steps=4", "repeats=5", "seed=1,2"])
    matrix = load_matrix(write(tmp_path, SMALLEST), overrides)
    assert matrix.axes["precision"] == ("fp32", "bf16")
    assert matrix.axes["seed"] == (1, 2) and list(matrix.axes)[-1] == "seed"  # a new axis comes last
    assert (matrix.settings.warmup, matrix.settings.steps, matrix.repeats) == (3, 4, 5)
    assert len(experiments(matrix)) == 2 * 2 * 2
    assert len(planned_runs(matrix)) == 8 * 5
    assert "torch-bf16-img64-seed2" in names(matrix)


def test_override_values_get_their_yaml_types(tmp_path: Path) -> None:
    (xla,), (size,), (timeout,) = (parse_overrides([text])[0].values for text in ("xla=true", "image_size=64",
                                                                                     "timeout=2.5"))
    assert (xla, size, timeout) == (True, 64, 2.5)
    assert parse_overrides(["batch_size=4,8"])[0].values == (4, 8)


@pytest.mark.parametrize(("text", "fragment"), [
    ("precision", "KEY=VALUE"),
    ("colour=red", "unknown key 'colour'"),
    ("steps=1,2", "one value"),
    ("precision=fp64", "unknown precision 'fp64'"),
    ("precision=", "empty value"),
    ("precision=fp32,,bf16", "empty value"),
    ("batch_size=0", "batch size"),
    ("xla=maybe", "true or false"),
    ("image_size=[64", "YAML"),
    ("precision=fp32,fp32", "more than once"),
])
def test_a_bad_override_is_one_line_naming_it(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_overrides([text])
    one_line_error(error, f"override {text!r}", fragment)


def test_one_key_overridden_twice_is_refused() -> None:
    with pytest.raises(UsageError) as error:
        parse_overrides(["steps=1", "steps=2"])
    one_line_error(error, "steps", "more than once")


def test_a_scalar_axis_is_a_one_value_list(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"framework": "tf", "batch_size": 4}})
    assert matrix.axes == {"framework": ("tf",), "batch_size": (4,)}
    assert len(experiments(matrix)) == 1


# --- exclusion and the legality filter -------------------------------------------------------------------------


def test_exclude_drops_experiments_matching_every_key_of_a_rule(tmp_path: Path) -> None:
    raw = {"axes": {"framework": ["torch", "tf"], "precision": ["fp32", "fp16", "bf16"], "batch_size": [1]},
           "exclude": [{"framework": "tf", "precision": ["fp16", "bf16"]}, {"framework": "torch", "precision": "fp32"}]}
    plan = experiments(matrix_of(tmp_path, raw))
    assert [(e.value("framework"), e.value("precision")) for e in plan] == [
        ("torch", "fp16"), ("torch", "bf16"), ("tf", "fp32")]
    assert [e.index for e in plan] == [0, 1, 2]  # numbered after exclusion


@pytest.mark.parametrize(("axes", "kept"), [
    ({"framework": ["torch", "tf"], "xla": [True, False]}, 3),  # xla only with tf
    ({"framework": ["torch", "tf"], "compile": [True, False]}, 3),  # compile only with torch
    ({"framework": ["torch", "tf"], "channels_last": [True, False]}, 3),
    ({"precision": ["fp32", "fp16"], "device": ["cpu", "cuda"]}, 3),  # fp16 not on the CPU
    ({"framework": ["torch", "tf"], "profiler": ["none", "torch", "tf"]}, 4),  # a framework's own profiler
    ({"device": ["cpu", "cuda"], "profiler": ["none", "nsys", "ncu", "nvprof"]}, 5),  # GPU profilers off the CPU
    # compiled and captured steps: graphs need a GPU, and one of the two at a time; a mode is "compiled"
    ({"device": ["cpu", "cuda"], "compile": [False, True, "reduce-overhead"], "cuda_graph": [False, True]}, 6),
    ({"framework": ["torch", "tf"], "cuda_graph": [True, False]}, 3),
    ({"device": ["cuda"], "precision": ["bf16", "fp16"], "cuda_graph": [True, False]}, 3),  # fp16 not captured
    ({"device": ["cpu", "cuda"], "loader": ["cpu", "gpu"]}, 2),  # the GPU loader decodes real data on a GPU
    ({"shard": ["ddp", "fsdp"], "gpus": [1, 2]}, 3),  # FSDP shards over several processes: not one
    ({"shard": ["ddp", "fsdp"], "gpus": [2], "precision": ["fp16", "bf16"], "device": ["cuda"]}, 3),  # no fp16
    ({"framework": ["torch", "tf"], "shard": ["ddp", "fsdp"]}, 2),  # PyTorch's (and one process: fsdp never)
    # recomputation: PyTorch's transformer blocks only (ResNet-50's batch norm would update twice)
    ({"workload": ["resnet50", "gpt2"], "size": ["tiny"], "activation_checkpointing": ["none", "full"]}, 3),
    ({"framework": ["torch", "tf"], "workload": ["bert"], "size": ["tiny"],
      "activation_checkpointing": ["none", "full"]}, 3),
])
def test_the_legality_filter_drops_what_the_suite_would_refuse(tmp_path: Path, axes: dict, kept: int) -> None:
    matrix = matrix_of(tmp_path, {"axes": {**axes, "batch_size": [1]}})
    plan = experiments(matrix)
    assert len(plan) == kept
    for experiment in plan:  # and every kept one is a configuration the suite accepts
        assert len(bench_configs(matrix, experiment)) == 1
    total = math.prod(len(values) for values in axes.values())
    assert format_plan(matrix).endswith(f"({total - kept} of {total} combinations excluded or illegal)")


def test_step_and_loader_axes_reach_the_configurations(tmp_path: Path) -> None:
    axes = {"device": ["cuda"], "precision": ["bf16"], "compile": [False, "max-autotune"], "cuda_graph": [False, True],
            "batch_size": [8]}
    matrix = matrix_of(tmp_path, {"axes": axes})
    by_name = {experiment.name: bench_configs(matrix, experiment)[0] for experiment in experiments(matrix)}
    assert set(by_name) == {"torch-bf16-img224-cuda-no_compile-no_cuda_graph",
                            "torch-bf16-img224-cuda-no_compile-cuda_graph",
                            "torch-bf16-img224-cuda-compile_max_autotune-no_cuda_graph"}
    tuned = by_name["torch-bf16-img224-cuda-compile_max_autotune-no_cuda_graph"].model
    assert (tuned.compile, tuned.compile_mode, tuned.cuda_graph) == (True, "max-autotune", False)
    assert by_name["torch-bf16-img224-cuda-no_compile-cuda_graph"].model.cuda_graph


def test_a_gpu_loader_axis_needs_data_and_gives_the_loader(tmp_path: Path) -> None:
    data = image_tree(tmp_path / "tree", 2)
    matrix = matrix_of(tmp_path, {"axes": {"device": ["cuda"], "data": ["synthetic", str(data)],
                                           "loader": ["cpu", "gpu"], "batch_size": [4]}})
    kept = {(e.value("data") == "synthetic", e.value("loader")): bench_configs(matrix, e)[0]
            for e in experiments(matrix)}
    assert set(kept) == {(True, "cpu"), (False, "cpu"), (False, "gpu")}
    assert kept[(False, "gpu")].loader == "gpu" and kept[(False, "gpu")].data == str(data.resolve())


def test_the_step_axes_reach_the_configurations_named_in_their_config_strings(tmp_path: Path) -> None:
    """matmul_precision is the model's; optimizer is the workload's reference settings for its own optimizer, an
    other optimizer's usual ones otherwise (OptimizerConfig.reference); neither is dropped by the legality filter."""
    axes = {"workload": ["resnet50", "bert"], "size": ["tiny"], "matmul_precision": ["highest", "high"],
            "optimizer": ["sgd", "adamw"], "batch_size": [2]}
    matrix = matrix_of(tmp_path, {"axes": axes})
    by_name = {experiment.name: bench_configs(matrix, experiment)[0] for experiment in experiments(matrix)}
    assert len(by_name) == 2 * 2 * 2  # every combination is legal
    high = by_name["resnet50-torch-fp32-tiny-img64-matmul_high-opt_adamw"]
    assert high.model.matmul_precision == "high" and high.optimizer == OptimizerConfig.reference("resnet50", "adamw")
    reference = by_name["bert-torch-fp32-tiny-seq32-matmul_highest-opt_adamw"]
    assert reference.model.matmul_precision == "highest" and reference.optimizer == OptimizerConfig.reference("bert")
    assert by_name["bert-torch-fp32-tiny-seq32-matmul_highest-opt_sgd"].optimizer.name == "sgd"


def test_without_the_step_axes_each_workload_updates_with_its_reference_at_highest(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"workload": ["resnet50", "transformer"], "size": ["tiny"],
                                           "batch_size": [2]}})
    configs = {e.value("workload"): bench_configs(matrix, e)[0] for e in experiments(matrix)}
    assert {name: config.optimizer.name for name, config in configs.items()} == {"resnet50": "sgd",
                                                                                 "transformer": "adam"}
    assert all(config.model.matmul_precision == "highest" for config in configs.values())
    assert all((config.model.activation_checkpointing, config.model.shard) == ("none", "ddp")
               for config in configs.values())
    assert not any(token in name for name in names(matrix)
                   for token in ("matmul", "opt_", "recompute", "shard"))  # defaults: not in the strings


def test_recomputation_and_sharding_reach_the_model_named_in_their_config_strings(tmp_path: Path) -> None:
    """Both are the model's (ModelConfig's activation_checkpointing and shard); "full" parses whatever the default
    workload (ResNet-50, which refuses it) and is dropped only where the workload refuses it; FSDP is kept with two
    processes only."""
    axes = {"workload": ["gpt2", "resnet50"], "size": ["tiny"], "activation_checkpointing": ["none", "full"],
            "shard": ["ddp", "fsdp"], "gpus": [1, 2], "batch_size": [2]}
    matrix = matrix_of(tmp_path, {"axes": axes})
    by_name = {experiment.name: bench_configs(matrix, experiment)[0] for experiment in experiments(matrix)}
    assert sorted(by_name) == sorted([
        "gpt2-torch-fp32-tiny-seq32-recompute_none-shard_ddp-gpus1", "gpt2-torch-fp32-tiny-seq32-recompute_none-"
        "shard_ddp-gpus2", "gpt2-torch-fp32-tiny-seq32-recompute_none-shard_fsdp-gpus2",
        "gpt2-torch-fp32-tiny-seq32-recompute_full-shard_ddp-gpus1", "gpt2-torch-fp32-tiny-seq32-recompute_full-"
        "shard_ddp-gpus2", "gpt2-torch-fp32-tiny-seq32-recompute_full-shard_fsdp-gpus2",
        "resnet50-torch-fp32-tiny-img64-recompute_none-shard_ddp-gpus1",
        "resnet50-torch-fp32-tiny-img64-recompute_none-shard_ddp-gpus2",
        "resnet50-torch-fp32-tiny-img64-recompute_none-shard_fsdp-gpus2"])
    both = by_name["gpt2-torch-fp32-tiny-seq32-recompute_full-shard_fsdp-gpus2"]
    assert (both.model.activation_checkpointing, both.model.shard, both.launch.processes_per_node) == \
        ("full", "fsdp", 2)
    plain = by_name["resnet50-torch-fp32-tiny-img64-recompute_none-shard_ddp-gpus1"].model
    assert (plain.activation_checkpointing, plain.shard) == ("none", "ddp")
    assert format_plan(matrix).endswith("(7 of 16 combinations excluded or illegal)")


@pytest.mark.parametrize(("values", "reason"), [
    ({"shard": "fsdp"}, "--shard fsdp shards the model over several processes"),
    ({"shard": "fsdp", "gpus": 2, "precision": "fp16", "device": "cuda"}, "--shard fsdp runs fp32 or bf16"),
    ({"shard": "fsdp", "framework": "tf"}, "--shard fsdp is PyTorch's (--framework torch)"),
    ({"activation_checkpointing": "full"}, "--activation-checkpointing does not apply to --workload resnet50"),
    ({"activation_checkpointing": "full", "workload": "retinanet"}, "does not apply to --workload retinanet"),
    ({"activation_checkpointing": "full", "workload": "bert", "framework": "tf"},
     "--activation-checkpointing full is PyTorch's"),
])
def test_an_illegal_step_is_dropped_with_the_suite_s_own_reason(values: dict, reason: str) -> None:
    assert reason in str(illegal(values))
    legal = {**values, "framework": "torch", "precision": "bf16", "gpus": 2, "workload": "gpt2"}
    assert illegal(legal) is None  # the same axes where the suite runs them


def test_a_matrix_whose_only_step_is_illegal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as error:
        matrix_of(tmp_path, {"axes": {"activation_checkpointing": ["full"], "batch_size": [1]}})
    one_line_error(error, "axes: no legal combination is left",
                   "activation_checkpointing=full: --activation-checkpointing does not apply to --workload resnet50")


@pytest.mark.parametrize(("axis", "value", "fragment"), [
    ("optimizer", "lamb", "unknown optimizer 'lamb'"), ("optimizer", None, "sgd, adam, adamw"),
    ("matmul_precision", "medium", "unknown matmul precision 'medium'"), ("matmul_precision", True, "highest"),
    ("activation_checkpointing", "selective", "unknown activation checkpointing 'selective': choose one of none, full"),
    ("activation_checkpointing", True, "none, full"), ("shard", "zero3", "unknown shard 'zero3': choose one of ddp"),
    ("shard", None, "ddp, fsdp"),
])
def test_a_bad_step_axis_value_is_one_line_naming_the_axis(tmp_path: Path, axis: str, value: object,
                                                            fragment: str) -> None:
    with pytest.raises(UsageError) as error:
        matrix_of(tmp_path, {"axes": {axis: [value], "batch_size": [1]}})
    one_line_error(error, f"axes.{axis}", fragment)


@pytest.mark.parametrize("value", ["fastest", 3])
def test_an_unknown_compile_mode_is_one_line(tmp_path: Path, value: object) -> None:
    with pytest.raises(UsageError) as error:
        matrix_of(tmp_path, {"axes": {"compile": [value], "batch_size": [1]}})
    one_line_error(error, "compile", "reduce-overhead")


def test_dry_run_text_lists_every_run_in_order_and_counts_them(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"framework": ["torch", "tf"], "xla": [False, True], "batch_size": [1, 2]},
                                  "repeats": 2})
    for seed in (None, 7):
        lines = format_plan(matrix, seed).splitlines()
        runs = planned_runs(matrix, seed)
        assert len(lines) == len(runs) + 1
        for line, (repetition, experiment) in zip(lines, runs, strict=False):
            assert f"rep {repetition}" in line and f"  {experiment.name}  " in line and "batch sizes 1,2" in line
        assert lines[-1] == "3 experiments x 2 repeats = 6 runs (1 of 4 combinations excluded or illegal)"


# --- the plan's order ------------------------------------------------------------------------------------------


def test_repetitions_are_interleaved(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"precision": ["fp32", "fp16", "bf16"], "batch_size": [1]}, "repeats": 3})
    runs = planned_runs(matrix)
    assert [(repetition, e.index) for repetition, e in runs] == [(r, i) for r in range(3) for i in range(3)]


def test_a_shuffle_is_a_permutation_that_its_seed_repeats(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"framework": ["torch", "tf"], "precision": ["fp32", "fp16", "bf16"],
                                           "batch_size": [1]}, "repeats": 3})
    pairs = [(r, e.index) for r, e in planned_runs(matrix)]
    first, again, other = ([(r, e.index) for r, e in planned_runs(matrix, seed)] for seed in (1, 1, 2))
    assert first == again
    assert sorted(first) == sorted(pairs) and first != pairs  # 18! orders: one equal by chance is negligible
    assert other != first


# --- config strings ----------------------------------------------------------------------------------------------


def test_config_strings_are_unique_and_safe_for_folder_names(tmp_path: Path) -> None:
    data_a = image_tree(tmp_path / "one" / "my data", 2)  # a space, and the same name in two places
    data_b = image_tree(tmp_path / "two" / "my data", 2)
    raw = {"axes": {"framework": ["torch", "tf"], "precision": ["fp32", "bf16"], "batch_size": [1],
                    "data": ["synthetic", str(data_a), str(data_b)], "compile": [True, False], "gpus": [1, 2],
                    "profiler": ["none", "torch"], "seed": 3}, "exclude": [{"framework": "tf", "data": [str(data_a),
                                                                                                         str(data_b)]}]}
    plan = experiments(matrix_of(tmp_path, raw))
    strings = [e.name for e in plan]
    assert len(plan) > 20 and len(set(strings)) == len(strings)
    for string in strings:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", string), string
        assert "/" not in string and not any(c.isspace() for c in string)
    assert any(re.search(r"-data_my_data_[0-9a-f]{8}-", s) for s in strings)
    assert all("-seed3" in s for s in strings)  # one value, not the default: it matters


def test_a_data_folder_named_like_an_unfinished_run_does_not_hide_its_finished_runs(tmp_path: Path) -> None:
    marked = [image_tree(tmp_path / name, 2) for name in ("imgs_inprogress", "x_refused", "inprogress")]
    raw = {"axes": {"framework": ["torch"], "batch_size": [1], "data": [str(path) for path in marked]}}
    strings = [e.name for e in experiments(matrix_of(tmp_path, raw))]
    assert len(set(strings)) == 3
    for string, path in zip(strings, marked, strict=True):
        assert in_unfinished_run(tmp_path / f"run_0_{string}_ret_0" / "summary.json", tmp_path) is False, string
        assert re.fullmatch(r"torch-fp32-img224-data_[0-9a-f]{8}", string), string
        assert path.name not in string


def test_config_strings_ignore_the_order_of_keys(tmp_path: Path) -> None:
    axes = {"framework": ["torch", "tf"], "precision": ["fp32", "bf16"], "batch_size": [1], "xla": [False, True]}
    backwards = dict(reversed(list(axes.items())))
    assert sorted(names(matrix_of(tmp_path, {"axes": axes}))) == sorted(names(matrix_of(tmp_path, {"axes": backwards})))


# --- the fingerprint ---------------------------------------------------------------------------------------------


def test_fingerprint_changes_with_the_plan_and_not_with_key_order(tmp_path: Path) -> None:
    base = {"axes": {"framework": ["torch", "tf"], "batch_size": [1, 2]}, "repeats": 2, "steps": 3,
            "exclude": [{"framework": "tf"}]}
    reordered = {"steps": 3, "exclude": [{"framework": "tf"}], "repeats": 2,
                 "axes": {"batch_size": [1, 2], "framework": ["torch", "tf"]}}
    fingerprint = matrix_of(tmp_path, base).fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint)
    assert matrix_of(tmp_path, reordered).fingerprint() == fingerprint
    changed = [
        {**base, "repeats": 3},
        {**base, "steps": 4},
        {**base, "exclude": [{"framework": "torch"}]},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 4]}},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 2], "seed": [0]}},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 2], "optimizer": ["adamw"]}},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 2], "matmul_precision": ["high"]}},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 2], "activation_checkpointing": ["none"]}},
        {**base, "axes": {"framework": ["torch", "tf"], "batch_size": [1, 2], "shard": ["ddp"]}},
    ]
    assert len({fingerprint, *(matrix_of(tmp_path, raw).fingerprint() for raw in changed)}) == len(changed) + 1
    overridden = load_matrix(write(tmp_path, yaml.safe_dump(base)), parse_overrides(["steps=9"]))
    assert overridden.fingerprint() != fingerprint


def test_a_matrix_without_the_format_6_axes_keeps_the_fingerprint_it_had_before_them(tmp_path: Path) -> None:
    """Absent, activation_checkpointing and shard are the step every earlier run measured (none, ddp): a campaign
    begun before them resumes (FINGERPRINT_FORMAT unchanged). The value was computed by the suite before the axes
    existed (commit ac8f2c3)."""
    raw = {"axes": {"workload": ["gpt2"], "size": ["tiny"], "framework": ["torch"], "gpus": [1, 2],
                    "batch_size": [2, 4]}, "repeats": 2, "steps": 3}
    assert matrix_of(tmp_path, raw).fingerprint() == \
        "1283a494d318063bf2e5c0854339611b075aa49edf381d66314bda679b352bd8"


# --- data folders and profilers --------------------------------------------------------------------------------


def test_a_data_folder_is_resolved_and_gives_its_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image_tree(tmp_path / "imgs", 3)
    monkeypatch.chdir(tmp_path)
    matrix = matrix_of(tmp_path, {"axes": {"data": "imgs", "batch_size": [2]}})
    (config,) = bench_configs(matrix, experiments(matrix)[0])
    assert config.data == str((tmp_path / "imgs").resolve())
    assert config.model.num_classes == 3  # as --data without --num-classes
    matrix = matrix_of(tmp_path, {"axes": {"data": "imgs", "batch_size": [2], "num_classes": 10}})
    assert bench_configs(matrix, experiments(matrix)[0])[0].model.num_classes == 10


def test_tensorflow_on_an_image_folder_tree_is_refused_naming_the_data_axis(tmp_path: Path) -> None:
    data = image_tree(tmp_path / "imgs", 2)
    path = write(tmp_path, yaml.safe_dump({"axes": {"framework": ["torch", "tf"], "data": str(data),
                                                    "batch_size": 1}}))
    with pytest.raises(UsageError) as error:
        load_matrix(path)
    one_line_error(error, str(path), "axes.data", "TFRecord", "tf-fp32-img224")


def test_the_windows_setting_is_the_timed_windows_and_repeats_the_repetitions(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"batch_size": [1, 2]}, "windows": 3, "repeats": 2})
    assert [config.windows for config in bench_configs(matrix, experiments(matrix)[0])] == [3, 3]
    assert matrix.repeats == 2 and len(planned_runs(matrix)) == 2


def test_a_profiler_axis_gives_the_profile_window(tmp_path: Path) -> None:
    matrix = matrix_of(tmp_path, {"axes": {"profiler": ["none", "nsys"], "batch_size": [1, 2]}, "steps": 7,
                                  "start_iteration": 2, "iterations": 3})
    plain, profiled = experiments(matrix)
    assert [c.profile for c in bench_configs(matrix, plain)] == [None, None]
    assert bench_configs(matrix, plain)[0].steps == 7
    for config in bench_configs(matrix, profiled):
        assert config.profile == ProfileConfig(tool="nsys", start_iteration=2, iterations=3)
        assert (config.warmup_steps, config.steps, config.windows) == (0, 1, 1)  # `profile`'s placeholders
    assert profiled.name.endswith("-prof_nsys") and plain.name.endswith("-prof_none")


# --- bad matrices: one line naming the file and the key ------------------------------------------------------------

OK_AXES = "axes:\n  batch_size: [1]\n"


@pytest.mark.parametrize(("text", "fragments"), [
    (OK_AXES + "colour: red\n", ["unknown key 'colour'"]),
    (OK_AXES + "precision: [fp32]\n", ["unknown key 'precision'", "under 'axes:'"]),
    (OK_AXES + "  colour: [red]\n", ["axes", "unknown axis 'colour'"]),
    (OK_AXES + "  steps: [1, 2]\n", ["axes", "steps is a run setting"]),
    (OK_AXES + "  precision: []\n", ["axes.precision", "empty list"]),
    (OK_AXES + "  precision: [fp32, fp64]\n", ["axes.precision", "unknown precision 'fp64'", "fp32, fp16, bf16"]),
    (OK_AXES + "  precision: [fp32, fp32]\n", ["axes.precision", "more than once"]),
    (OK_AXES + "  framework: [mxnet]\n", ["axes.framework", "mxnet"]),
    (OK_AXES + "  device: [tpu]\n", ["axes.device", "tpu"]),
    (OK_AXES + "  image_size: [16]\n", ["axes.image_size", "16"]),
    (OK_AXES + "  image_size: [64.0]\n", ["axes.image_size", "64.0"]),
    (OK_AXES + "  num_classes: [1]\n", ["axes.num_classes"]),
    (OK_AXES + "  seed: [-1]\n", ["axes.seed"]),
    (OK_AXES + "  xla: ['yes please']\n", ["axes.xla", "true or false"]),
    (OK_AXES + "  profiler: [vtune]\n", ["axes.profiler", "vtune"]),
    (OK_AXES + "  gpus: [0]\n", ["axes.gpus"]),
    (OK_AXES + "  nodes: [two]\n", ["axes.nodes"]),
    (OK_AXES + "  data: [/no/such/folder]\n", ["axes.data", "/no/such/folder"]),
    (OK_AXES + "  data: [7]\n", ["axes.data", "synthetic"]),
    ("axes:\n  batch_size: [0]\n", ["axes.batch_size", "batch size"]),
    ("axes:\n  batch_size: [true]\n", ["axes.batch_size"]),
    ("axes:\n  precision: [fp32]\n", ["axes.batch_size", "missing"]),
    ("steps: 2\n", ["axes", "missing"]),
    ("axes: [batch_size]\n", ["axes", "mapping"]),
    ("axes:\n", ["axes", "mapping"]),
    (OK_AXES + "steps: 0\n", ["steps", "timed steps"]),
    (OK_AXES + "warmup: -1\n", ["warmup"]),
    (OK_AXES + "windows: 0\n", ["windows"]),
    (OK_AXES + "repeats: 1.5\n", ["repeats"]),
    (OK_AXES + "timeout: 0\n", ["timeout"]),
    (OK_AXES + "timeout: .nan\n", ["timeout"]),
    (OK_AXES + "sync_every_step: 1\n", ["sync_every_step"]),
    (OK_AXES + "clock_control: turbo\n", ["clock_control", "turbo"]),
    (OK_AXES + "iterations: 0\n", ["iterations"]),
    (OK_AXES + "exclude: {precision: fp32}\n", ["exclude", "list"]),
    (OK_AXES + "exclude: [fp32]\n", ["exclude[0]", "mapping"]),
    (OK_AXES + "exclude: [{}]\n", ["exclude[0]", "mapping"]),
    (OK_AXES + "  precision: [fp32]\nexclude: [{colour: red}]\n", ["exclude[0]", "unknown axis 'colour'"]),
    (OK_AXES + "  precision: [fp32]\nexclude: [{xla: true}]\n", ["exclude[0].xla", "not an axis of this matrix"]),
    (OK_AXES + "  precision: [fp32]\nexclude: [{precision: fp64}]\n", ["exclude[0].precision", "fp64"]),
    (OK_AXES + "  precision: [fp32]\nexclude: [{batch_size: 1}]\n", ["exclude[0].batch_size"]),
    (OK_AXES + "  precision: [fp32, bf16]\nexclude: [{precision: [fp32, bf16]}]\n", ["exclude", "every one of the 2"]),
    (OK_AXES + "  framework: [torch]\n  xla: [true]\n", ["axes", "no legal combination", "--xla is TensorFlow's"]),
    ("axes: {batch_size: [1]\n", ["not valid YAML", "line"]),
    ("axes:\n  batch_size: [1]\n\tsteps: 2\n", ["not valid YAML"]),
    ("- axes\n", ["must be a YAML mapping", "list"]),
    ("", ["must be a YAML mapping", "NoneType"]),
    (OK_AXES + "axes:\n  batch_size: [2]\n", ["not valid YAML", "'axes' is given twice", "line 3"]),
    (OK_AXES + "  batch_size: [2]\n", ["not valid YAML", "'batch_size' is given twice"]),
    (OK_AXES + '"bad\\nkey": 1\n', ["unknown key 'bad\\nkey'"]),
])
def test_a_bad_matrix_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str,
                                                              fragments: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as error:
        load_matrix(path)
    one_line_error(error, f"{path}: ", *fragments)


def test_an_unreadable_matrix_is_one_line_naming_it(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.yaml", tmp_path):
        with pytest.raises(UsageError) as error:
            load_matrix(path)
        one_line_error(error, str(path), "cannot be read")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe axes")
    with pytest.raises(UsageError) as error:
        load_matrix(binary)
    one_line_error(error, str(binary))


def test_an_overridden_axis_is_checked_against_the_file(tmp_path: Path) -> None:
    # the override is valid alone, but the file's exclude rule then removes everything
    path = write(tmp_path, SMALLEST + "exclude: [{precision: bf16}]\n")
    with pytest.raises(UsageError) as error:
        load_matrix(path, parse_overrides(["precision=bf16"]))
    one_line_error(error, str(path), "exclude")


def test_a_data_folder_from_an_override_is_refused_naming_the_override(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    image_tree(tmp_path / "imgs", 2)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as error:
        load_matrix(write(tmp_path, SMALLEST), parse_overrides(["data=imgs"]))  # the matrix has tf: shards only
    one_line_error(error, "override 'data=imgs'", "experiment 1 (tf-fp32-img64-data_imgs_", "TFRecord")
