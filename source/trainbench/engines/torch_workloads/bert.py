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

import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch_workloads import generator
from trainbench.engines.torch_workloads._hf import transformers
from trainbench.workloads.bert import MASKED_FRACTION

MASK_ID = 103  # BERT's [MASK] in its 30,522-token vocabulary (and a token of the tiny one)

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


def masked_positions(batch_size: int, length: int, device: torch.device | str,
                     random: torch.Generator | None) -> torch.Tensor:
    """(batch, round(15 %) of length) distinct positions per sequence, chosen at random, in ascending order."""
    count = max(1, round(MASKED_FRACTION * length))
    order = torch.rand((batch_size, length), device=device, generator=random).argsort(dim=1)
    return order[:, :count].sort(dim=1).values  # the first ``count`` of a random permutation


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


class BertBuilder:
    def build(self, model: ModelConfig) -> nn.Module:
        return MaskedPretraining(transformers.BertForPreTraining(config(model)))

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """Random sentence pairs (first half segment A, second half B), no padding; the masked positions hold
        [MASK] in the input and the original token in the labels."""
        random = generator(device, seed)
        vocab, length = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        tokens = torch.randint(0, vocab, (batch_size, length), device=device, generator=random)
        positions = masked_positions(batch_size, length, device, random)
        segments = (torch.arange(length, device=device) >= length // 2).long().expand(batch_size, length)
        inputs = {"input_ids": tokens.scatter(1, positions, MASK_ID), "token_type_ids": segments.contiguous(),
                  "masked_positions": positions}
        targets = {"masked_ids": tokens.gather(1, positions),
                   "next_sentence_label": torch.randint(0, 2, (batch_size,), device=device, generator=random)}
        return inputs, targets

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """Masked-LM plus next-sentence cross-entropy, as BERT pre-trains; ``smoothing`` is not part of it."""
        inputs, targets = batch
        masked_scores, next_scores = network(**inputs)
        masked_lm = F.cross_entropy(masked_scores.flatten(0, 1), targets["masked_ids"].flatten())
        return masked_lm + F.cross_entropy(next_scores, targets["next_sentence_label"])


BUILDER = BertBuilder()
