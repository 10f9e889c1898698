"""The Llama workload (workloads/llama.py, engines/torch/workloads/llama.py): the published parameter counts of
Llama-3.1-8B and Llama-3.2-1B built on the meta device (shapes only, nothing allocated), and the tiny network
through the PyTorch runner on the CPU: tokens, parameters, FLOPs against the analytic count, no host sync."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from trainbench import workloads
from trainbench.config import BenchConfig, ModelConfig
from trainbench.engines import load_engine
from trainbench.engines.base import StepRunner
from trainbench.engines.torch.probe import probe_step
from trainbench.engines.torch.workloads import builder_of, flops
from trainbench.errors import UsageError

BATCH = 2
TINY_PARAMETERS = 139_584  # 2 layers of hidden 64, untied 512-token embedding and head


@pytest.fixture(scope="module")
def meta_networks() -> dict[str, tuple[ModelConfig, nn.Module]]:
    """The 1b and full networks on the meta device, built once (shapes only: 8 B parameters cost no memory)."""
    built = {}
    for size in ("full", "1b"):
        model = ModelConfig(workload="llama", size=size, device="cpu")
        with torch.device("meta"):
            built[size] = model, builder_of(model).build(model).train()
    return built


def unique_parameters(network: nn.Module) -> int:
    return sum(parameter.numel() for parameter in network.parameters())  # a tied matrix is listed once


def palm_flops(model: ModelConfig, multiplied: int) -> float:
    """Training FLOPs of one sequence by PaLM's appendix B: 6N + 12 x layers x hidden x seq_len per token, N the
    parameters the step multiplies (not the input embedding's look-up; the output projection, tied or not, is a
    product every token); causal attention not discounted, as FlopCounterMode counts SDPA in full."""
    dims, seq_len = model.spec.dims(model.size), model.param("seq_len")
    return (6 * multiplied + 12 * dims["layers"] * dims["hidden"] * seq_len) * seq_len


def multiplied_parameters(model: ModelConfig, network: nn.Module) -> int:
    dims = model.spec.dims(model.size)
    return unique_parameters(network) - (0 if dims["tied"] else dims["vocab"] * dims["hidden"])


@pytest.mark.parametrize("size, published", [("full", 8_030_261_248), ("1b", 1_235_814_400)])
def test_the_published_sizes_have_their_exact_parameter_counts(
        meta_networks: dict[str, tuple[ModelConfig, nn.Module]], size: str, published: int) -> None:
    _, network = meta_networks[size]
    assert unique_parameters(network) == published
    # 1B shares its embedding with the output projection, 8B does not (Llama-3.2-1B's and 3.1-8B's configs).
    tied = network.lm_head.weight is network.model.embed_tokens.weight  # type: ignore[union-attr]
    assert tied == (size == "1b")


@pytest.mark.parametrize("size", ["full", "1b"])
def test_the_published_sizes_train_at_palms_flops(meta_networks: dict[str, tuple[ModelConfig, nn.Module]],
                                                  size: str) -> None:
    # At 8,192 tokens: 474.4 T a sequence at full (57.9 G a token), 87.1 T at 1b; both within 0.01 % of PaLM's.
    model, network = meta_networks[size]
    builder = builder_of(model)
    batch = builder.synthetic_batch(model, 1, "meta", model.seed)
    counted = flops.count_step_flops(lambda: builder.loss(network, batch, 0.0))
    assert counted == pytest.approx(palm_flops(model, multiplied_parameters(model, network)), rel=0.001)


@pytest.fixture(scope="module")
def runner() -> StepRunner:
    model = ModelConfig(workload="llama", size="tiny", device="cpu")
    return load_engine("torch").make_runner(BenchConfig(model=model, batch_size=BATCH))


def test_the_tiny_runner_counts_tokens_parameters_and_flops(runner: StepRunner) -> None:
    model = ModelConfig(workload="llama", size="tiny", device="cpu")
    assert runner.tokens_per_step == BATCH * 32 and runner.parameters == TINY_PARAMETERS
    # The full sizes' count (palm_flops): counting the input embedding too would be 27 % over FlopCounterMode's
    # count at these widths. Measured +0.9 %: the CPU flash kernel's backward recomputes the scores (+1.2 %), and the
    # RMSNorm scales in N multiply nothing (-0.3 %).
    multiplied = runner.parameters - model.spec.dims("tiny")["vocab"] * model.spec.dims("tiny")["hidden"]
    expected = palm_flops(model, multiplied)
    assert runner.train_flops_per_sample == pytest.approx(expected, rel=0.02), runner.flops_note


def test_a_tiny_training_step_reads_nothing_on_the_host() -> None:
    model = ModelConfig(workload="llama", size="tiny", device="cpu")
    builder = builder_of(model)
    network = builder.build(model).train()
    probe = probe_step(builder, network, builder.synthetic_batch(model, BATCH, "cpu", 0), 0.0, contextlib.nullcontext)
    assert probe.host_syncs == []
    # Llama trains without dropout, so the CPU takes its flash kernel (GPT-2's attention dropout rules it out).
    assert probe.attention_kernel == "flash (cpu)"


def test_the_defaults_are_the_references() -> None:
    llama = workloads.get("llama")
    assert llama.default("seq_len") == llama.default("seq_len", "1b") == 8192 and llama.default("seq_len", "tiny") == 32
    assert llama.bounds("seq_len", "full") == (8, 131072) and llama.bounds("seq_len", "tiny") == (8, 128)
    assert llama.optimizer.base_learning_rate * 512 / 256 == pytest.approx(3e-4)  # 4M tokens of 8,192: 512 a step


def test_a_sequence_longer_than_tiny_positions_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^sequence length of --size tiny llama must be a whole number from 8 to "
                                         r"128") as refused:
        ModelConfig(workload="llama", size="tiny", seq_len=129)
    assert "\n" not in str(refused.value)
    ModelConfig(workload="llama", size="tiny", seq_len=128)


def test_tensorflow_and_a_size_the_workload_lacks_are_one_line() -> None:
    with pytest.raises(UsageError, match=r"^--workload llama has no tf implementation: the TensorFlow engine runs "
                                         r"tf_keras \(Keras 2\).*keras-hub's Llama is Keras 3") as refused:
        ModelConfig(framework="tf", workload="llama")
    assert "\n" not in str(refused.value)
    with pytest.raises(UsageError, match=r"^unknown size '1b': choose one of full, tiny$"):
        ModelConfig(workload="gpt2", size="1b")  # 1b is Llama's own
