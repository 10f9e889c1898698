"""Adding a workload takes its descriptor and one builder per framework, nothing else (README: "Extending
trainbench"): a two-layer MLP on ImageNet records, written from inside the test into a folder outside the package
and named by TRAINBENCH_WORKLOADS, is measured by ``throughput`` and trained by ``train`` in both frameworks, as a
user runs them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main

DESCRIPTOR = '''
from trainbench.workloads import Param, Size, Workload, register

MLP = register(Workload(
    name="mlp", title="two-layer MLP", category="image classification", sample_unit="image",
    params={"image_size": Param(32, 8, 256, "square input, px"), "num_classes": Param(10, 2, 1000, "classes")},
    sizes={"full": Size("hidden 256", dims={"hidden": 256}),
           "tiny": Size("hidden 16", dims={"hidden": 16}, defaults={"image_size": 8, "num_classes": 4})},
    references={"torch": "torch.nn.Sequential", "tf": "tf_keras.Sequential"},
    record_kind="imagenet",
    builders={"torch": "mlp_torch", "tf": "mlp_tf"},
    data=frozenset({"torch", "tf"}),
))
'''

TORCH_BUILDER = '''
import torch
from torch import nn

from trainbench.engines.torch.workloads import ImageClassifier


class Mlp(ImageClassifier):  # its loss and evaluation: label-smoothed cross-entropy over the logits
    def build(self, model):
        size, hidden = model.param("image_size"), model.spec.dims(model.size)["hidden"]
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * size * size, hidden), nn.ReLU(),
                             nn.Linear(hidden, model.param("num_classes")))

    def synthetic_batch(self, model, batch_size, device, seed):
        random = torch.Generator(device=device).manual_seed(seed)
        size = model.param("image_size")
        images = torch.randn((batch_size, 3, size, size), device=device, generator=random)
        return images, torch.randint(0, model.param("num_classes"), (batch_size,), device=device, generator=random)


BUILDER = Mlp
'''

TF_BUILDER = '''
import tensorflow as tf
import tf_keras


class Mlp:
    def build(self, model):
        size, hidden = model.param("image_size"), model.spec.dims(model.size)["hidden"]
        return tf_keras.Sequential([tf_keras.layers.Input((size, size, 3)), tf_keras.layers.Flatten(),
                                    tf_keras.layers.Dense(hidden, activation="relu"),
                                    tf_keras.layers.Dense(model.param("num_classes"), dtype="float32")])

    def synthetic_batch(self, model, batch_size, device, seed):
        with tf.device(device):
            size = model.param("image_size")
            images = tf.random.normal((batch_size, size, size, 3), seed=seed)
            return images, tf.random.uniform((batch_size,), 0, model.param("num_classes"), tf.int32, seed=seed)

    def loss(self, network, batch, smoothing):
        return tf.reduce_mean(self.eval_outputs(network, batch, smoothing, training=True)[0])

    def eval_outputs(self, network, batch, smoothing, training=False):
        images, labels = batch
        logits = network(images, training=training)
        one_hot = tf.one_hot(labels, logits.shape[-1])
        losses = tf_keras.losses.categorical_crossentropy(one_hot, logits, from_logits=True,
                                                          label_smoothing=smoothing)
        return losses, logits, labels


BUILDER = Mlp
'''

TRAIN = ["--device", "cpu", "--workload", "mlp", "--size", "tiny", "--batch-size", "8", "--epochs", "1",
         "--synthetic-train-examples", "32", "--synthetic-eval-examples", "16", "--warmup-epochs", "0"]


@pytest.fixture
def mlp_workload(tmp_path: Path) -> dict[str, str]:
    """The three files of a new workload, outside the package; the environment that makes them one."""
    folder = tmp_path / "plugin"
    folder.mkdir()
    for name, text in (("mlp_workload", DESCRIPTOR), ("mlp_torch", TORCH_BUILDER), ("mlp_tf", TF_BUILDER)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return {"PYTHONPATH": str(folder), "TRAINBENCH_WORKLOADS": "mlp_workload"}


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_a_workload_added_outside_the_package_is_measured_and_trained(
        tmp_path: Path, mlp_workload: dict[str, str], framework: str) -> None:
    measured = run_cli("throughput", "--framework", framework, "--device", "cpu", "--workload", "mlp", "--size",
                       "tiny", "--batch-sizes", "4", "--warmup", "1", "--steps", "3", "--output",
                       str(tmp_path / "throughput"), env=mlp_workload)
    assert measured.returncode == 0, measured.stdout + measured.stderr
    (run,) = (tmp_path / "throughput").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    (result,) = summary["results"]
    assert result["status"] == "ok" and result["samples_per_sec"] > 0
    # The descriptor's name, size and settings reach the result; the network is the builder's: 3*8*8*16 + 16 + 16*4 + 4
    assert (summary["workload"], summary["size"], summary["params"]) == ("mlp", "tiny", {"image_size": 8,
                                                                                        "num_classes": 4})
    assert result["parameters"] == 3 * 8 * 8 * 16 + 16 + 16 * 4 + 4

    trained = run_cli("train", "--framework", framework, *TRAIN, "--output", str(tmp_path / "train"),
                      env=mlp_workload)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    (train_run,) = (tmp_path / "train").iterdir()
    (epoch,) = [json.loads(line) for line in (train_run / "metrics.jsonl").read_text().splitlines()]
    # One epoch of 32 examples in batches of 8, evaluated on the 16 held out, by the workload's own network and loss.
    assert epoch["epoch"] == 1 and epoch["eval_examples"] == 16 and 0.0 <= epoch["eval_top1"] <= 1.0
    assert 0.0 < epoch["train_loss"] < 10.0 and epoch["eval_top5"] == 1.0  # 4 classes: every label is in the top 5


def test_a_workload_module_that_cannot_be_imported_is_one_line(tmp_path: Path) -> None:
    result = run_main("workloads", env={"TRAINBENCH_WORKLOADS": "no_such_workload_module"})
    assert_one_line_error(result, "TRAINBENCH_WORKLOADS: cannot import 'no_such_workload_module'")
