"""Llama 3: Hugging Face ``LlamaForCausalLM`` from a ``LlamaConfig`` at the descriptor's shapes (random weights,
nothing downloaded), next-token prediction over random sequences; the model shifts the labels (the input ids)
itself.

Batches, loss, evaluation and attention (``CAUSAL_SDPA``: SDPA with ``is_causal`` and no mask, nothing read on the
host; grouped-query attention inside transformers' SDPA function) are every causal language model's: ``causal_lm``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import TorchBuilder
from trainbench.engines.torch.workloads._hf import transformers
from trainbench.engines.torch.workloads.causal_lm import CausalLM


def rope(dims: Mapping[str, int]) -> dict[str, Any]:
    """Rotary positions: Llama 3.1's "llama3" scaling (low and high frequency factors 1 and 4, as published) where
    the size has a factor, else plain rotary at the size's base. No parameters and no counted FLOPs either way."""
    if not dims["rope_factor"]:
        return {"rope_type": "default", "rope_theta": float(dims["rope_theta"])}
    return {"rope_type": "llama3", "rope_theta": float(dims["rope_theta"]), "factor": float(dims["rope_factor"]),
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": dims["rope_original_positions"]}


def config(model: ModelConfig) -> transformers.LlamaConfig:
    dims = model.spec.dims(model.size)
    # No key/value cache: training never decodes. No special token ids: nothing here reads them, and Llama 3's
    # (128,000 and 128,001) would not fit the tiny vocabulary.
    return transformers.LlamaConfig(
        vocab_size=dims["vocab"], hidden_size=dims["hidden"], intermediate_size=dims["ffn"],
        num_hidden_layers=dims["layers"], num_attention_heads=dims["heads"], num_key_value_heads=dims["kv_heads"],
        max_position_embeddings=dims["positions"], rms_norm_eps=1e-5, tie_word_embeddings=bool(dims["tied"]),
        rope_parameters=rope(dims), use_cache=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)


class LlamaBuilder(CausalLM):
    BLOCKS = ("model.layers",)

    def make(self, model: ModelConfig) -> transformers.PreTrainedModel:
        return transformers.LlamaForCausalLM(config(model))


BUILDER: type[TorchBuilder] = LlamaBuilder
