"""The same task in both frameworks (issue 39): for the same seed, torch's and TensorFlow's builders hold the same
batch content (BERT's masked positions, [MASK] id, targets and next-sentence pairs; the Transformer's sentence
pairs), synthetic and learnable; and weight decay covers the same parameters in both engines."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("tensorflow")
pytest.importorskip("official")

from trainbench.config import ModelConfig, OptimizerConfig, TrainConfig
from trainbench.data.synthetic import learnable_sequences
from trainbench.engines.base import is_decayed
from trainbench.engines.tf import engine as tf_engine
from trainbench.engines.tf.distribute import make_strategy
from trainbench.engines.tf.workloads import bert as tf_bert
from trainbench.engines.tf.workloads import transformer as tf_transformer
from trainbench.engines.torch import engine as torch_engine
from trainbench.engines.torch.workloads import bert as torch_bert
from trainbench.engines.torch.workloads import retinanet as torch_retinanet
from trainbench.engines.torch.workloads import transformer as torch_transformer
from trainbench.workloads.bert import MASK_ID, NOT_NEXT
from trainbench.workloads.retinanet import synthetic_boxes

ROWS = 24


def model(workload: str, framework: str) -> ModelConfig:
    return ModelConfig(framework=framework, workload=workload, size="tiny", device="cpu")


def bert_arrays(framework: str, batch: tuple) -> dict[str, np.ndarray]:
    """One BERT batch of either framework by the task's roles."""
    inputs, targets = batch
    if framework == "torch":
        return {"input": inputs["input_ids"].numpy(), "segments": inputs["token_type_ids"].numpy(),
                "positions": inputs["masked_positions"].numpy(), "masked": targets["masked_ids"].numpy(),
                "next": targets["next_sentence_label"].numpy()}
    return {"input": inputs["input_word_ids"].numpy(), "segments": inputs["input_type_ids"].numpy(),
            "positions": inputs["masked_lm_positions"].numpy(), "masked": targets["masked_lm_ids"].numpy(),
            "next": targets["next_sentence_labels"].numpy()}


@pytest.mark.parametrize("kind", ["synthetic", "learnable"])
def test_bert_batches_hold_the_same_task_in_both_frameworks(kind: str) -> None:
    torch_model, tf_model = model("bert", "torch"), model("bert", "tf")
    length = torch_model.param("seq_len")
    if kind == "synthetic":
        made = {"torch": torch_bert.BUILDER().synthetic_batch(torch_model, ROWS, "cpu", 3),
                "tf": tf_bert.BUILDER().synthetic_batch(tf_model, ROWS, "/cpu:0", 3)}
    else:
        tokens, examples = learnable_sequences(40, ROWS, length, 512, 0), np.arange(40, 40 + ROWS)
        made = {"torch": torch_bert.BUILDER().batch_from_tokens(torch_model, tokens, "cpu", examples),
                "tf": tf_bert.BUILDER().batch_from_tokens(tf_model, tokens, "/cpu:0", examples)}
    mine, theirs = bert_arrays("torch", made["torch"]), bert_arrays("tf", made["tf"])
    for role, values in mine.items():
        np.testing.assert_array_equal(values, theirs[role], err_msg=role)
    assert (mine["positions"] >= 1).all()  # [CLS] is never masked
    assert (np.take_along_axis(mine["input"], mine["positions"], axis=1) == MASK_ID).all()
    assert (mine["masked"] != MASK_ID).all()  # every target is a real token
    assert 0 < (mine["next"] == NOT_NEXT).sum() < ROWS  # both kinds of pair


def test_transformer_pairs_are_the_same_in_both_frameworks() -> None:
    torch_model, tf_model = model("transformer", "torch"), model("transformer", "tf")
    tokens = learnable_sequences(0, ROWS, torch_model.param("seq_len"), 512, 0)
    for make in ("synthetic", "learnable"):
        if make == "synthetic":
            (source, target_in), target = torch_transformer.BUILDER().synthetic_batch(torch_model, ROWS, "cpu", 5)
            tf_source, tf_target = tf_transformer.BUILDER().synthetic_batch(tf_model, ROWS, "/cpu:0", 5)
        else:
            (source, target_in), target = torch_transformer.BUILDER().batch_from_tokens(
                torch_model, tokens, "cpu", np.arange(ROWS))
            tf_source, tf_target = tf_transformer.BUILDER().batch_from_tokens(tf_model, tokens, "/cpu:0",
                                                                            np.arange(ROWS))
        np.testing.assert_array_equal(source.numpy(), tf_source.numpy())
        np.testing.assert_array_equal(target.numpy(), tf_target.numpy())
        assert (source > 0).all() and (target > 0).all()  # id 0 is padding to both losses: none is made
        assert torch.equal(target_in[:, 1:], target[:, :-1])  # torch's decoder input: the target shifted right


@pytest.mark.slow  # builds BERT in both frameworks: seconds
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_weight_decay_covers_the_same_parameters_in_both_engines(optimizer: str) -> None:
    """Matrices, kernels and embeddings are decayed, biases and norms not: in torch's optimizer groups and in
    TensorFlow's penalty (SGD) or AdamW's own exclusions."""
    config = OptimizerConfig(name=optimizer, weight_decay=0.01)  # type: ignore[arg-type]
    parts = torch_engine._build(model("bert", "torch"), config, 0.1, "cpu")
    decayed, undecayed = parts.optimizer.param_groups
    assert decayed["weight_decay"] == 0.01 and undecayed["weight_decay"] == 0.0
    names = {id(p): name for name, p in parts.network.named_parameters()}
    assert decayed["params"] and all(p.dim() >= 2 for p in decayed["params"])
    assert undecayed["params"] and all(p.dim() == 1 for p in undecayed["params"])
    assert all(names[id(p)].endswith(("bias", "LayerNorm.weight")) for p in undecayed["params"])

    tf_model = model("bert", "tf")
    tf_parts = tf_engine._build_parts(tf_model, config, make_strategy(tf_model), 2)
    variables = tf_parts.network.trainable_variables
    if optimizer == "adamw":
        uses = [tf_parts.optimizer._use_weight_decay(variable) for variable in variables]
        assert uses == [is_decayed(variable.name, tuple(variable.shape)) for variable in variables]
    # The same tensors decayed as torch's BERT (the same architecture): as many, of as many values; TensorFlow's
    # per-head attention biases (rank 2) are left out as torch's (rank 1) are.
    tf_decayed = [v for v in variables if is_decayed(v.name, tuple(v.shape))]
    assert len(tf_decayed) == len(decayed["params"])
    assert sum(math.prod(v.shape) for v in tf_decayed) == sum(p.numel() for p in decayed["params"])


@pytest.mark.slow  # trains a step of the Transformer and restores it
def test_a_checkpoint_with_one_parameter_group_still_resumes(tmp_path) -> None:
    """Checkpoints written before weight decay was split by rank hold one group of every parameter: restored into
    today's two groups, with each parameter's momentum where it belongs."""
    config = TrainConfig(model=model("transformer", "torch"), epochs=1, batch_size=4, warmup_epochs=0,
                         decay_epochs=(), synthetic_train_examples=16, synthetic_eval_examples=4, log_every=1000)
    trainer = torch_engine.ENGINE.make_trainer(config)
    trainer.train_step(0.1)
    trainer.save(tmp_path, 1)
    (path,) = tmp_path.glob("epoch-*.pt")
    state = torch.load(path, weights_only=True)
    network, optimizer = trainer._parts.network, trainer._parts.optimizer
    momentum = {id(p): optimizer.state[p]["momentum_buffer"] for p in network.parameters()}
    # What the old optimizer (one group, network order) wrote:
    position = {id(p): i for i, p in enumerate(p for group in optimizer.param_groups for p in group["params"])}
    order = [position[id(p)] for p in network.parameters()]
    group = {**state["optimizer"]["param_groups"][0], "params": list(range(len(order)))}
    state["optimizer"] = {"state": {old: state["optimizer"]["state"][new] for old, new in enumerate(order)},
                          "param_groups": [group]}
    torch.save(state, path)

    fresh = torch_engine.ENGINE.make_trainer(config)
    assert fresh.restore(tmp_path) == 1
    restored = fresh._parts.optimizer
    assert [g["weight_decay"] for g in restored.param_groups] == [config.optimizer.weight_decay, 0.0]
    for mine, theirs in zip(fresh._parts.network.parameters(), network.parameters(), strict=True):
        torch.testing.assert_close(restored.state[mine]["momentum_buffer"], momentum[id(theirs)])


def test_retinanet_boxes_are_the_task_s_in_torch() -> None:
    """torch's synthetic objects are ``workloads.retinanet.synthetic_boxes`` (TensorFlow labels its anchors with the
    same ones, y first): real boxes inside the image, no background label."""
    detector = model("retinanet", "torch")
    size, count = detector.param("image_size"), detector.spec.dims("tiny")["boxes_per_image"]
    _, objects = torch_retinanet.BUILDER().synthetic_batch(detector, ROWS, "cpu", 9)
    boxes, labels = synthetic_boxes(ROWS, count, size, detector.param("num_classes"), 9)
    np.testing.assert_array_equal(objects["boxes"].numpy(), boxes)
    np.testing.assert_array_equal(objects["labels"].numpy(), labels)
    sides = boxes[..., 2:] - boxes[..., :2]
    assert (boxes >= 0).all() and (boxes[..., 2:] <= size).all()
    assert (sides >= size / 16 - 1e-3).all() and (sides <= size / 2 + 1e-3).all()
    assert (labels >= 1).all()
