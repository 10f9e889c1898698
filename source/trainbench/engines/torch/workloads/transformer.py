"""Transformer-base for translation: ``torch.nn.Transformer`` between one shared embedding, which embeds source
and target tokens and, transposed, projects the decoder's output (tied, as the paper and TF's reference do)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.data.record_schemas import PAD_ID
from trainbench.data.synthetic import translated
from trainbench.engines.torch.workloads import Builder, TorchBuilder, per_example
from trainbench.workloads.transformer import synthetic_pair

DROPOUT = 0.1  # the paper's P_drop for the base model
START = 0  # the decoder's first input: no made-up sentence holds token 0 (PAD_ID, as the legacy reference)
IGNORED = -100  # F.cross_entropy's ignore_index: a label that counts in no loss

Batch = tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]  # ((source, target input), target output)


def sinusoids(length: int, width: int) -> torch.Tensor:
    """The paper's position encodings: sin on even, cos on odd features, wavelengths 2 pi to 10000 * 2 pi."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    table = torch.zeros(length, width)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: width // 2])
    return table


class Translator(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int, layers: int, ffn: int, seq_len: int) -> None:
        super().__init__()
        self.positions: torch.Tensor
        self.causal: torch.Tensor
        self.embedding = nn.Embedding(vocab, hidden)
        nn.init.normal_(self.embedding.weight, std=hidden**-0.5)  # unit variance once scaled by sqrt(hidden)
        self.scale = math.sqrt(hidden)
        self.dropout = nn.Dropout(DROPOUT)
        self.transformer = nn.Transformer(
            d_model=hidden, nhead=heads, num_encoder_layers=layers, num_decoder_layers=layers, dim_feedforward=ffn,
            dropout=DROPOUT, batch_first=True,
        )
        # Buffers, not parameters: moved with the module, never trained, not in a checkpoint.
        self.register_buffer("positions", sinusoids(seq_len, hidden), persistent=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embedding(tokens) * self.scale + self.positions[: tokens.shape[1]])

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        length = target.shape[1]
        decoded = self.transformer(self.embed(source), self.embed(target), tgt_mask=self.causal[:length, :length],
                                   tgt_is_causal=True)
        return decoded @ self.embedding.weight.t()  # logits over the shared vocabulary


def _decoder_input(target: torch.Tensor) -> torch.Tensor:
    """What the decoder reads: the target after a start token, shifted right by one (teacher forcing)."""
    return torch.cat([torch.full_like(target[:, :1], START), target[:, :-1]], dim=1)


def _pair(source: np.ndarray, target: np.ndarray, device: torch.device | str) -> Batch:
    """A made-up sentence pair on the device."""
    source_ids, target_ids = torch.from_numpy(source).to(device), torch.from_numpy(target).to(device)
    return (source_ids, _decoder_input(target_ids)), target_ids


class TransformerBuilder(Builder):
    BLOCKS = ("transformer.encoder.layers", "transformer.decoder.layers")

    def build(self, model: ModelConfig) -> nn.Module:
        dims = model.spec.dims(model.size)
        return Translator(dims["vocab"], dims["hidden"], dims["heads"], dims["layers"], dims["ffn"],
                          model.param("seq_len"))

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """Random sentence pairs (``workloads.transformer.synthetic_pair``, TensorFlow's too), fed as the learnable
        ones are."""
        vocab = model.spec.dims(model.size)["vocab"]
        return _pair(*synthetic_pair(batch_size, model.param("seq_len"), vocab, seed), device)

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        """Source: the sequences; target: their translation."""
        return _pair(tokens, translated(tokens, model.spec.dims(model.size)["vocab"]), device)

    def batch_from_features(self, features: dict[str, torch.Tensor], model: ModelConfig,
                            device: torch.device | str) -> Batch:
        """A batch of converted sentence pairs padded to seq_len (``record_pipeline``): the decoder reads the
        target after the start token (PAD_ID, as the legacy reference shifts its targets right); padded target
        positions are labelled IGNORED, which the loss leaves out, as the reference's padded cross-entropy does."""
        source = features["inputs"].to(device, non_blocking=True)
        target = features["targets"].to(device, non_blocking=True)
        return (source, _decoder_input(target)), target.masked_fill(target == PAD_ID, IGNORED)

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """Label-smoothed cross-entropy over the batch's counted target tokens."""
        (source, target_in), target_out = batch
        logits = network(source, target_in).flatten(0, 1)
        return F.cross_entropy(logits, target_out.flatten(), label_smoothing=smoothing)

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per sentence pair: ``loss``'s criterion over its counted target tokens, as TensorFlow's; then every
        target token's logits and label."""
        (source, target_in), target_out = batch
        logits = network(source, target_in).float().flatten(0, 1)
        labels = target_out.flatten()
        token_losses = F.cross_entropy(logits, labels, label_smoothing=smoothing, reduction="none")
        return per_example(token_losses.view_as(target_out), target_out, IGNORED), logits, labels


BUILDER: type[TorchBuilder] = TransformerBuilder
