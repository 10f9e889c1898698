"""The TensorFlow builders of every workload (engines/tf/workloads/), through the engine's runner, on the CPU.

Tiny sizes train in bfloat16 and under XLA (what every runner promises is the engine contract's); the full sizes
(slow) are built to check parameter counts against the published figures and the FLOP count against the analytic
one. Nothing here imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("official")

import tensorflow as tf
import tf_keras

from tests.test_workloads import BUILT_PARAMETERS
from trainbench import workloads
from trainbench.config import BenchConfig, ModelConfig, OptimizerConfig, TrainConfig
from trainbench.engines.tf.engine import ENGINE, FlopCountError, op_macs, parameter_count
from trainbench.errors import UsageError

TF_WORKLOADS = tuple(workload.name for workload in workloads.all_workloads() if "tf" in workload.frameworks)
BATCH = 2


def model_config(name: str, size: str = "tiny", **overrides: Any) -> ModelConfig:
    return ModelConfig(framework="tf", workload=name, size=size, device="cpu", **overrides)


def builder_of(model: ModelConfig) -> Any:
    return importlib.import_module(model.spec.builders["tf"]).BUILDER()


def test_every_tf_workload_has_a_builder():
    assert set(TF_WORKLOADS) == {"resnet50", "transformer", "bert", "retinanet"}
    assert "tf" not in workloads.get("gpt2").frameworks  # refused in its descriptor, in one line
    for name in TF_WORKLOADS:
        builder = builder_of(model_config(name))
        assert all(callable(getattr(builder, part)) for part in ("build", "synthetic_batch", "loss"))


# Every workload's tiny runner (samples, tokens, parameters, FLOPs, every layer trained) is the engine contract's,
# for both frameworks: tests/test_engine_contract.py.


def step_twice(model: ModelConfig) -> Any:
    runner = ENGINE.make_runner(BenchConfig(model=model, batch_size=BATCH))
    runner.step()
    runner.step()
    runner.sync()
    assert all(np.all(np.isfinite(variable.numpy())) for variable in runner.network.trainable_variables)
    return runner


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer", "bert"])
def test_sequence_workloads_train_in_bfloat16(name):
    runner = step_twice(model_config(name, precision="bf16"))
    dense = [layer for layer in runner.network.submodules if isinstance(layer, tf_keras.layers.Dense)]
    assert dense and all(layer.compute_dtype == "bfloat16" for layer in dense)
    assert all(variable.dtype == tf.float32 for variable in runner.network.trainable_variables)  # float32 masters


def must_compile_with_xla(runner: Any) -> bool:
    """Whether the runner's traced step holds a call that TensorFlow must compile with XLA."""
    graph = runner._step.get_concrete_function().graph.as_graph_def()
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    return any(node.attr["_XlaMustCompile"].b for node in nodes if "_XlaMustCompile" in node.attr)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer", "bert"])
def test_sequence_workloads_train_with_xla(name):
    assert must_compile_with_xla(step_twice(model_config(name, xla=True)))


def one_step_without_dropout(model: ModelConfig) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every trainable variable before and after one step of a fresh runner, with dropout off (XLA draws its masks
    with other random numbers than the graph does). SGD, not BERT's reference AdamW: Adam's first update is about
    lr x sign(gradient), so a gradient that rounds to either side of 0 would move a weight either way."""
    runner = ENGINE.make_runner(BenchConfig(model=model, batch_size=BATCH, optimizer=OptimizerConfig()))
    for layer in runner.network.submodules:
        if isinstance(layer, tf_keras.layers.Dropout):
            layer.rate = 0.0
    before = [variable.numpy().copy() for variable in runner.network.trainable_variables]
    runner.step()
    runner.sync()
    return before, [variable.numpy() for variable in runner.network.trainable_variables]


@pytest.mark.slow
def test_xla_step_matches_the_graph_step():
    """Same seed: the same initial weights and batch; XLA's step moves every variable as the graph's step does (to
    rounding: XLA fuses and reorders the arithmetic). Tiny BERT: XLA compiles it in seconds, ResNet-50 in half a
    minute (test_tf_engine checks that ResNet-50's step is marked for XLA)."""
    graph_before, graph_after = one_step_without_dropout(model_config("bert"))
    xla_before, xla_after = one_step_without_dropout(model_config("bert", xla=True))
    moved = 0
    for g0, g1, x0, x1 in zip(graph_before, graph_after, xla_before, xla_after, strict=True):
        np.testing.assert_array_equal(x0, g0)
        graph_delta, xla_delta = g1 - g0, x1 - x0
        moved += bool(np.abs(graph_delta).max() > 0)
        # To 1 % of the variable's largest move: float32 sums in another order differ most, relatively, on the
        # smallest moves (one of 2,048 by 2.4 % at 0.1 % of the largest); a wrong step misses by far more.
        np.testing.assert_allclose(xla_delta, graph_delta, rtol=1e-2, atol=1e-2 * np.abs(graph_delta).max() + 1e-12)
    assert moved >= len(graph_before) // 2


def test_synthetic_batches_are_what_the_workloads_say():
    transformer = model_config("transformer")
    source, target = builder_of(transformer).synthetic_batch(transformer, 3, "/cpu:0", 1)
    assert source.shape == target.shape == (3, transformer.param("seq_len"))
    assert int(tf.reduce_min(source)) >= 1 and int(tf.reduce_min(target)) >= 1  # no padding id 0
    bert = model_config("bert")
    inputs, labels = builder_of(bert).synthetic_batch(bert, 3, "/cpu:0", 1)
    positions = inputs["masked_lm_positions"].numpy()
    assert positions.shape == (3, round(0.15 * bert.param("seq_len")))
    assert all(len(set(row)) == len(row) and row.min() >= 1 for row in positions)  # distinct, never [CLS]
    assert labels["masked_lm_ids"].shape == positions.shape
    retinanet = model_config("retinanet")
    images, targets = builder_of(retinanet).synthetic_batch(retinanet, 2, "/cpu:0", 1)
    assert images.shape == (2, retinanet.param("image_size"), retinanet.param("image_size"), 3)
    boxes = retinanet.spec.dims("tiny")["boxes_per_image"]
    assert float(tf.reduce_sum(targets["box_weights"])) >= 2 * boxes  # every box is matched to an anchor at least


def test_train_refuses_retinanet_in_one_line():  # the sequence workloads train: test_tf_training_workloads.py
    with pytest.raises(UsageError) as caught:
        ENGINE.make_trainer(TrainConfig(model=model_config("retinanet"), batch_size=2))
    assert "\n" not in str(caught.value) and "--workload retinanet" in str(caught.value)


def test_op_macs_counts_products_and_convolutions():
    @tf.function
    def products(a: tf.Tensor, b: tf.Tensor, images: tf.Tensor, kernel: tf.Tensor) -> Any:
        return (tf.matmul(a, b), tf.matmul(a, b, transpose_a=True), tf.einsum("bij,jk->bik", tf.stack([a, a]), b),
                tf.nn.conv2d(images, kernel, 1, "SAME"), a + a)

    specs = [tf.TensorSpec((4, 4)), tf.TensorSpec((4, 5)), tf.TensorSpec((2, 8, 8, 3)), tf.TensorSpec((3, 3, 3, 6))]
    counts = {op.type: op_macs(op) for op in products.get_concrete_function(*specs).graph.get_operations()
              if op_macs(op)}
    assert counts == {"MatMul": 4 * 5 * 4, "Einsum": 2 * 4 * 4 * 5, "Conv2D": 2 * 8 * 8 * 6 * 3 * 3 * 3}

    @tf.function
    def unknown(a: tf.Tensor) -> tf.Tensor:
        return tf.matmul(a, a)

    graph = unknown.get_concrete_function(tf.TensorSpec((None, None))).graph
    with pytest.raises(FlopCountError, match="unknown shape"):
        sum(op_macs(op) for op in graph.get_operations())


# --- full sizes (slow): the published networks --------------------------------------------------------------

# Published parameter counts and how close the built network must be.
PUBLISHED = {
    "resnet50": (25_557_032, 0.0),  # torchvision's and Keras' ResNet-50 (25.56 M), to the parameter
    "transformer": (61e6, 0.01),  # Transformer-base with a 33,708-token shared vocabulary: about 61 M
    "bert": (110e6, 0.005),  # BERT-base: about 110 M
    "retinanet": (34e6, 0.02),  # RetinaNet ResNet-50-FPN, 91 classes: about 34 M
}


def transformer_train_flops(model: ModelConfig) -> float:
    """6 x multiply-adds per sentence pair: each token through its stack's matrices, the tied output projection
    over the target, and attention (encoder self, decoder self and cross), as Kaplan et al. count them."""
    d, s = model.spec.dims("full"), model.param("seq_len")
    h, f, layers, vocab = d["hidden"], d["ffn"], d["layers"], d["vocab"]
    per_token = layers * (4 * h * h + 2 * h * f) + layers * (8 * h * h + 2 * h * f) + h * vocab
    return 6 * (s * per_token + 3 * layers * 2 * s * s * h)


def bert_train_flops(model: ModelConfig) -> float:
    """6 x multiply-adds per sequence: the encoder's matrices and attention, the pooler, and the masked-LM head over
    the masked positions only (BertPretrainerV2 gathers them before its vocabulary projection)."""
    d, s = model.spec.dims("full"), model.param("seq_len")
    h, f, layers, vocab = d["hidden"], d["ffn"], d["layers"], d["vocab"]
    masked = round(0.15 * s)
    return 6 * (s * layers * (4 * h * h + 2 * h * f) + layers * 2 * s * s * h + masked * (h * h + h * vocab))


@pytest.mark.slow
def test_full_size_parameters_and_flops():
    # FLOPs per sample of a training step, counted from the traced graph at batch 1; each network built once, its
    # parameters counted on the runner's network (RetinaNet's FLOPs are not checked: its network alone).
    runners = {name: ENGINE.make_runner(BenchConfig(model=model_config(name, "full"), batch_size=1))
               for name in ("resnet50", "transformer", "bert")}
    for name, (published, tolerance) in PUBLISHED.items():
        model = model_config(name, "full")
        network = runners[name].network if name in runners else builder_of(model).build(model)
        counted = parameter_count(network)
        assert abs(counted - published) <= tolerance * published, (name, counted)
        assert counted == BUILT_PARAMETERS[name]["tf"], name
        if name in runners:
            assert runners[name].parameters == counted
    flops = {name: runner.train_flops_per_sample for name, runner in runners.items()}
    assert flops["resnet50"] == pytest.approx(3 * 8.2e9, rel=0.05)  # 4.1 G multiply-adds forward at 224 px
    assert flops["transformer"] == pytest.approx(transformer_train_flops(model_config("transformer", "full")), rel=0.02)
    assert flops["bert"] == pytest.approx(bert_train_flops(model_config("bert", "full")), rel=0.02)
