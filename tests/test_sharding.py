"""FSDP and activation checkpointing (issue 41), on the CPU at --size tiny: each rank of an FSDP run holds half the
parameters and trains the same step as DDP; a checkpointed step keeps less, runs more FLOPs (hfu above mfu) and
computes the same losses; the settings are refused where they cannot run, in one line."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.distributed.fsdp import FSDPModule

from tests.conftest import assert_one_line_error, run_cli
from trainbench.bench.work import work_values
from trainbench.config import BenchConfig, LaunchConfig, ModelConfig, TrainConfig, problems
from trainbench.engines.torch.engine import ENGINE
from trainbench.errors import UsageError
from trainbench.results.peaks import Peak

STEPS = 3


def tiny(workload: str = "llama", **settings: Any) -> ModelConfig:
    return ModelConfig(workload=workload, size="tiny", device="cpu", **settings)


def stepped_losses(model: ModelConfig, batch_size: int = 4,
                   launch: LaunchConfig | None = None) -> tuple[Any, list[float]]:
    """A throughput runner of ``model`` and the losses of its first STEPS steps."""
    runner = ENGINE.make_runner(BenchConfig(model=model, batch_size=batch_size, launch=launch or LaunchConfig()))
    for _ in range(STEPS):
        runner.step()
    return runner, runner.take_losses()


@pytest.fixture(scope="module")
def checkpointing() -> dict[str, tuple[Any, list[float]]]:
    return {mode: stepped_losses(tiny(activation_checkpointing=mode)) for mode in ("none", "full")}


def test_a_checkpointed_step_keeps_less_and_computes_the_same_losses(checkpointing: dict[str, Any]) -> None:
    (plain, plain_losses), (checkpointed, losses) = checkpointing["none"], checkpointing["full"]
    assert checkpointed.step_record["activation_checkpointing"] == "full"
    # Each block keeps its input alone (counted from the block's call), not everything its forward saved.
    assert 0 < checkpointed.memory().activations < 0.5 * plain.memory().activations
    # The recomputed forward is the same arithmetic in the same order: the same losses, step after step.
    assert losses == pytest.approx(plain_losses, rel=1e-6, abs=0.0)


class Blocks(torch.nn.Module):
    """Two blocks of a product and a ReLU, in a ModuleList as a transformer's layers are."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
                                          for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def test_a_checkpointed_block_keeps_its_input_and_nothing_else() -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    from trainbench.engines.torch.memory import activation_bytes

    network, x = Blocks(), torch.randn(4, 8)
    plain = activation_bytes(network, lambda: network(x).sum())
    # 4 x 8 fp32 (128 bytes) each: x (the first product's input), the first ReLU's output (which the second product
    # saves too: one storage) and the second ReLU's output.
    assert plain == 3 * 128
    for index, layer in enumerate(network.layers):
        network.layers[index] = checkpoint_wrapper(layer)
    assert activation_bytes(network, lambda: network(x).sum()) == 2 * 128  # the two blocks' inputs alone


def test_recomputation_adds_at_most_the_blocks_forward_to_the_hardware_flops(checkpointing: dict[str, Any]) -> None:
    (plain, _), (checkpointed, _) = checkpointing["none"], checkpointing["full"]
    model_flops = plain.train_flops_per_sample
    assert checkpointed.train_flops_per_sample == model_flops == plain.hardware_flops_per_sample  # MFU's count
    added = checkpointed.hardware_flops_per_sample - model_flops
    # A forward pass is a third of its training FLOPs (backward: twice), and the blocks are not all of the network
    # (embedding, output projection, loss): what is recomputed is more than nothing and less than a third. PyTorch
    # stops recomputing once the backward has what it needs (a block's last product is not run again).
    assert 0 < added < model_flops / 3


def test_hfu_exceeds_mfu_by_the_recomputed_share() -> None:
    peak = Peak(1e12, "a stand-in GPU's peak")
    values = work_values(1000.0, 32.0, 2e7, peak, hardware_flops_per_sample=2.5e7)
    assert values["mfu"] == pytest.approx(0.02)
    assert values["hfu"] == pytest.approx(0.025)
    assert work_values(1000.0, 32.0, 2e7, peak)["hfu"] == values["mfu"]  # nothing recomputed: the same
    assert work_values(1000.0, 32.0, 2e7, Peak(None, "the CPU"), 2.5e7)["hfu"] is None  # no peak, no HFU


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rank(rank: int, port: int, out: str) -> None:
    """One of two gloo ranks: DDP's then FSDP's first steps of tiny llama from the same seed, written to out."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    found = {}
    for shard in ("ddp", "fsdp"):
        runner, losses = stepped_losses(tiny(shard=shard), 2, LaunchConfig(processes_per_node=2))
        units = sum(isinstance(module, FSDPModule) for module in runner.network.modules())
        found[shard] = {"losses": losses, "held": runner.parameters_held, "parameters": runner.parameters,
                        "units": units, "parameter_bytes": runner.memory().parameters,
                        "flops": runner.train_flops_per_sample, "activations": runner.memory().activations,
                        "record": runner.step_record["shard"]}
    Path(out, f"rank{rank}.json").write_text(json.dumps(found))
    torch.distributed.destroy_process_group()


def test_fsdp_ranks_hold_half_the_parameters_and_train_ddps_step(tmp_path: Path) -> None:
    torch.multiprocessing.spawn(_rank, args=(free_port(), str(tmp_path)), nprocs=2)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for found in ranks:
        ddp, fsdp = found["ddp"], found["fsdp"]
        assert (ddp["record"], fsdp["record"]) == ("ddp", "fsdp")
        assert (ddp["units"], fsdp["units"]) == (0, 2 + 1)  # each of tiny llama's 2 blocks sharded, then the root
        assert ddp["held"] == ddp["parameters"] == fsdp["parameters"]  # a replica holds every parameter
        assert fsdp["parameter_bytes"] == 4 * fsdp["held"]  # this rank's fp32 shards only
        # FSDP never runs the whole network: its FLOPs are the meta device's count, its activations measured on the
        # shards with the gathered parameters left out; both are DDP's figures.
        assert (fsdp["flops"], fsdp["activations"]) == (ddp["flops"], ddp["activations"])
        # Same data on each rank, gradients averaged either way: the same losses (another reduction order).
        assert fsdp["losses"] == pytest.approx(ddp["losses"], rel=1e-5)
    # Every parameter is split over the two ranks (dim-0 shards, the odd row on rank 0).
    held = [found["fsdp"]["held"] for found in ranks]
    assert sum(held) == ranks[0]["fsdp"]["parameters"]
    assert abs(held[0] - held[1]) <= 0.05 * sum(held)


def test_two_fsdp_ranks_merge_into_one_result_with_each_ranks_share(tmp_path: Path) -> None:
    result = run_cli("throughput", "--workload", "llama", "--size", "tiny", "--device", "cpu", "--gpus", "2",
                     "--shard", "fsdp", "--activation-checkpointing", "full", "--batch-sizes", "2", "--warmup", "1",
                     "--steps", "2", "--telemetry-interval", "0", "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    (summary,) = tmp_path.glob("*/summary.json")
    (row,) = json.loads(summary.read_text())["results"]
    assert row["status"] == "ok", row
    assert (row["world_size"], row["shard"], row["activation_checkpointing"]) == (2, "fsdp", "full")
    assert row["tokens_per_sec"] == pytest.approx(row["samples_per_sec"] * 32)
    assert row["mfu"] is None and "CPU" in row["mfu_note"]  # no GPU peak to measure MFU against
    assert row["hardware_flops_per_sample"] > row["train_flops_per_sample"]
    shares = [rank["parameters_held"] for rank in row["ranks"]]
    assert sum(shares) == row["parameters"] and max(shares) == row["parameters_held"] < row["parameters"]


@pytest.mark.parametrize("settings, launch, device, fragment", [
    ({"shard": "fsdp"}, LaunchConfig(), "cpu", "--shard fsdp shards the model over several processes"),
    ({"shard": "fsdp", "precision": "fp16"}, LaunchConfig(processes_per_node=2), "cuda", "fp16's loss scaling"),
    ({"workload": "resnet50", "activation_checkpointing": "full"}, None, "cpu", "batch norm's running statistics"),
    ({"workload": "transformer", "framework": "tf", "activation_checkpointing": "full"}, None, "cpu",
     "is PyTorch's"),
    ({"workload": "transformer", "framework": "tf", "shard": "fsdp"}, None, "cpu", "is PyTorch's"),
])
def test_settings_that_cannot_run_are_refused(settings: dict[str, Any], launch: LaunchConfig | None, device: str,
                                              fragment: str) -> None:
    settings = {"workload": "llama", "size": "tiny", **settings}
    with pytest.raises(UsageError, match=None) as refused:
        model = ModelConfig(**{"device": device, **settings})
        found = problems(model, launch=launch)
        if found:
            raise UsageError(found[0])
    assert fragment in str(refused.value)


def test_train_refuses_fsdp() -> None:
    with pytest.raises(UsageError, match="whole-model checkpoints"):
        TrainConfig(model=tiny(shard="fsdp"), launch=LaunchConfig(processes_per_node=2))


def test_the_command_line_refuses_fsdp_without_processes(tmp_path: Path) -> None:
    result = run_cli("throughput", "--workload", "llama", "--size", "tiny", "--device", "cpu", "--shard", "fsdp",
                     "--output", str(tmp_path))
    assert_one_line_error(result, "--shard fsdp", "--gpus N")
    assert not list(tmp_path.iterdir())
