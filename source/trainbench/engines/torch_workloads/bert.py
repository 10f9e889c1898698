"""BERT-base pre-training: Hugging Face ``BertForPreTraining`` from a config (random weights), masked LM on 15 % of
the positions plus next-sentence prediction; the loss is the model's own total.

The batch has no attention mask: its sequences have no padding, and no mask is the same all-ones mask to the
model, while a given one costs a host-device synchronisation every step (transformers checks whether it is all
ones, ``_ignore_bidirectional_mask_sdpa``), which also rules out CUDA-graph capture and the meta device."""

from __future__ import annotations

import torch
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch_workloads import generator
from trainbench.engines.torch_workloads._hf import transformers
from trainbench.workloads.bert import MASKED_FRACTION

MASK_ID = 103  # BERT's [MASK] in its 30,522-token vocabulary (and a token of the tiny one)
IGNORED = -100  # the label Hugging Face's losses skip: positions that were not masked

Tensors = dict[str, torch.Tensor]
Batch = tuple[Tensors, Tensors]  # (input_ids, token_type_ids), (labels, next_sentence_label)


def config(model: ModelConfig) -> transformers.BertConfig:
    dims = model.spec.dims(model.size)
    return transformers.BertConfig(
        vocab_size=dims["vocab"], hidden_size=dims["hidden"], num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"], intermediate_size=dims["ffn"], max_position_embeddings=dims["positions"],
        type_vocab_size=dims["type_vocab"],
    )


def masked_positions(batch_size: int, length: int, device: torch.device | str,
                     random: torch.Generator | None) -> torch.Tensor:
    """A (batch, length) boolean mask with exactly round(15 %) of each row's positions set, chosen at random."""
    count = max(1, round(MASKED_FRACTION * length))
    order = torch.rand((batch_size, length), device=device, generator=random).argsort(dim=1)
    return order < count  # the positions whose rank in a random order is among the first ``count``


class BertBuilder:
    def build(self, model: ModelConfig) -> nn.Module:
        return transformers.BertForPreTraining(config(model))

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """Random sentence pairs (first half segment A, second half B), no padding; the masked positions hold
        [MASK] in the input and the original token in the labels."""
        random = generator(device, seed)
        vocab, length = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        tokens = torch.randint(0, vocab, (batch_size, length), device=device, generator=random)
        masked = masked_positions(batch_size, length, device, random)
        segments = (torch.arange(length, device=device) >= length // 2).long().expand(batch_size, length)
        inputs = {"input_ids": tokens.masked_fill(masked, MASK_ID), "token_type_ids": segments.contiguous()}
        targets = {"labels": tokens.masked_fill(~masked, IGNORED),
                   "next_sentence_label": torch.randint(0, 2, (batch_size,), device=device, generator=random)}
        return inputs, targets

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """The model's masked-LM plus next-sentence loss; ``smoothing`` is not part of BERT's pre-training."""
        inputs, targets = batch
        return network(**inputs, **targets).loss


BUILDER = BertBuilder()
