"""The command line and a campaign agree on which settings go together: for every combination of the campaign
matrix's axes, ``trainbench throughput`` (``profile`` with a profiler) and the campaign's legality filter both
accept it, building the same model, input and launch, or both refuse it with the same reason (config.problems).
No worker runs: only the configurations are built."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from trainbench import workloads
from trainbench.campaign.matrix import AXES, NO_PROFILER, SYNTHETIC, Experiment, Matrix, bench_configs, illegal
from trainbench.cli import profile_cmd, throughput_cmd
from trainbench.cli.main import build_parser
from trainbench.cli.options import model_config
from trainbench.config import (
    ACTIVATION_CHECKPOINTINGS,
    COMPILE_MODES,
    DEVICES,
    FRAMEWORKS,
    LOADERS,
    PRECISIONS,
    PROFILERS,
    SHARDS,
    BenchConfig,
    ModelConfig,
    model_config_from,
    problems,
)
from trainbench.errors import UsageError

# Every value of every axis a rule relates; the campaign's parsers accept exactly these (and, for data, any folder).
RELATED: dict[str, tuple[Any, ...]] = {
    "framework": FRAMEWORKS,
    "precision": PRECISIONS,
    "device": DEVICES,
    "xla": (False, True),
    "compile": (False, True, *COMPILE_MODES),
    "cuda_graph": (False, True),
    "channels_last": (False, True),
    "loader": LOADERS,
    "profiler": (NO_PROFILER, *PROFILERS),
    "gpus": (1, 2),
    "data": (SYNTHETIC, "SHARDS"),  # "SHARDS": a TFRecord folder, which both frameworks read
    # the workload's own rules: frameworks it lacks (gpt2 on tf), settings it lacks (seq_len on resnet50), --data
    "workload": ("resnet50", "bert", "gpt2"),
    "size": ("full", "tiny"),
    "seq_len": (None, 16),  # None: the option not given
    "activation_checkpointing": ACTIVATION_CHECKPOINTINGS,  # PyTorch's, transformer workloads only
    "shard": SHARDS,  # PyTorch's, several processes only, not fp16
}
# Axes no rule relates to another: one value stands for all (their bounds are each option's own check).
UNRELATED: dict[str, Any] = {"image_size": 32, "num_classes": 10, "seed": 0, "batch_size": 1,
                             "matmul_precision": "high", "optimizer": "adamw"}
# The campaign's own policy, not a rule between settings: a multi-node sweep is a Slurm job.
CAMPAIGN_ONLY = ("nodes",)
# The fast subset crosses these groups in full (each with the axes most rules read). The slow tests cross every
# other axis of RELATED for ResNet-50 (the default workload), and the workload's own axes with each of STEP and RUN:
# every axis of RELATED meets the workload axes, at about a fifth of the combinations of crossing them all (500,000,
# two and a half minutes on 2 cores).
STEP = ("framework", "precision", "device", "xla", "compile", "cuda_graph", "channels_last", "activation_checkpointing")
RUN = ("framework", "precision", "device", "cuda_graph", "loader", "profiler", "gpus", "data", "shard")
WORKLOAD_AXES = ("workload", "size", "seq_len")
WORKLOAD = (*WORKLOAD_AXES, "framework", "channels_last", "data", "activation_checkpointing")
OTHERS = tuple(axis for axis in RELATED if axis not in WORKLOAD_AXES)


def test_every_axis_of_the_campaign_is_enumerated_here() -> None:
    """A new axis must join RELATED, UNRELATED or CAMPAIGN_ONLY, so that the agreement covers it."""
    assert sorted(AXES) == sorted([*RELATED, *UNRELATED, *CAMPAIGN_ONLY])
    assert {*STEP, *RUN} == set(OTHERS)  # so the slow tests cross every axis with the workload's


@pytest.fixture()
def shards(tmp_path: Path) -> str:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "train-00000-of-00001").write_bytes(b"")  # open_source only lists the shards
    return str(folder.resolve())


@pytest.fixture()
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line resolves --device here; with one GPU visible 'auto' and 'cuda' are both a GPU, which is what
    the campaign's filter assumes of 'auto' (judged where it runs)."""
    monkeypatch.setattr("trainbench.engines.devices.visible_gpu_count", lambda: 1)


def combinations(axes: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    for point in itertools.product(*(RELATED[axis] for axis in axes)):
        yield dict(zip(axes, point, strict=True))


def command_line(values: Mapping[str, Any], shards: str) -> list[str]:
    """The options that ask for these axis values (absent ones: the options' defaults)."""
    words = ["throughput"] if values.get("profiler", NO_PROFILER) == NO_PROFILER else ["profile", values["profiler"]]
    for axis in ("framework", "precision", "device", "loader", "gpus", "activation_checkpointing", "shard"):
        if axis in values:
            words += [f"--{axis.replace('_', '-')}", str(values[axis])]
    for flag in ("xla", "cuda_graph", "channels_last"):
        if values.get(flag):
            words.append(f"--{flag.replace('_', '-')}")
    compiled = values.get("compile", False)
    if compiled is not False:
        words += ["--compile"] if compiled is True else ["--compile", compiled]
    if values.get("data", SYNTHETIC) != SYNTHETIC:
        words += ["--data", shards]
    for axis in ("workload", "size", "seq_len"):
        if values.get(axis) is not None:
            words += [f"--{axis.replace('_', '-')}", str(values[axis])]
    words += [word for axis in shapes(values) for word in (f"--{axis.replace('_', '-')}", str(UNRELATED[axis]))]
    return [*words, "--seed", str(UNRELATED["seed"]), "--batch-sizes", str(UNRELATED["batch_size"]),
            "--oversubscribe"]


def shapes(values: Mapping[str, Any]) -> list[str]:
    """UNRELATED's shape settings that the workload has (the others it would refuse: a rule of WORKLOAD's)."""
    params = workloads.get(values.get("workload", "resnet50")).params
    return [axis for axis in ("image_size", "num_classes") if axis in params]


def by_command_line(parser: Any, argv: list[str]) -> BenchConfig | str:
    """The first configuration the command would run, or its one-line refusal."""
    args = parser.parse_args(argv)
    try:
        if args.command == "profile":
            return profile_cmd.profile_configs(args)[1][0]
        return throughput_cmd.bench_configs(args, model_config(args))[0]
    except UsageError as error:
        return str(error)


def by_campaign(values: Mapping[str, Any]) -> BenchConfig | str:
    """The campaign's configuration for the one experiment of these values, or why its filter drops them."""
    values = {**{axis: value for axis, value in UNRELATED.items() if axis in (*shapes(values), "seed")},
              **{axis: value for axis, value in values.items() if value is not None}}
    reason = illegal(values)
    if reason is not None:
        return reason
    matrix = Matrix(axes={**{axis: (value,) for axis, value in values.items()}, "batch_size": (1,)})
    (config,) = bench_configs(matrix, Experiment(0, values, "x"))
    return config


def same_settings(cli: BenchConfig, campaign: BenchConfig) -> None:
    """The model, input, launch and profiler agree; the campaign keeps 'auto', which the runner resolves."""
    assert cli.model == dataclasses.replace(campaign.model, device=cli.model.device)
    assert cli.optimizer == campaign.optimizer  # the workload's reference unless an axis or --optimizer names one
    assert (cli.data, cli.loader, cli.launch.processes_per_node) == (campaign.data, campaign.loader,
                                                                     campaign.launch.processes_per_node)
    assert (cli.profile and cli.profile.tool) == (campaign.profile and campaign.profile.tool)


def check_agreement(axes: tuple[str, ...], shards: str) -> tuple[int, int]:
    parser = build_parser()
    accepted = refused = 0
    for values in combinations(axes):
        values = {**values, "data": shards} if values.get("data") == "SHARDS" else values
        cli, campaign = by_command_line(parser, command_line(values, shards)), by_campaign(values)
        assert type(cli) is type(campaign), (values, cli, campaign)
        if isinstance(cli, str):
            assert cli == campaign, values
            refused += 1
        else:
            same_settings(cli, campaign)  # type: ignore[arg-type]
            accepted += 1
    return accepted, refused


@pytest.mark.parametrize("axes", [STEP, RUN, WORKLOAD], ids=["step", "run", "workload"])
@pytest.mark.usefixtures("one_gpu")
def test_command_line_and_campaign_agree_on_each_group_of_axes(shards: str, axes: tuple[str, ...]) -> None:
    accepted, refused = check_agreement(axes, shards)
    assert accepted and refused  # both outcomes were compared


@pytest.mark.slow
@pytest.mark.usefixtures("one_gpu")
def test_command_line_and_campaign_agree_on_every_combination_of_the_axes_for_resnet50(shards: str) -> None:
    accepted, refused = check_agreement(OTHERS, shards)
    assert accepted and refused


@pytest.mark.slow
@pytest.mark.parametrize("group", [STEP, RUN], ids=["step", "run"])
@pytest.mark.usefixtures("one_gpu")
def test_command_line_and_campaign_agree_on_the_workload_axes_with_each_group(shards: str,
                                                                            group: tuple[str, ...]) -> None:
    accepted, refused = check_agreement((*WORKLOAD_AXES, *group), shards)
    assert accepted and refused


@pytest.mark.parametrize(("argv", "reason"), [
    (["--framework", "torch", "--xla"], "--xla is TensorFlow's (--framework tf)"),
    (["--framework", "tf", "--channels-last"], "--channels-last is PyTorch's (--framework torch)"),
])
def test_a_flag_of_the_other_framework_is_refused_not_recorded(argv: list[str], reason: str) -> None:
    """Accepted once, it did nothing and was still written into summary.json, so `compare` saw a difference."""
    args = build_parser().parse_args(["throughput", *argv, "--device", "cpu", "--batch-sizes", "1"])
    with pytest.raises(UsageError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        model_config(args)


def test_problems_lists_every_reason_first_the_one_shown() -> None:
    model = ModelConfig(framework="torch", precision="fp16", device="auto")
    assert problems(model) == []  # 'auto' is judged once resolved
    assert problems(model, device="cpu") == ["fp16 needs a GPU; use --precision bf16 or fp32 on the CPU"]
    found = problems(model, device="cpu", profiler="tf", loader="gpu")
    assert [reason.split(" ")[:2] for reason in found] == [["fp16", "needs"], ["the", "tf"], ["--loader", "gpu"]]


@pytest.mark.parametrize(("values", "expected"), [
    ({}, {"compile": False, "compile_mode": "default"}),
    ({"compile": None}, {"compile": False, "compile_mode": "default"}),  # the command line without --compile
    ({"compile": False}, {"compile": False, "compile_mode": "default"}),  # a matrix's false
    ({"compile": True}, {"compile": True, "compile_mode": "default"}),
    ({"compile": "default"}, {"compile": True, "compile_mode": "default"}),  # --compile alone
    ({"compile": "max-autotune"}, {"compile": True, "compile_mode": "max-autotune"}),
])
def test_model_config_from_reads_compile_as_both_sources_give_it(values: dict[str, Any],
                                                                 expected: dict[str, Any]) -> None:
    model = model_config_from({"device": "cuda", "loader": "gpu", **values})  # other keys are ignored
    assert {"compile": model.compile, "compile_mode": model.compile_mode} == expected


def test_a_compile_mode_without_compile_is_refused() -> None:
    """Only a hand-edited file can ask for it; recorded, it would say a mode ran that never did."""
    with pytest.raises(UsageError, match="compile mode 'max-autotune' without compile"):
        ModelConfig(compile_mode="max-autotune")


def test_the_profilers_ask_the_same_rule_in_one_line() -> None:
    """The worker's hooks (once a ValueError) and the profiled sweep's check say what the command line says."""
    from trainbench.config import ProfileConfig
    from trainbench.profile.run import check_profiler, make_profiler
    from trainbench.profile.session import framework_hooks

    reason = "the torch profiler profiles the torch engine: add --framework torch"
    with pytest.raises(UsageError, match=reason):
        framework_hooks(ProfileConfig(tool="torch"), "tf", "cpu")
    tf_config = BenchConfig(model=ModelConfig(framework="tf", device="cpu"), batch_size=1)
    with pytest.raises(UsageError, match=reason):
        check_profiler("torch", make_profiler("torch"), [tf_config], Path("unused"))
