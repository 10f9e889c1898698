"""The TensorFlow engine on the CPU, with a small ResNet-50 input (32x32) so each test takes seconds.

What both engines promise (devices, fp16 refusal, step counts, checkpoints, out-of-memory recognition) is in
test_engine_contract.py; this module tests what only TensorFlow does.

TensorFlow and PyTorch must not be imported into one process in that order (it crashes): nothing here imports torch.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

# Skipped, not failed, where the TensorFlow extra is not installed.
pytest.importorskip("tensorflow")
pytest.importorskip("official")

import tensorflow as tf
import tf_keras

from tests.test_tf_workloads import must_compile_with_xla
from trainbench.config import BenchConfig, ModelConfig, OptimizerConfig, TrainConfig
from trainbench.engines.tf.engine import ENGINE
from trainbench.training.loop import METRICS_FILE, train


def model_config(**overrides: object) -> ModelConfig:
    settings: dict[str, object] = {"framework": "tf", "image_size": 32, "num_classes": 10, "device": "cpu"}
    settings.update(overrides)
    return ModelConfig(**settings)  # type: ignore[arg-type]


def bench_config(batch_size: int = 4, **overrides: object) -> BenchConfig:
    return BenchConfig(model=model_config(**overrides), batch_size=batch_size)


@pytest.fixture(autouse=True)
def no_policy_leak():
    """The mixed-precision policy is process-global: no test may leave another one behind."""
    tf_keras.mixed_precision.set_global_policy("float32")
    yield
    policy = tf_keras.mixed_precision.global_policy().name
    tf_keras.mixed_precision.set_global_policy("float32")
    assert policy == "float32", f"the global mixed-precision policy leaked: {policy}"


def one_step(runner) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The first convolution's kernel and the classifier's bias, before and after one training step."""
    variables = {"conv1": runner.network.get_layer("conv1").kernel, "fc1000": runner.network.get_layer("fc1000").bias}
    before = {name: variable.numpy().copy() for name, variable in variables.items()}
    runner.step()
    runner.sync()
    return {name: (before[name], variable.numpy()) for name, variable in variables.items()}


@pytest.fixture(scope="module")
def graph_step():
    runner = ENGINE.make_runner(bench_config())
    return runner, one_step(runner)


# --- versions ----------------------------------------------------------------------------------------------


def test_versions_names_the_stack():
    versions = ENGINE.versions()
    assert versions["tf_keras"] == tf_keras.__version__
    assert versions["tf_models_official"].startswith("2.")
    assert any("CPU" in device for device in versions["devices"])
    assert {"xla_auto_jit", "tf_xla_flags", "gpu_names"} <= versions.keys()
    json.dumps(versions)  # it goes into env.json


# --- benchmark runner --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_runner_step_trains_the_model(graph_step):
    runner, weights = graph_step
    before, after = weights["conv1"]
    assert runner.network.input_shape == (None, 32, 32, 3)
    assert runner.network.output_shape == (None, 10)
    assert np.all(np.isfinite(after))
    assert not np.allclose(before, after)
    # tf-models-official's layers, by name, and its parameter count (no convolution biases) with a 10-class head
    names = {layer.name for layer in runner.network.layers}
    assert {"conv1", "res2a_branch2a", "res5c_branch2c", "fc1000"} <= names
    assert runner.network.count_params() == 23_581_642


@pytest.mark.slow
def test_xla_runner_compiles_its_step_with_xla(graph_step):
    """ResNet-50's step is marked for XLA (traced, not run: XLA compiling ResNet-50 takes half a minute of CPU); that
    the XLA step computes what the graph step does is test_tf_workloads' tiny BERT comparison."""
    graph_runner, _ = graph_step
    assert must_compile_with_xla(ENGINE.make_runner(bench_config(xla=True)))
    assert not must_compile_with_xla(graph_runner)


@pytest.mark.slow
def test_bf16_runner_computes_in_bfloat16():
    runner = ENGINE.make_runner(bench_config(precision="bf16"))
    conv = runner.network.get_layer("conv1")
    assert conv.compute_dtype == "bfloat16"
    assert conv.kernel.dtype == tf.float32  # master weights stay float32
    assert runner.network.get_layer("fc1000").compute_dtype == "bfloat16"
    assert runner.network.output.dtype == tf.float32  # the official model's float32 softmax
    before, after = one_step(runner)["conv1"]
    assert np.all(np.isfinite(after))
    assert not np.allclose(before, after)


# --- end-to-end training -----------------------------------------------------------------------------------

EPOCHS = 8
STEPS_PER_EPOCH = 8


def train_config(**overrides: object) -> TrainConfig:
    settings: dict[str, object] = {
        "model": model_config(num_classes=4),
        # 0.002 at batch 16; warm-up would only slow it down, one decay lets batch norm's statistics settle.
        "optimizer": OptimizerConfig(base_learning_rate=0.032, label_smoothing=0.1),
        "epochs": EPOCHS,
        "batch_size": 16,
        "warmup_epochs": 0.0,
        "decay_epochs": (5,),
        "synthetic_train_examples": 16 * STEPS_PER_EPOCH,
        "synthetic_eval_examples": 32,
        "log_every": 1000,
    }
    settings.update(overrides)
    return TrainConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("tf-train")
    config = train_config()
    trainer = ENGINE.make_trainer(config)
    rows = train(config, trainer, run_dir, lambda line: None)
    return trainer, rows, run_dir


@pytest.mark.slow
def test_trainer_learns_the_synthetic_set(trained):
    trainer, rows, run_dir = trained
    assert (trainer.global_batch, trainer.steps_per_epoch, trainer.eval_steps) == (16, STEPS_PER_EPOCH, 2)
    assert [row["epoch"] for row in rows] == list(range(1, EPOCHS + 1))
    assert all(row["eval_examples"] == 32 for row in rows)
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]
    assert rows[-1]["eval_top1"] >= 0.75  # four classes: chance is 0.25
    assert np.isfinite(rows[-1]["eval_loss"])
    assert rows[-1]["eval_top5"] == 1.0  # four classes, top-5 holds every one
    assert len((run_dir / METRICS_FILE).read_text().splitlines()) == EPOCHS


@pytest.mark.slow
def test_save_restore_and_resume_continue_after_the_newest_checkpoint(trained, tmp_path):
    """A fresh trainer restores the trained network and optimizer exactly; put back to its new state, train(resume=True)
    goes on from the checkpoint after the last epoch (one trainer built for both)."""
    trainer, _, run_dir = trained
    resumed_dir = tmp_path / "run"
    shutil.copytree(run_dir, resumed_dir)
    config = train_config(epochs=EPOCHS + 1, resume=True)
    fresh = ENGINE.make_trainer(config)
    initial = fresh.network.get_weights()
    trained_weights = trainer.network.get_weights()
    assert not all(np.array_equal(a, b) for a, b in zip(initial, trained_weights, strict=True))
    assert fresh.restore(run_dir / "checkpoints") == EPOCHS
    for restored, original in zip(fresh.network.get_weights(), trained_weights, strict=True):
        np.testing.assert_array_equal(restored, original)
    optimizer, original_optimizer = fresh._parts.optimizer, trainer._parts.optimizer
    assert int(optimizer.iterations.numpy()) == EPOCHS * STEPS_PER_EPOCH
    for restored, original in zip(optimizer.variables, original_optimizer.variables, strict=True):
        np.testing.assert_array_equal(restored.numpy(), original.numpy())  # momentum too
    assert fresh.evaluate()["top1"] == pytest.approx(trainer.evaluate()["top1"])

    # Back to the state of a new trainer (initial weights, zero momentum and step count): train must restore.
    fresh.network.set_weights(initial)
    for variable in optimizer.variables:
        variable.assign(tf.zeros_like(variable))
    lines: list[str] = []
    new_rows = train(config, fresh, resumed_dir, lines.append)
    assert lines[0] == f"resumed from the checkpoint after epoch {EPOCHS}"
    assert [row["epoch"] for row in new_rows] == [EPOCHS + 1]
    assert int(optimizer.iterations.numpy()) == (EPOCHS + 1) * STEPS_PER_EPOCH
    assert new_rows[0]["eval_top1"] >= 0.5  # carries on from the trained weights, not from scratch
    assert len((resumed_dir / METRICS_FILE).read_text().splitlines()) == EPOCHS + 1
    assert fresh.restore(resumed_dir / "checkpoints") == EPOCHS + 1


# MirroredStrategy over two CPU replicas (the runner's samples per step, the replicas' identical update, the
# trainer's global batch and unpadded evaluation count) runs in test_tf_multiworker.py's reference process, which
# MultiWorkerMirroredStrategy's parameters are compared with: one fresh process for both.
