"""BERT-base (Devlin et al. 2018), language-model pre-training: masked LM plus next-sentence prediction."""

from __future__ import annotations

from trainbench.workloads import Param, Size, Workload, register

# Masked positions per sequence: 15 % of the tokens, as BERT's pre-training data (max_predictions_per_seq 20 at 128).
MASKED_FRACTION = 0.15


def masked_count(seq_len: int) -> int:
    """Masked positions per sequence, the same in both frameworks: 15 %, at least one (19 at 128 tokens)."""
    return max(1, round(MASKED_FRACTION * seq_len))

BERT = register(Workload(
    name="bert",
    title="BERT-base",
    category="language model pre-training (masked LM)",
    sample_unit="sequence",
    params={"seq_len": Param(128, 8, 512, "tokens per sequence (pre-training phase 1: 128; at most the 512 "
                                          "positions BERT has)")},
    sizes={"full": Size("BERT-base: 12 layers, hidden 768, 12 heads, intermediate 3072, 30,522-token vocabulary, "
                        "512 positions, about 110 M parameters",
                        dims={"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 30522,
                              "positions": 512, "type_vocab": 2}),
           "tiny": Size("2 layers, hidden 32, 2 heads, intermediate 64, 512-token vocabulary, 64 positions",
                        dims={"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "vocab": 512, "positions": 64,
                              "type_vocab": 2},
                        defaults={"seq_len": 32})},
    references={"torch": "Hugging Face transformers BertForPreTraining (BERT-base config, random weights)",
                "tf": "tf-models-official official.nlp.modeling BertEncoderV2 + BertPretrainerV2"},
    builders={"torch": "trainbench.engines.torch_workloads.bert",
              "tf": "trainbench.engines.tf_workloads.bert"},
    tokens_param="seq_len",
    unsupported={"channels_last": "it has no image tensors"},
    data=frozenset({"torch", "tf"}),  # converted records (trainbench data ...): data.torch_records, data.tf_records
    published_parameters=110e6,
    parameters={"torch": 110_106_428, "tf": 110_106_428},
))
