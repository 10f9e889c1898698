"""GPT-2 small: Hugging Face ``GPT2LMHeadModel`` from a config (random weights), next-token prediction over
random sequences; the model shifts the labels (the input ids) itself.

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
from trainbench.engines.torch.workloads import Builder, TorchBuilder, generator, per_example
from trainbench.engines.torch.workloads._hf import transformers

Batch = tuple[torch.Tensor, torch.Tensor]  # (input ids, labels): the same ids
IGNORED = -100  # the label Hugging Face's loss leaves out (none here: every block is full)
CAUSAL_SDPA = "trainbench_causal_sdpa"  # see above: SDPA with is_causal and no mask, nothing read on the host

# The function registered as "sdpa", under a name transformers' AttentionMaskInterface does not know.
transformers.AttentionInterface.register(CAUSAL_SDPA, transformers.AttentionInterface()["sdpa"])


def config(model: ModelConfig) -> transformers.GPT2Config:
    dims = model.spec.dims(model.size)
    # No key/value cache: training never decodes, and the cache would be built and dropped every step. The
    # end-of-text token is the vocabulary's last, as GPT-2's 50,256 is (the default would not fit the tiny one).
    return transformers.GPT2Config(n_layer=dims["layers"], n_embd=dims["hidden"], n_head=dims["heads"],
                                   vocab_size=dims["vocab"], n_positions=dims["positions"], use_cache=False,
                                   bos_token_id=dims["vocab"] - 1, eos_token_id=dims["vocab"] - 1)


class Gpt2Builder(Builder):
    def build(self, model: ModelConfig) -> nn.Module:
        network = transformers.GPT2LMHeadModel(config(model))
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
        """The model's causal-LM loss; ``smoothing`` is not part of GPT-2's training."""
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


BUILDER: type[TorchBuilder] = Gpt2Builder
