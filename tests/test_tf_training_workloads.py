"""End-to-end training of the sequence workloads in the TensorFlow engine, on the CPU at --size tiny.

The trainers learn the learnable token sequences of ``trainbench.data.synthetic`` (transformer: translate each token
to the next one; bert: predict the masked tokens); ResNet-50's training is tested in test_tf_engine.py. Nothing here
imports torch.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("official")

import tf_keras

from tests.conftest import assert_one_line_error, run_main
from trainbench.config import ModelConfig, OptimizerConfig, TrainConfig
from trainbench.data.synthetic import learnable_sequences, translated
from trainbench.engines.tf.engine import ENGINE
from trainbench.engines.tf.workloads import bert as bert_builder
from trainbench.engines.tf.workloads import transformer as transformer_builder
from trainbench.training.loop import METRICS_FILE
from trainbench.workloads import bert as bert_task

BATCH = 16
LOG_EVERY = 10  # steps per mean training loss
# Per workload: plain SGD with momentum (train's optimizer) at a base rate per 256 sequences found to make the loss
# fall in a few dozen steps (the ResNet-50 default of 0.1 barely moves these tiny networks), and the steps taken.
# BERT learns its masked tokens under AdamW only, as its reference trains (under SGD: only the token frequencies).
RECIPES = {"transformer": (16.0, 60, "sgd"), "bert": (0.064, 450, "adamw")}


@pytest.fixture(autouse=True)
def no_policy_leak():
    tf_keras.mixed_precision.set_global_policy("float32")
    yield
    tf_keras.mixed_precision.set_global_policy("float32")


def train_config(workload: str, **overrides: object) -> TrainConfig:
    base_lr, _, optimizer = RECIPES[workload]
    settings: dict[str, object] = {
        "model": ModelConfig(framework="tf", workload=workload, size="tiny", device="cpu"),
        "optimizer": OptimizerConfig(name=optimizer, base_learning_rate=base_lr,  # type: ignore[arg-type]
                                     weight_decay=0.0),
        "epochs": 1,
        "batch_size": BATCH,
        "warmup_epochs": 0.0,
        "decay_epochs": (),
        "synthetic_train_examples": 256,
        "synthetic_eval_examples": 20,  # not a whole number of batches: the padding must not count
        "log_every": 1000,
    }
    settings.update(overrides)
    return TrainConfig(**settings)  # type: ignore[arg-type]


def losses_while_training(trainer, config: TrainConfig, steps: int) -> list[float]:
    """The mean training loss of every LOG_EVERY steps, at the configured (constant) rate."""
    losses = []
    for step in range(steps):
        trainer.train_step(config.optimizer.learning_rate(config.batch_size))
        if (step + 1) % LOG_EVERY == 0:
            losses.append(trainer.mean_loss())
    return losses


def check_evaluation(result: dict[str, float], examples: int) -> None:
    assert set(result) == {"loss", "top1", "top5", "examples"}
    assert result["examples"] == examples
    assert np.isfinite(result["loss"]) and result["loss"] > 0
    assert 0.0 <= result["top1"] <= result["top5"] <= 1.0


@pytest.fixture(scope="module")
def trained_transformer():
    config = train_config("transformer")
    trainer = ENGINE.make_trainer(config)
    before = trainer.evaluate()
    losses = losses_while_training(trainer, config, RECIPES["transformer"][1])
    return config, trainer, before, losses


@pytest.mark.slow  # the module's trained Transformer: seconds
def test_transformer_learns_to_translate(trained_transformer):
    _, trainer, before, losses = trained_transformer
    assert (trainer.global_batch, trainer.steps_per_epoch, trainer.eval_steps) == (BATCH, 16, 2)
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < 0.7 * losses[0], losses
    after = trainer.evaluate()
    check_evaluation(before, 20)
    check_evaluation(after, 20)
    assert after["loss"] < 0.7 * before["loss"], (before, after)
    assert after["top5"] > 0.2 > before["top5"]  # 512 tokens: chance is 1 %


@pytest.mark.slow  # the module's trained Transformer: seconds
def test_transformer_checkpoint_round_trip(trained_transformer, tmp_path):
    config, trainer, _, _ = trained_transformer
    trainer.save(tmp_path, 1)
    fresh = ENGINE.make_trainer(config)
    trained_weights = trainer.network.get_weights()
    assert not all(np.array_equal(a, b) for a, b in zip(fresh.network.get_weights(), trained_weights, strict=True))
    assert fresh.restore(tmp_path) == 1
    for restored, original in zip(fresh.network.get_weights(), trained_weights, strict=True):
        np.testing.assert_array_equal(restored, original)
    for restored, original in zip(fresh._parts.optimizer.variables, trainer._parts.optimizer.variables, strict=True):
        np.testing.assert_array_equal(restored.numpy(), original.numpy())  # momentum and the step count too
    assert fresh.evaluate() == pytest.approx(trainer.evaluate())


@pytest.mark.slow
def test_bert_trains_end_to_end():
    # Under SGD the tiny BERT learns only the next-sentence label and the token frequencies (its 0.02-scale tied
    # embeddings pass the encoder little gradient); under AdamW, its reference's optimizer, the masked tokens too.
    config = train_config("bert")
    trainer = ENGINE.make_trainer(config)
    before = trainer.evaluate()
    losses = losses_while_training(trainer, config, RECIPES["bert"][1])
    after = trainer.evaluate()
    assert all(np.isfinite(losses)), losses
    # Measured at seeds 0-2, one and two threads: last/first 0.25-0.30, so 0.6 leaves 50 %. The evaluation loss is
    # no learning bound here: on 256 examples at this rate it fell at seed 0 (-0.46) and rose at seeds 1 and 2
    # (+1.40, +0.88) as the set is overfitted; a lower rate (0.016) left the training fall within 13 % of 0.7.
    assert losses[-1] < 0.6 * losses[0], losses
    check_evaluation(before, 20)
    check_evaluation(after, 20)
    assert np.isfinite(after["loss"]) and after["loss"] != before["loss"], (before, after)  # trained, then evaluated


# --- the batches -------------------------------------------------------------------------------------------


def tiny(workload: str) -> ModelConfig:
    return ModelConfig(framework="tf", workload=workload, size="tiny", device="cpu")


def test_transformer_batch_pairs_each_sequence_with_its_translation():
    tokens = learnable_sequences(0, 3, 16, 512, seed=0)
    builder = transformer_builder.BUILDER()
    source, target = builder.batch_from_tokens(tiny("transformer"), tokens, "/cpu:0", np.arange(3))
    np.testing.assert_array_equal(source.numpy(), tokens)
    np.testing.assert_array_equal(target.numpy(), translated(tokens, 512))


def test_bert_batch_masks_15_percent_and_targets_the_true_tokens():
    model = tiny("bert")
    tokens = learnable_sequences(0, 4, 32, 512, seed=0)
    inputs, targets = bert_builder.BUILDER().batch_from_tokens(model, tokens, "/cpu:0", np.arange(4))
    positions, ids = inputs["masked_lm_positions"].numpy(), inputs["input_word_ids"].numpy()
    assert positions.shape == (4, 5)  # 15 % of 32
    assert (positions >= 1).all()  # never the [CLS] place
    assert all(len(set(row)) == 5 for row in positions)
    masked = np.zeros_like(tokens, bool)
    np.put_along_axis(masked, positions, True, axis=1)
    assert (ids[masked] == bert_task.MASK_ID).all()
    # The true tokens are the targets; the first segment is kept, the second too where the pair is "is next".
    labelled = ids.copy()
    np.put_along_axis(labelled, positions, targets["masked_lm_ids"].numpy(), axis=1)
    is_next = targets["next_sentence_labels"].numpy() == bert_task.IS_NEXT
    np.testing.assert_array_equal(labelled[:, :16], tokens[:, :16])
    np.testing.assert_array_equal(labelled[is_next], tokens[is_next])
    # Seeded per example: the same example draws the same positions whatever batch it is in; another, others.
    again, _ = bert_builder.BUILDER().batch_from_tokens(model, tokens[[2, 0]], "/cpu:0", np.array([2, 0]))
    np.testing.assert_array_equal(again["masked_lm_positions"].numpy(), positions[[2, 0]])
    other, _ = bert_builder.BUILDER().batch_from_tokens(model, tokens, "/cpu:0", np.arange(4, 8))
    assert not np.array_equal(other["masked_lm_positions"].numpy(), positions)


# --- refusals and the command line -------------------------------------------------------------------------


def test_retinanet_training_is_refused_in_one_line(tmp_path):
    result = run_main("train", "--framework", "tf", "--workload", "retinanet", "--size", "tiny", "--device", "cpu",
                      "--output", str(tmp_path))
    assert_one_line_error(result, "retinanet", "no learnable synthetic detection set", "throughput")


@pytest.mark.slow
def test_train_command_trains_the_transformer(tmp_path):
    result = run_main("train", "--framework", "tf", "--workload", "transformer", "--size", "tiny", "--device", "cpu",
                     "--epochs", "2", "--batch-size", "16", "--base-lr", "16", "--warmup-epochs", "0",
                     "--weight-decay", "0", "--synthetic-train-examples", "256", "--synthetic-eval-examples", "32",
                     "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "final: epoch 2" in result.stdout
    (run_dir,) = tmp_path.iterdir()
    rows = [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2]
    assert rows[1]["train_loss"] < rows[0]["train_loss"], rows
    assert rows[1]["eval_loss"] < rows[0]["eval_loss"], rows
