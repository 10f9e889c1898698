"""The PyTorch workloads' training steps as a GPU would run them, checked on the CPU at --size tiny: no host sync
in any step but RetinaNet's counted ones (engines/torch/host_syncs.py), the same attention call eager and compiled,
the attention kernel each step names (engines/torch/attention.py), and --cuda-graph refused where a step syncs."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.attention import KERNELS, attention_kernel
from trainbench.engines.torch.host_syncs import HostSync, HostSyncMode, describe, host_syncs
from trainbench.engines.torch.probe import probe_step
from trainbench.engines.torch.workloads import Batch, TorchBuilder, builder_of, gpt2, retinanet
from trainbench.errors import UsageError

BATCH = 2
ATTENTION = ("transformer", "bert", "gpt2")
NO_SYNC = ("resnet50", *ATTENTION)


@dataclass
class Built:
    model: ModelConfig
    builder: TorchBuilder
    network: nn.Module
    batch: Batch


@pytest.fixture(scope="module")
def networks() -> dict[str, Built]:
    return {}  # filled by built(): each tiny network made once for the whole file


def built(networks: dict[str, Built], workload: str) -> Built:
    if workload not in networks:
        model = ModelConfig(workload=workload, size="tiny", device="cpu")
        builder = builder_of(model)
        torch.manual_seed(model.seed)
        networks[workload] = Built(model, builder, builder.build(model), builder.synthetic_batch(model, BATCH, "cpu",
                                                                                                 model.seed))
    return networks[workload]


def no_autocast() -> contextlib.AbstractContextManager[Any]:
    return torch.autocast("cpu", enabled=False)


@contextlib.contextmanager
def evaluating(network: nn.Module) -> Any:
    """The network without dropout for a while: the CPU's flash kernel has none, so only then does it run."""
    network.eval()
    try:
        yield
    finally:
        network.train()


# --- the detector ---------------------------------------------------------------------------------------------


def test_the_detector_finds_each_kind_of_host_read_and_where() -> None:
    x = torch.arange(6.0)
    mask = x > 2
    with HostSyncMode() as mode:
        x.sum().item()
        bool(x[0] == 0)
        _ = 3.0 in x
        torch.where(mask)
        x[mask]
        torch.equal(x, x)
        torch.unique(x)
        torch.repeat_interleave(x.long(), x.long())
        y = torch.zeros(6, 2)
        y[mask, torch.tensor([1])] = 1.0  # a mask and a second index tensor: index_put through nonzero
    ops = [sync.op for sync in mode.syncs]
    assert ops == ["aten._local_scalar_dense.default"] * 3 + [
        "aten.nonzero.default", "aten.index.Tensor", "aten.equal.default", "aten._unique2.default",
        "aten.repeat_interleave.Tensor", "aten.index_put_.default"]
    assert all(sync.where.startswith("tests/test_torch_step_paths.py:") for sync in mode.syncs), describe(mode.syncs)
    assert mode.syncs[0].where.endswith("in test_the_detector_finds_each_kind_of_host_read_and_where")


def test_the_detector_passes_what_reads_nothing() -> None:
    x = torch.arange(6.0, requires_grad=True)
    mask = x.detach() > 2

    def quiet() -> None:
        y = x * 2
        y.detach()[mask] = 0.0  # one mask, a host constant: index_put runs as masked_fill_
        torch.repeat_interleave(x.detach().long(), x.detach().long(), output_size=15)
        x[x.detach().long()].sum().backward()  # integer indices, forward and backward

    assert host_syncs(quiet) == []


def test_a_sync_in_the_backward_pass_names_its_autograd_node() -> None:
    x = torch.arange(6.0, requires_grad=True)
    syncs = host_syncs(lambda: x[x.detach() > 2].sum().backward())
    assert [sync.where for sync in syncs] == [syncs[0].frames[0], "IndexBackward0 (backward)"]


# --- host syncs of the steps ----------------------------------------------------------------------------------


def step_host_syncs(builder: Any, network: nn.Module, batch: Any, smoothing: float = 0.0) -> list[HostSync]:
    """The host syncs of one training step (forward, loss, backward), as the engine's probe counts them."""
    return probe_step(builder, network, batch, smoothing, no_autocast).host_syncs


def step_attention_kernel(builder: Any, network: nn.Module, batch: Any, smoothing: float, autocast: Any) -> str | None:
    return probe_step(builder, network, batch, smoothing, autocast).attention_kernel


@pytest.mark.parametrize("workload", NO_SYNC)
def test_a_training_step_reads_nothing_on_the_host(networks: dict[str, Built], workload: str) -> None:
    parts = built(networks, workload)
    syncs = step_host_syncs(parts.builder, parts.network, parts.batch, 0.1)
    assert syncs == [], describe(syncs)


def test_gpt2_under_transformers_stock_sdpa_reads_the_packed_sequence_check() -> None:
    # What gpt2.CAUSAL_SDPA avoids: the stock name's mask path reads a device value every eager step.
    model = ModelConfig(workload="gpt2", size="tiny", device="cpu")
    builder = builder_of(model)
    network = gpt2.transformers.GPT2LMHeadModel(gpt2.config(model))  # the builder's, before it renames attention
    assert network.config._attn_implementation == "sdpa"
    syncs = step_host_syncs(builder, network, builder.synthetic_batch(model, BATCH, "cpu", 0))
    assert [sync.where.split(" in ")[-1] for sync in syncs] == ["find_packed_sequence_indices"], describe(syncs)


def test_retinanet_syncs_the_recorded_times_per_image(networks: dict[str, Built]) -> None:
    parts = built(networks, "retinanet")
    syncs = step_host_syncs(parts.builder, parts.network, parts.batch)
    assert len(syncs) == retinanet.HOST_SYNCS_PER_IMAGE * BATCH, describe(syncs)
    assert all(sync.backward_of or sync.where.startswith("torchvision/models/detection/") for sync in syncs)


def test_cuda_graph_is_refused_in_one_line_where_the_step_syncs() -> None:
    with pytest.raises(UsageError) as refused:
        ModelConfig(workload="retinanet", cuda_graph=True, device="cuda")
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert message.startswith("--cuda-graph does not apply to --workload retinanet")
    assert f"{retinanet.HOST_SYNCS_PER_IMAGE} times per image" in message  # the descriptor's count is the builder's
    for workload in NO_SYNC:  # steps with no sync may be captured
        assert ModelConfig(workload=workload, cuda_graph=True, device="cuda", precision="bf16").cuda_graph


# --- the attention kernel -------------------------------------------------------------------------------------


@pytest.mark.parametrize("workload", [*NO_SYNC, "retinanet"])
def test_each_step_names_its_attention_kernel(networks: dict[str, Built], workload: str) -> None:
    parts = built(networks, workload)

    def kernel() -> str | None:
        return step_attention_kernel(parts.builder, parts.network, parts.batch, 0.1, no_autocast)

    if workload not in ATTENTION:
        assert kernel() is None
        return
    assert kernel() == "math"  # training: dropout sends the CPU to SDPA's math fallback
    with evaluating(parts.network):
        assert kernel() == "flash (cpu)"


def test_several_kernels_are_named_together_in_a_fixed_order() -> None:
    q = torch.randn(1, 2, 8, 16)

    def both() -> None:
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)  # math
        F.scaled_dot_product_attention(q, q, q, is_causal=True)  # the CPU's flash

    assert attention_kernel(both) == "flash (cpu), math"
    assert attention_kernel(lambda: torch.softmax(q @ q.transpose(-1, -2), -1) @ q) == "math"  # written by hand


def test_naming_the_kernel_leaves_the_network_and_generators_as_they_were(networks: dict[str, Built]) -> None:
    parts = built(networks, "bert")
    before = torch.get_rng_state()
    step_attention_kernel(parts.builder, parts.network, parts.batch, 0.1, no_autocast)
    assert torch.equal(torch.get_rng_state(), before)
    assert all(parameter.grad is None for parameter in parts.network.parameters())


# --- eager and compiled: the same attention call --------------------------------------------------------------


def sdpa_calls_eager(parts: Built, network: nn.Module) -> list[tuple[str, bool, bool]]:
    calls: list[tuple[str, bool, bool]] = []

    class Calls(HostSyncMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            if func in KERNELS:
                calls.append(sdpa_call(func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    with Calls():
        parts.builder.loss(network, parts.batch, 0.0)
    return calls


def sdpa_calls_compiled(parts: Built, network: nn.Module) -> list[tuple[str, bool, bool]]:
    """The attention calls in the aten graph torch.compile traces (AOT autograd's forward graph, before Inductor)."""
    from torch._dynamo.backends.common import aot_autograd

    calls: list[tuple[str, bool, bool]] = []

    def forward_graph(graph: torch.fx.GraphModule, inputs: Any) -> Any:
        calls.extend(sdpa_call(node.target, node.args, node.kwargs) for node in graph.graph.nodes
                     if node.op == "call_function" and node.target in KERNELS)
        return graph.forward

    torch._dynamo.reset()
    compiled = torch.compile(network, backend=aot_autograd(fw_compiler=forward_graph), dynamic=False)
    parts.builder.loss(cast(nn.Module, compiled), parts.batch, 0.0)
    torch._dynamo.reset()
    return calls


def sdpa_call(func: Any, args: Any, kwargs: dict[str, Any]) -> tuple[str, bool, bool]:
    """(kernel, is_causal, an explicit mask given) of one attention operation."""
    bound = {**dict(zip([argument.name for argument in func._schema.arguments], args, strict=False)), **kwargs}
    return KERNELS[func], bool(bound.get("is_causal", False)), bound.get("attn_mask") is not None


@pytest.mark.slow
@pytest.mark.parametrize("workload", ATTENTION)
def test_eager_and_compiled_steps_make_the_same_attention_calls(networks: dict[str, Built], workload: str) -> None:
    # Without dropout, so the CPU runs its flash kernel, whose arguments show the mask and is_causal.
    parts = built(networks, workload)
    with evaluating(parts.network):
        eager = sdpa_calls_eager(parts, parts.network)
        assert eager and eager == sdpa_calls_compiled(parts, parts.network)
    if workload == "gpt2":
        assert set(eager) == {("flash (cpu)", True, False)}  # causal by is_causal, no mask: flash on a GPU
        # The stock "sdpa" name: traced, every layer gets an explicit mask and no is_causal (FIDELITY's bug 4).
        stock = gpt2.transformers.GPT2LMHeadModel(gpt2.config(parts.model)).eval()
        assert set(sdpa_calls_compiled(parts, stock)) == {("flash (cpu)", False, True)}
