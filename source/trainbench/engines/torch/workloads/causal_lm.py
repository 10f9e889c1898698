"""What the Hugging Face causal language models (GPT-2, Llama) share: next-token prediction over sequences whose ids
are their own labels (the model shifts them), the attention name ``CAUSAL_SDPA``, and the batches, loss and
evaluation outputs. A subclass of ``CausalLM`` brings ``make``, the model from its config.

Attention is transformers' own SDPA function (``sdpa_attention_forward``) registered under a name of ours,
``CAUSAL_SDPA``, for which transformers has no mask function: ``create_causal_mask`` then returns no mask at once,
so every layer calls ``scaled_dot_product_attention(attn_mask=None, is_causal=True)``, eager, compiled or captured
alike (flash attention stays possible on a GPU). Under the stock "sdpa" name, transformers first looks for packed
sequences in the position ids: eager, ``(packed[:, -1] == 0).all()`` is read on the host every forward (a host sync
per step, ``masking_utils.find_packed_sequence_indices``); traced (torch.compile, a CUDA graph's capture) the check
is skipped, and every layer gets an explicit (batch, 1, T, T) mask with ``is_causal=False``, which rules flash out.
Skipping the mask is exact here: every sequence is a full block (no padding, nothing packed), so the mask would be
the plain causal one ``is_causal`` applies.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import Builder, generator, per_example
from trainbench.engines.torch.workloads._hf import transformers

Batch = tuple[torch.Tensor, torch.Tensor]  # (input ids, labels): the same ids
IGNORED = -100  # the label Hugging Face's loss leaves out (none here: every block is full)
CAUSAL_SDPA = "trainbench_causal_sdpa"  # see above: SDPA with is_causal and no mask, nothing read on the host

# The function registered as "sdpa", under a name transformers' AttentionMaskInterface does not know; registered
# once, here, for every causal model.
transformers.AttentionInterface.register(CAUSAL_SDPA, transformers.AttentionInterface()["sdpa"])


class CausalLM(Builder):
    """A Hugging Face ``...ForCausalLM`` trained on sequences of ``seq_len`` random (or learnable) token ids."""

    def make(self, model: ModelConfig) -> transformers.PreTrainedModel:
        """The model at model.size, from its config (random weights), as transformers makes it."""
        raise NotImplementedError

    def build(self, model: ModelConfig) -> nn.Module:
        network = self.make(model)
        network.set_attn_implementation(CAUSAL_SDPA)  # see above: made as "sdpa", transformers' default
        network.loss_type = "ForCausalLM"  # what it falls back to anyway, named so it does not warn every run
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        vocab, length = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        tokens = torch.randint(0, vocab, (batch_size, length), device=device, generator=generator(device, seed))
        return tokens, tokens

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: torch.device | str,
                          examples: np.ndarray) -> Batch:
        ids = torch.from_numpy(tokens).to(device)
        return ids, ids

    def batch_from_features(self, features: dict[str, torch.Tensor], model: ModelConfig,
                            device: torch.device | str) -> Batch:
        """A batch of converted blocks of seq_len + 1 ids (``record_pipeline``): the first seq_len are the
        input and, as in the synthetic batch, the labels, which the model shifts itself; so the block's last id
        is the target of no position (the Hugging Face loss has no target for the last one)."""
        ids = features["input_ids"][:, :-1].to(device, non_blocking=True)
        return ids, ids

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """The model's causal-LM loss; ``smoothing`` is not part of these models' training."""
        tokens, labels = batch
        return network(input_ids=tokens, labels=labels).loss

    def eval_outputs(self, network: nn.Module, batch: Batch,
                     smoothing: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per sequence, the mean next-token cross-entropy over its positions but the last (the model's loss, taken
        per sequence); the logits at those positions and the next tokens."""
        tokens, labels = batch
        logits = network(input_ids=tokens).logits[:, :-1].float()
        targets = labels[:, 1:]
        losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
        return per_example(losses, targets, IGNORED), logits.flatten(0, 1), targets.flatten()
