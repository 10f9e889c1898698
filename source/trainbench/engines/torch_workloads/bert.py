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
from trainbench.engines.torch_workloads import generator
from trainbench.engines.torch_workloads._hf import transformers
from trainbench.workloads.bert import masked_count

MASK_ID = 103  # BERT's [MASK] in its 30,522-token vocabulary (and a token of the tiny one)
FIRST_TOKEN = 1  # learnable_sequences' lowest token (its default first_token)
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


def masked_positions(batch_size: int, length: int, device: torch.device | str,
                     random: torch.Generator | None) -> torch.Tensor:
    """(batch, round(15 %) of length) distinct positions per sequence, chosen at random, in ascending order."""
    order = torch.rand((batch_size, length), device=device, generator=random).argsort(dim=1)
    return order[:, :masked_count(length)].sort(dim=1).values  # the first ``count`` of a random permutation


def pretraining_batch(tokens: torch.Tensor, positions: torch.Tensor, next_sentence: torch.Tensor) -> Batch:
    """Sentence pairs (first half segment A, second half B), no padding; the masked positions hold [MASK] in the
    input and the original token in the labels."""
    batch_size, length = tokens.shape
    segments = (torch.arange(length, device=tokens.device) >= length // 2).long().expand(batch_size, length)
    inputs = {"input_ids": tokens.scatter(1, positions, MASK_ID), "token_type_ids": segments.contiguous(),
              "masked_positions": positions}
    return inputs, {"masked_ids": tokens.gather(1, positions), "next_sentence_label": next_sentence}


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
        """Random sentence pairs with random next-sentence labels (``pretraining_batch``)."""
        random = generator(device, seed)
        vocab, length = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        tokens = torch.randint(0, vocab, (batch_size, length), device=device, generator=random)
        positions = masked_positions(batch_size, length, device, random)
        return pretraining_batch(tokens, positions,
                                 torch.randint(0, 2, (batch_size,), device=device, generator=random))

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        """Sentence pairs from learnable sequences: 15 % of the positions masked, chosen by an RNG seeded with
        (model.seed, the example's index); that RNG also makes half the pairs "not next" (label 1) by moving the
        second half's tokens by a random offset, so the pair no longer continues across the boundary and the
        next-sentence loss is learnable too (random labels would hold it at ln 2)."""
        tokens = tokens.copy()
        count, length = tokens.shape
        span = model.spec.dims(model.size)["vocab"] - FIRST_TOKEN
        positions = np.empty((count, masked_count(length)), dtype=np.int64)
        not_next = np.empty(count, dtype=np.int64)
        for row, example in enumerate(examples):
            random = np.random.default_rng((model.seed, int(example)))
            positions[row] = np.sort(random.permutation(length)[:positions.shape[1]])
            not_next[row] = random.integers(2)
            if not_next[row]:
                second = tokens[row, length // 2:]
                tokens[row, length // 2:] = FIRST_TOKEN + (second - FIRST_TOKEN + random.integers(1, span)) % span
        return pretraining_batch(*(torch.from_numpy(array).to(device) for array in (tokens, positions, not_next)))

    def batch_from_features(self, features: Tensors, model: ModelConfig, device: torch.device | str) -> Batch:
        """A batch of converted pre-training records (``data.torch_records``): their masked input, segments,
        masked positions and original tokens; a padding slot (weight 0) gets the label IGNORED, which the loss
        leaves out, as the reference weights it by 0. No attention mask, as in every batch here (see above)."""
        ids = {name: tensor.to(device, non_blocking=True) for name, tensor in features.items()}
        masked_ids = ids["masked_lm_ids"].masked_fill(ids["masked_lm_weights"] == 0, IGNORED)
        inputs = {"input_ids": ids["input_ids"], "token_type_ids": ids["segment_ids"],
                  "masked_positions": ids["masked_lm_positions"]}
        return inputs, {"masked_ids": masked_ids, "next_sentence_label": ids["next_sentence_labels"].reshape(-1)}

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        return self.eval_outputs(network, batch, smoothing)[0]

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Masked-LM plus next-sentence cross-entropy, as BERT pre-trains (``smoothing`` is not part of it), and
        the masked tokens' logits and labels."""
        inputs, targets = batch
        masked_scores, next_scores = network(**inputs)
        logits, labels = masked_scores.flatten(0, 1), targets["masked_ids"].flatten()
        loss = F.cross_entropy(logits, labels) + F.cross_entropy(next_scores, targets["next_sentence_label"])
        return loss, logits, labels


BUILDER = BertBuilder()
