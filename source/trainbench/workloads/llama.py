"""Llama 3 (Grattafiori et al. 2024), a decoder-only causal language model: pre-norm RMSNorm, rotary positions,
grouped-query attention, SwiGLU feed-forward. Full is Llama-3.1-8B, MLPerf Training's Llama 3.1 8B pre-training
benchmark; 1b is Llama-3.2-1B."""

from __future__ import annotations

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

TRAINING_LENGTH = 8192  # Llama 3's pre-training sequences, and MLPerf's Llama 3.1 8B reference
POSITIONS = 131072  # Llama 3.1 and 3.2 (rotary: no table, but longer sequences are outside what they trained)

LLAMA = register(Workload(
    name="llama",
    title="Llama",
    category="causal language model",
    sample_unit="sequence",
    params={"seq_len": Param(TRAINING_LENGTH, 8, POSITIONS,
                             f"tokens per sequence (at most the size's positions: {POSITIONS:,} at full and 1b)")},
    # "rope_factor" and "rope_original_positions": Llama 3.1's "llama3" rotary scaling (0: none); "tied": 1 when
    # the output projection is the embedding's matrix.
    sizes={"full": Size("Llama-3.1-8B: 32 layers, hidden 4,096, 32 heads, 8 key/value heads, feed-forward 14,336, "
                        "128,256-token vocabulary, untied embeddings, 131,072 positions, about 8.03 B parameters",
                        dims={"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                              "vocab": 128256, "positions": POSITIONS, "tied": 0, "rope_theta": 500000,
                              "rope_factor": 8, "rope_original_positions": TRAINING_LENGTH}),
           "1b": Size("Llama-3.2-1B: 16 layers, hidden 2,048, 32 heads, 8 key/value heads, feed-forward 8,192, "
                      "128,256-token vocabulary, tied embeddings, 131,072 positions, about 1.24 B parameters",
                      dims={"layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "ffn": 8192, "vocab": 128256,
                            "positions": POSITIONS, "tied": 1, "rope_theta": 500000, "rope_factor": 32,
                            "rope_original_positions": TRAINING_LENGTH}),
           "tiny": Size("2 layers, hidden 64, 4 heads, 2 key/value heads, feed-forward 128, 512-token vocabulary, "
                        "untied embeddings, 128 positions",
                        dims={"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 512,
                              "positions": 128, "tied": 0, "rope_theta": 500000, "rope_factor": 0,
                              "rope_original_positions": 0},
                        defaults={"seq_len": 32})},
    references={"torch": "Hugging Face transformers LlamaForCausalLM (Llama 3 shapes, random weights)"},
    # GPT-2's records: blocks of seq_len + 1 ids of a byte-level BPE vocabulary (50,257 tokens by default), which
    # fit Llama's 128,256-token embedding; the tokenizer is outside the timed step.
    record_kind="gpt2",
    builders={"torch": "trainbench.engines.torch.workloads.llama"},
    # keras-hub 0.29.1 pins beside tf-models-official 2.20 (pip's resolver adds only kagglehub), but its Llama is
    # Keras 3: its variables, optimizer and mixed-precision policy are not tf_keras's, which the TensorFlow engine
    # and tf-models-official run: a second TensorFlow engine, not a builder.
    refused={"tf": "the TensorFlow engine runs tf_keras (Keras 2), as tf-models-official does, and keras-hub's Llama "
                   "is Keras 3 (run it with --framework torch)"},
    tokens_param="seq_len",
    unsupported={"channels_last": "it has no image tensors"},
    data=frozenset({"torch"}),  # converted gpt2 records (trainbench data text): engines.torch.record_pipeline
    published_parameters=8.03e9,
    optimizer=ReferenceOptimizer("adamw", 1.5e-4, 0.1, beta2=0.95,
                                 source="Llama 3 8B's pre-training: AdamW, betas 0.9 and 0.95, peak 3e-4 at 4M "
                                        "tokens (512 sequences of 8,192: 1.5e-4 per 256), weight decay 0.1"),
))
