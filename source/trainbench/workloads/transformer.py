"""The Transformer (Vaswani et al. 2017), base model, machine translation: the original suite's translation
category. Shared source/target embeddings that also project the decoder's output, as TF's reference does."""

from __future__ import annotations

import numpy as np

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

TRANSFORMER = register(Workload(
    name="transformer",
    title="Transformer-base",
    category="machine translation",
    sample_unit="sentence pair",
    params={"seq_len": Param(256, 2, 65536, "tokens per sentence, source and target alike (synthetic)")},
    sizes={"full": Size("Transformer-base: 6 encoder and 6 decoder layers, d_model 512, 8 heads, feed-forward 2048, "
                        "33,708-token shared vocabulary, about 61 M parameters",
                        dims={"layers": 6, "hidden": 512, "heads": 8, "ffn": 2048, "vocab": 33708}),
           "tiny": Size("2 + 2 layers, d_model 32, 2 heads, feed-forward 64, 512-token vocabulary",
                        dims={"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "vocab": 512},
                        defaults={"seq_len": 16})},
    references={"torch": "torch.nn.Transformer (Transformer-base shapes, shared embeddings)",
                "tf": "tf-models-official official.legacy.transformer (base params)"},
    record_kind="translation",
    builders={"torch": "trainbench.engines.torch.workloads.transformer",
              "tf": "trainbench.engines.tf.workloads.transformer"},
    tokens_param="seq_len",  # tokens/s counts the target tokens, as fairseq's and NVIDIA's wps do
    unsupported={"channels_last": "it has no image tensors"},
    data=frozenset({"torch", "tf"}),  # converted records (trainbench data ...): engines/{torch,tf}/record_pipeline.py
    published_parameters=61e6,
    optimizer=ReferenceOptimizer("adam", 7e-4, 0.0, label_smoothing=0.1, beta2=0.98,
                                 source="Transformer-base as fairseq and tf-models train it: Adam, betas 0.9 and "
                                        "0.98, 7e-4, label smoothing 0.1, no weight decay"),
    # torch - tf = 36,864: nn.Transformer's attention projection biases, which TF's reference does not have.
))


def synthetic_pair(batch_size: int, length: int, vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The throughput benchmark's batch, the same in both frameworks: (source, target) int64 [batch, length] of
    random ids in 1..vocab-1, drawn by ``seed``; id 0 is padding to both references' losses, so none is made. Each
    builder feeds the target to its decoder as it feeds a real one (after a start token, shifted right)."""
    random = np.random.default_rng(seed)
    source = random.integers(1, vocab, (batch_size, length), dtype=np.int64)
    return source, random.integers(1, vocab, (batch_size, length), dtype=np.int64)
