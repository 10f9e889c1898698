"""GPT-2 small: Hugging Face ``GPT2LMHeadModel`` from a config (random weights), next-token prediction over
random sequences; the model shifts the labels (the input ids) itself.

Batches, loss, evaluation and attention (``CAUSAL_SDPA``: SDPA with ``is_causal`` and no mask, nothing read on the
host) are every causal language model's: ``causal_lm``.
"""

from __future__ import annotations

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import TorchBuilder
from trainbench.engines.torch.workloads._hf import transformers
from trainbench.engines.torch.workloads.causal_lm import CAUSAL_SDPA, IGNORED, Batch, CausalLM

__all__ = ["BUILDER", "CAUSAL_SDPA", "IGNORED", "Batch", "Gpt2Builder", "config", "transformers"]


def config(model: ModelConfig) -> transformers.GPT2Config:
    dims = model.spec.dims(model.size)
    # No key/value cache: training never decodes, and the cache would be built and dropped every step. The
    # end-of-text token is the vocabulary's last, as GPT-2's 50,256 is (the default would not fit the tiny one).
    return transformers.GPT2Config(n_layer=dims["layers"], n_embd=dims["hidden"], n_head=dims["heads"],
                                   vocab_size=dims["vocab"], n_positions=dims["positions"], use_cache=False,
                                   bos_token_id=dims["vocab"] - 1, eos_token_id=dims["vocab"] - 1)


class Gpt2Builder(CausalLM):
    BLOCKS = ("transformer.h",)

    def make(self, model: ModelConfig) -> transformers.PreTrainedModel:
        return transformers.GPT2LMHeadModel(config(model))


BUILDER: type[TorchBuilder] = Gpt2Builder
