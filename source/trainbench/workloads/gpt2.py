"""GPT-2 small (Radford et al. 2019), causal language model."""

from __future__ import annotations

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

GPT2 = register(Workload(
    name="gpt2",
    title="GPT-2 small",
    category="causal language model",
    sample_unit="sequence",
    params={"seq_len": Param(1024, 8, 1024, "tokens per sequence (at most GPT-2's 1024 positions)")},
    sizes={"full": Size("GPT-2 small: 12 layers, hidden 768, 12 heads, 50,257-token vocabulary, 1024 positions, "
                        "about 124 M parameters",
                        dims={"layers": 12, "hidden": 768, "heads": 12, "vocab": 50257, "positions": 1024}),
           "tiny": Size("2 layers, hidden 32, 2 heads, 512-token vocabulary, 64 positions",
                        dims={"layers": 2, "hidden": 32, "heads": 2, "vocab": 512, "positions": 64},
                        defaults={"seq_len": 32})},
    references={"torch": "Hugging Face transformers GPT2LMHeadModel (GPT-2 small config, random weights)"},
    record_kind="gpt2",
    builders={"torch": "trainbench.engines.torch.workloads.gpt2"},
    refused={"tf": "the pinned tf-models-official has no GPT-2 (run it with --framework torch)"},
    tokens_param="seq_len",
    unsupported={"channels_last": "it has no image tensors"},
    data=frozenset({"torch"}),  # converted records (trainbench data text): engines.torch.record_pipeline
    published_parameters=124e6,
    optimizer=ReferenceOptimizer("adamw", 3.2e-4, 0.1, beta2=0.95,
                                 source="GPT-2 small as nanoGPT reproduces it: AdamW, betas 0.9 and 0.95, 6e-4 at "
                                        "480 sequences (3.2e-4 per 256), weight decay 0.1"),
))
