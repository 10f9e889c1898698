"""BERT-base pre-training: Hugging Face ``BertForPreTraining`` from a config (random weights), masked LM on 15 % of
the positions plus next-sentence prediction.

The masked-LM head (a dense layer and the tied 30,522-way decoder) runs on the masked positions only, gathered
first, as TF's BertPretrainerV2 and NVIDIA's BERT pre-training do; Hugging Face's own forward runs it on every
position, 18 % more FLOPs per sequence at 128 tokens for the same loss. ``MaskedPretraining`` wraps the Hugging Face
model so that DDP and torch.compile still see one module whose forward does it all.

The batch has no attention mask: its sequences have no padding, and no mask is the same all-ones mask to the
model, while a given one costs a host-device synchronisation every step (transformers checks whether it is all
ones, ``_ignore_bidirectional_mask_sdpa``), which also rules out CUDA-graph capture and the meta device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import Builder, TorchBuilder, per_example
from trainbench.engines.torch.workloads._hf import transformers
from trainbench.workloads.bert import PretrainingArrays, learnable_pretraining, synthetic_pretraining

IGNORED = -100  # F.cross_entropy's ignore_index: a label that counts in no loss

Tensors = dict[str, torch.Tensor]
# (input_ids, token_type_ids, masked_positions), (masked_ids, next_sentence_label); every sequence has the same
# number of masked positions, so the shapes are fixed.
Batch = tuple[Tensors, Tensors]


def config(model: ModelConfig) -> transformers.BertConfig:
    dims = model.spec.dims(model.size)
    return transformers.BertConfig(
        vocab_size=dims["vocab"], hidden_size=dims["hidden"], num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"], intermediate_size=dims["ffn"], max_position_embeddings=dims["positions"],
        type_vocab_size=dims["type_vocab"],
    )


def pretraining_batch(arrays: PretrainingArrays, device: torch.device | str) -> Batch:
    """The task's arrays (``workloads.bert``) as this model's tensors, on the device."""
    on_device = {name: torch.from_numpy(array).to(device) for name, array in arrays._asdict().items()}
    inputs = {"input_ids": on_device["input_ids"], "token_type_ids": on_device["type_ids"],
              "masked_positions": on_device["masked_positions"]}
    return inputs, {"masked_ids": on_device["masked_ids"], "next_sentence_label": on_device["next_sentence"]}


class MaskedPretraining(nn.Module):
    """BertForPreTraining whose masked-LM head sees only the masked positions; returns (masked-LM scores of shape
    (batch, masked, vocab), next-sentence scores of shape (batch, 2))."""

    def __init__(self, pretraining: nn.Module) -> None:
        super().__init__()
        self.bert: nn.Module = pretraining.bert  # type: ignore[assignment]  # a BertModel
        self.cls: Any = pretraining.cls  # BertPreTrainingHeads; its decoder stays tied to the word embeddings

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                masked_positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sequence, pooled = self.bert(input_ids=input_ids, token_type_ids=token_type_ids)[:2]
        index = masked_positions.unsqueeze(-1).expand(-1, -1, sequence.size(-1))
        return self.cls.predictions(sequence.gather(1, index)), self.cls.seq_relationship(pooled)


class BertBuilder(Builder):
    BLOCKS = ("bert.encoder.layer",)

    def build(self, model: ModelConfig) -> nn.Module:
        return MaskedPretraining(transformers.BertForPreTraining(config(model)))

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """Random sentence pairs made into the pre-training task (``workloads.bert.synthetic_pretraining``)."""
        vocab, length = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        return pretraining_batch(synthetic_pretraining(batch_size, length, vocab, seed), device)

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        """Learnable sentence pairs (``workloads.bert.learnable_pretraining``: the masked positions, the [MASK] id
        and the "not next" pairs decided there, the same as TensorFlow's)."""
        vocab = model.spec.dims(model.size)["vocab"]
        return pretraining_batch(learnable_pretraining(tokens, examples, model.seed, vocab), device)

    def batch_from_features(self, features: Tensors, model: ModelConfig, device: torch.device | str) -> Batch:
        """A batch of converted pre-training records (``record_pipeline``): their masked input, segments,
        masked positions and original tokens; a padding slot (weight 0) gets the label IGNORED, which the loss
        leaves out, as the reference weights it by 0. No attention mask, as in every batch here (see above)."""
        ids = {name: tensor.to(device, non_blocking=True) for name, tensor in features.items()}
        masked_ids = ids["masked_lm_ids"].masked_fill(ids["masked_lm_weights"] == 0, IGNORED)
        inputs = {"input_ids": ids["input_ids"], "token_type_ids": ids["segment_ids"],
                  "masked_positions": ids["masked_lm_positions"]}
        return inputs, {"masked_ids": masked_ids, "next_sentence_label": ids["next_sentence_labels"].reshape(-1)}

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """Masked-LM cross-entropy over the batch's masked tokens plus next-sentence cross-entropy, as BERT
        pre-trains (``smoothing`` is not part of it)."""
        inputs, targets = batch
        masked_scores, next_scores = network(**inputs)
        logits, labels = masked_scores.flatten(0, 1), targets["masked_ids"].flatten()
        return F.cross_entropy(logits, labels) + F.cross_entropy(next_scores, targets["next_sentence_label"])

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per sequence: its masked-LM cross-entropy (over its counted masked positions) plus its next-sentence
        one, as TensorFlow's (their batch mean is ``loss``'s when every sequence counts as many masked tokens);
        then the masked tokens' logits and labels."""
        inputs, targets = batch
        masked_scores, next_scores = network(**inputs)
        masked_scores, next_scores = masked_scores.float(), next_scores.float()
        labels = targets["masked_ids"]
        token_losses = F.cross_entropy(masked_scores.flatten(0, 1), labels.flatten(), reduction="none")
        sentence = F.cross_entropy(next_scores, targets["next_sentence_label"], reduction="none")
        losses = per_example(token_losses.view_as(labels), labels, IGNORED) + sentence
        return losses, masked_scores.flatten(0, 1), labels.flatten()


BUILDER: type[TorchBuilder] = BertBuilder
