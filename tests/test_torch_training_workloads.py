"""End-to-end training of the sequence workloads in the PyTorch engine, on the CPU at --size tiny: batches from the
learnable token set (data.synthetic.learnable_sequences), a falling loss, token accuracy, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import assert_one_line_error, run_cli
from trainbench.config import ModelConfig, OptimizerConfig, TrainConfig
from trainbench.data.synthetic import learnable_sequences, translated
from trainbench.engines.torch.engine import ENGINE
from trainbench.engines.torch.workloads import bert, transformer
from trainbench.errors import UsageError
from trainbench.workloads import bert as bert_task

SEQUENCE_WORKLOADS = ("transformer", "bert", "gpt2", "llama")
BATCH = 16


def sequence_config(workload: str, learning_rate: float = 0.1, optimizer: str = "sgd",
                    **overrides: object) -> TrainConfig:
    """Tiny network, a constant learning rate (``learning_rate`` at this batch), no label smoothing."""
    settings: dict[str, object] = dict(
        model=ModelConfig(workload=workload, size="tiny", device="cpu"), epochs=1, batch_size=BATCH,
        warmup_epochs=0, decay_epochs=(), synthetic_train_examples=256, synthetic_eval_examples=24, log_every=1000,
        optimizer=OptimizerConfig(name=optimizer, base_learning_rate=learning_rate * 256 / BATCH,  # type: ignore[arg-type]
                                  label_smoothing=0.0, weight_decay=0.01 if optimizer == "adamw" else 1e-4),
    )
    settings.update(overrides)
    return TrainConfig(**settings)  # type: ignore[arg-type]


def losses(workload: str, learning_rate: float, steps: int, optimizer: str = "sgd") -> list[float]:
    """Mean training loss of every 10 steps."""
    trainer = ENGINE.make_trainer(sequence_config(workload, learning_rate, optimizer))
    means = []
    for step in range(steps):
        trainer.train_step(learning_rate)
        if (step + 1) % 10 == 0:
            means.append(trainer.mean_loss())
    return means


# Settings that learned the tiny networks with room at seeds 0-2, one and two threads (batch 16): AdamW for the
# translator (under SGD at 0.4 it stayed near ln 512 for 150 steps on some seeds and machines, issue 38; under AdamW
# above 0.01 too) and for BERT, which learns its masked tokens under AdamW only, as its reference trains (under SGD,
# only the token frequencies, a loss near ln 512 + ln 2). Both ended at 0.29-0.38 of their first mean: the bound of
# 0.6 leaves room for another machine's order of operations. GPT-2's loss falls in test_the_command_line_trains_gpt2
# (SGD: it sees the stride after two tokens). Llama under AdamW at 0.003 (its reference's optimizer) ended at 0.14
# of its first 16 steps' mean after 96 steps at seeds 0 and 1; under GPT-2's SGD at 0.1 it learned faster, then rose
# for an epoch and ended near 0.45, too near a bound.
@pytest.mark.slow
@pytest.mark.parametrize("workload, learning_rate, steps, optimizer",
                         [("transformer", 0.006, 150, "adamw"), ("bert", 0.004, 450, "adamw"),
                          ("llama", 0.003, 100, "adamw")])
def test_training_loss_falls_on_the_learnable_sequences(workload: str, learning_rate: float, steps: int,
                                                        optimizer: str) -> None:
    means = losses(workload, learning_rate, steps, optimizer)
    assert means[0] > 5.5  # about ln 512: a fresh network guesses among the 512 tokens
    assert means[-1] < 0.6 * means[0], means


# What evaluate promises (every evaluation sequence once, accuracies in 0..1) is the engine contract's, for every
# workload that trains: tests/test_engine_contract.py.


def test_a_perfect_predictor_scores_full_token_accuracy(monkeypatch: pytest.MonkeyPatch) -> None:
    # evaluate's accounting: logits that always pick the label give top-1 = top-5 = 1 over every predicted token.
    trainer = ENGINE.make_trainer(sequence_config("gpt2"))
    seen: list[int] = []

    def oracle(network: torch.nn.Module, batch: object, smoothing: float) -> tuple[torch.Tensor, ...]:
        tokens, _ = batch  # type: ignore[misc]
        labels = tokens[:, 1:].flatten()
        seen.append(len(labels))
        return torch.full((len(tokens),), 0.5), torch.nn.functional.one_hot(labels, 512).float(), labels

    monkeypatch.setattr(trainer._parts.builder, "eval_outputs", oracle)
    result = trainer.evaluate()
    assert result == {"loss": 0.5, "top1": 1.0, "top5": 1.0, "examples": 24.0}
    assert sum(seen) == 24 * 31  # every next token of the 24 sequences of 32


def test_transformer_batches_translate_the_learnable_sequences() -> None:
    model = ModelConfig(workload="transformer", size="tiny", device="cpu")
    tokens = learnable_sequences(0, 3, 16, 512, model.seed)
    (source, target_in), target_out = transformer.BUILDER().batch_from_tokens(model, tokens, "cpu", np.arange(3))
    assert np.array_equal(source.numpy(), tokens)
    assert np.array_equal(target_out.numpy(), translated(tokens, 512))
    assert (target_in[:, 0] == transformer.START).all()  # a token the set never holds
    assert torch.equal(target_in[:, 1:], target_out[:, :-1])  # teacher forcing


def test_bert_batches_mask_each_example_the_same_way_every_time() -> None:
    model = ModelConfig(workload="bert", size="tiny", device="cpu")
    tokens = learnable_sequences(0, 64, 32, 512, model.seed)
    inputs, targets = bert.BUILDER().batch_from_tokens(model, tokens, "cpu", np.arange(64))
    positions = inputs["masked_positions"]
    assert positions.shape == (64, 5)  # 15 % of 32
    assert (inputs["input_ids"].gather(1, positions) == bert_task.MASK_ID).all()
    assert (positions > 0).all()  # never the [CLS] place
    not_next = targets["next_sentence_label"].numpy().astype(bool)
    assert 10 < not_next.sum() < 54  # about half the pairs
    # Continued pairs keep the sequence; "not next" ones keep the first half and move the second.
    labelled = inputs["input_ids"].scatter(1, positions, targets["masked_ids"]).numpy()
    assert np.array_equal(labelled[~not_next], tokens[~not_next])
    assert np.array_equal(labelled[not_next, :16], tokens[not_next, :16])
    assert (labelled[not_next, 16:] != tokens[not_next, 16:]).all()
    # Rows 3 and 5 drawn again in another batch, in another order: the same masks and labels.
    again, again_targets = bert.BUILDER().batch_from_tokens(model, tokens[[5, 3]], "cpu", np.array([5, 3]))
    assert torch.equal(again["input_ids"], inputs["input_ids"][[5, 3]])
    assert torch.equal(again_targets["next_sentence_label"], targets["next_sentence_label"][[5, 3]])


def test_a_checkpoint_restores_network_optimizer_and_data_position(tmp_path: Path) -> None:
    config = sequence_config("gpt2")
    trainer = ENGINE.make_trainer(config)
    for _ in range(20):  # past the first pass over 256 examples: pass 1, cursor 64
        trainer.train_step(0.1)
    trainer.save(tmp_path, 1)
    restored = ENGINE.make_trainer(config)
    assert restored.restore(tmp_path) == 1
    assert (restored._pass, restored._cursor) == (trainer._pass, trainer._cursor) == (1, 64)
    for name, tensor in trainer.network.state_dict().items():
        assert torch.equal(tensor, restored.network.state_dict()[name]), name
    assert restored.evaluate() == trainer.evaluate()
    # The same next batch: the data stream continues where the checkpoint left it.
    assert torch.equal(restored._next_indices(), trainer._next_indices())


def test_retinanet_training_is_refused_in_one_line() -> None:
    config = TrainConfig(model=ModelConfig(workload="retinanet", size="tiny", device="cpu"), batch_size=2)
    refusal = r"^train --workload retinanet: .*no learnable synthetic detection set"
    with pytest.raises(UsageError, match=refusal) as caught:
        ENGINE.make_trainer(config)
    assert "\n" not in str(caught.value) and "throughput" in str(caught.value)


@pytest.mark.slow  # a process that loads torch
def test_the_command_line_refuses_retinanet_training_in_one_line(tmp_path: Path) -> None:
    result = run_cli("train", "--framework", "torch", "--workload", "retinanet", "--size", "tiny", "--device", "cpu",
                     "--output", str(tmp_path))
    assert_one_line_error(result, "--workload retinanet", "throughput")
    assert not any(tmp_path.iterdir())  # refused before a run folder is made


@pytest.mark.slow
def test_the_command_line_trains_gpt2(tmp_path: Path) -> None:
    # The README's command line: 16 steps an epoch at learning rate 0.1 (base 1.6 per 256 at batch 16). The fall
    # starts in the third epoch: the sixth epoch's mean loss was 0.28-0.29 of the first's and top-5 rose by 0.9 at
    # seeds 0-2 (the same at two threads); after three epochs the loss was about 0.8 of the first's, too near a bound.
    result = run_cli("train", "--framework", "torch", "--workload", "gpt2", "--size", "tiny", "--device", "cpu",
                     "--epochs", "6", "--batch-size", "16", "--base-lr", "1.6", "--warmup-epochs", "0",
                     "--label-smoothing", "0", "--synthetic-train-examples", "256", "--synthetic-eval-examples", "32",
                     "--output", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2, 3, 4, 5, 6]
    assert all(row["eval_examples"] == 32 and 0.0 <= row["eval_top1"] <= row["eval_top5"] <= 1.0 for row in rows)
    assert rows[0]["train_loss"] > 5.5  # about ln 512: a fresh network guesses among the 512 tokens
    assert rows[-1]["train_loss"] < 0.5 * rows[0]["train_loss"], rows
    assert rows[-1]["eval_top5"] > rows[0]["eval_top5"] + 0.5, rows  # the next token is among three after two
