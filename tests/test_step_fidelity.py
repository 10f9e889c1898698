"""Issue 40: a comparison measures the hardware, not the suite's choices. Every timed run trains with its workload's
reference optimizer, runs fp32's products as ``--matmul-precision`` says in both frameworks, records its memory,
and is never a result when its timed steps did not train (a non-finite loss, fp16 updates skipped)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, run_main
from tests.standins.engine import StandInEngine
from trainbench import workloads
from trainbench.bench.memory import RESIDENT_PEAK, reset_resident_peak, resident_peak_bytes
from trainbench.bench.trained import check_trained
from trainbench.bench.worker import measure, run
from trainbench.cli.main import build_parser
from trainbench.cli.options import bench_configs, model_config
from trainbench.config import OTHER_OPTIMIZERS, BenchConfig, ModelConfig, OptimizerConfig
from trainbench.engines import load_engine
from trainbench.results.failure import DivergedError
from trainbench.results.records import Status

# What each workload's reference trains with (its descriptor's ReferenceOptimizer): name, label smoothing.
REFERENCES = {"resnet50": ("sgd", 0.1), "retinanet": ("sgd", 0.0), "bert": ("adamw", 0.0), "gpt2": ("adamw", 0.0),
              "transformer": ("adam", 0.1)}


def tiny(workload: str, framework: str = "torch", **model: Any) -> ModelConfig:
    return ModelConfig(framework=framework, workload=workload, size="tiny", device="cpu", **model)


@pytest.mark.parametrize("workload", sorted(REFERENCES))
def test_a_timed_run_trains_with_its_workloads_reference_optimizer(workload: str) -> None:
    config = BenchConfig(model=tiny(workload), batch_size=2)
    reference = workloads.get(workload).optimizer
    assert (config.optimizer.name, config.optimizer.label_smoothing) == REFERENCES[workload]
    assert (config.optimizer.base_learning_rate, config.optimizer.weight_decay, config.optimizer.beta2) == \
        (reference.base_learning_rate, reference.weight_decay, reference.beta2)


def test_another_optimizer_takes_its_usual_settings_and_keeps_the_tasks_smoothing() -> None:
    args = build_parser().parse_args(["throughput", "--workload", "transformer", "--size", "tiny", "--device", "cpu",
                                      "--optimizer", "sgd", "--batch-sizes", "2"])
    (config,) = bench_configs(args, model_config(args))
    assert (config.optimizer.name, config.optimizer.base_learning_rate, config.optimizer.weight_decay) == \
        ("sgd", *OTHER_OPTIMIZERS["sgd"])
    assert config.optimizer.label_smoothing == 0.1  # the Transformer's loss, whatever updates the weights
    assert OptimizerConfig.reference("gpt2", "adamw") == OptimizerConfig.reference("gpt2")  # the reference's own


def test_an_unknown_optimizer_is_refused_in_one_line_before_a_run_folder(tmp_path: Any) -> None:
    result = run_main("throughput", "--optimizer", "lamb", "--device", "cpu", "--output", str(tmp_path))
    assert_one_line_error(result, "unknown optimizer 'lamb': choose one of sgd, adam, adamw")
    assert not any(tmp_path.iterdir())


FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_both_frameworks_set_the_same_matmul_precision_and_read_it_back(framework: str) -> None:
    module = pytest.importorskip(FRAMEWORK_MODULES[framework])
    engine = load_engine(framework)
    for precision in ("high", "highest"):  # the default last: the process is left as the tests after expect
        runner = engine.make_runner(BenchConfig(model=tiny("transformer", framework, matmul_precision=precision),
                                                batch_size=2))
        assert runner.step_record["matmul_precision"] == precision
        if framework == "torch":
            assert module.get_float32_matmul_precision() == precision
            assert module.backends.cudnn.allow_tf32 is (precision == "high")  # convolutions too
            assert module.backends.mkldnn.matmul.fp32_precision == "ieee"  # TF32 is a GPU's, never the CPU's
        else:
            assert module.config.experimental.tensor_float_32_execution_enabled() is (precision == "high")


def test_a_translation_pair_counts_its_target_tokens() -> None:
    """fairseq's and NVIDIA's wps: tokens/s = pairs/s x target tokens, not source and target."""
    transformer = workloads.get("transformer")
    assert transformer.tokens_per_sample({"seq_len": 16}) == 16


# --- a diverged run is never a result ------------------------------------------------------------------------------


def nan_at(call: int) -> Any:
    """A stand-in step whose ``call``-th call (from 1) returns a NaN loss, the others 1."""
    calls = [0]

    def step() -> float:
        calls[0] += 1
        return math.nan if calls[0] == call else 1.0

    return step


def test_a_nan_loss_inside_a_window_fails_the_batch_size_naming_the_step() -> None:
    config = BenchConfig(model=tiny("gpt2"), batch_size=2, warmup_steps=3, steps=4, windows=2,
                         telemetry_interval_s=0)
    payload = run(config, lambda c, e, t: measure(c, StandInEngine("x", nan_at(3 + 4 + 2))))  # type: ignore[arg-type]
    assert payload["result"]["status"] == Status.DIVERGED
    assert "timed step 2 of window 2" in payload["result"]["error"]
    warm = run(config, lambda c, e, t: measure(c, StandInEngine("x", nan_at(2))))  # type: ignore[arg-type]
    assert warm["result"]["status"] == Status.OK  # the warm-up is not timed: its losses are set aside


def test_a_real_run_that_diverges_is_recorded_diverged() -> None:
    """GPT-2 under AdamW at a learning rate of 1e30: the first update sends every weight to about 1e30."""
    config = BenchConfig(model=tiny("gpt2"), batch_size=2, warmup_steps=0, steps=3, telemetry_interval_s=0,
                         optimizer=OptimizerConfig(name="adamw", base_learning_rate=1e32))
    payload = run(config)
    assert payload["result"]["status"] == Status.DIVERGED, payload["result"]
    assert "timed step 2 of window 1" in payload["result"]["error"]


def test_skipped_fp16_updates_inside_the_windows_are_a_divergence() -> None:
    check_trained([1.0, 0.9], 2, 65536.0, 65536.0)
    check_trained([1.0], 1, 32768.0, 65536.0)  # the scale grew: no update skipped
    with pytest.raises(DivergedError, match="loss scale fell from 65536 to 32768"):
        check_trained([1.0, 0.9], 2, 65536.0, 32768.0)
    with pytest.raises(DivergedError, match="the loss was inf at the last timed step"):
        check_trained([math.inf], 5, None, None)  # a captured step keeps its last loss only


# --- memory --------------------------------------------------------------------------------------------------------


def test_the_cpu_peak_is_the_workers_resident_set_over_the_windows() -> None:
    if resident_peak_bytes() is None or not reset_resident_peak():
        pytest.skip("no /proc/self/status or clear_refs here")
    values = measure(BenchConfig(model=tiny("gpt2"), batch_size=2, warmup_steps=1, steps=2, telemetry_interval_s=0),
                     StandInEngine("x", lambda: bytearray(64 << 20), parameters=10)).result.values  # type: ignore[arg-type]
    assert values["peak_memory_kind"] == RESIDENT_PEAK
    assert values["peak_memory_bytes"] >= 64 << 20  # the step's 64 MiB were resident at its peak
    assert values["memory_parameters_bytes"] == 40 and values["memory_activations_bytes"] is None


def test_the_activations_are_what_the_backward_pass_keeps_parameters_left_out() -> None:
    torch = pytest.importorskip("torch")
    from trainbench.engines.torch import memory

    network = torch.nn.Linear(8, 16, bias=False)
    inputs = torch.ones(2, 8, requires_grad=True)  # as a layer's input inside a network: its gradient is needed
    # The product keeps its input (2 x 8 fp32: 64 B) and its weight (a parameter: not an activation); the square
    # keeps the product's output (2 x 16: 128 B); the sum keeps nothing but a shape.
    assert memory.activation_bytes(network, lambda: (network(inputs) ** 2).sum()) == 64 + 128
    assert network.weight.grad is None  # the probe step leaves no gradient behind


def test_a_sequence_longer_than_a_tiny_networks_positions_is_refused_before_any_worker(tmp_path: Any) -> None:
    result = run_main("throughput", "--workload", "gpt2", "--size", "tiny", "--seq-len", "65", "--device", "cpu",
                      "--output", str(tmp_path))
    assert_one_line_error(result, "sequence length of --size tiny gpt2 must be a whole number from 8 to 64, got 65")
    assert not any(tmp_path.iterdir())  # no run folder, so no worker
