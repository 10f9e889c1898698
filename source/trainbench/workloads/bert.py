"""BERT-base (Devlin et al. 2018), language-model pre-training: masked LM plus next-sentence prediction."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

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
    record_kind="bert",
    builders={"torch": "trainbench.engines.torch.workloads.bert",
              "tf": "trainbench.engines.tf.workloads.bert"},
    tokens_param="seq_len",
    unsupported={"channels_last": "it has no image tensors"},
    data=frozenset({"torch", "tf"}),  # converted records (trainbench data ...): engines/{torch,tf}/record_pipeline.py
    published_parameters=110e6,
    optimizer=ReferenceOptimizer("adamw", 1e-4, 0.01,
                                 source="tf-models-official's BERT pre-training: AdamW, 1e-4 at batch 256, weight "
                                        "decay 0.01 (not on LayerNorm and biases)"),
))


# --- the pre-training task, the same in both frameworks ----------------------------------------------------------
# Each builder only turns these arrays into its own tensors and input names: the task (which positions are masked,
# with which id, which pairs are "not next") is decided here, once.

# [MASK] in every batch made here, synthetic or learnable: no made-up token is 0 (learnable_sequences start at 1, the
# random ids too), so a masked position is always told apart. (BERT's own vocabulary has [MASK] at 103, an ordinary
# token of the tiny learnable set; its records bring their own masking.)
MASK_ID = 0
FIRST_TOKEN = 1  # the lowest made-up token: learnable_sequences' default first_token
IS_NEXT, NOT_NEXT = 0, 1  # next-sentence labels, as BERT's records and both references number them


class PretrainingArrays(NamedTuple):
    """One pre-training batch as named int64 arrays: B sentence pairs of L tokens, M = masked_count(L) masked each."""

    input_ids: np.ndarray  # [B, L]: the pair, [MASK] at the masked positions
    type_ids: np.ndarray  # [B, L]: 0 on the first half (segment A), 1 on the second (B)
    masked_positions: np.ndarray  # [B, M]: distinct, ascending, never 0 (the [CLS] place)
    masked_ids: np.ndarray  # [B, M]: the tokens the masked positions held
    next_sentence: np.ndarray  # [B]: IS_NEXT, or NOT_NEXT where the second half no longer continues the first


def learnable_pretraining(tokens: np.ndarray, examples: np.ndarray, seed: int, vocab: int) -> PretrainingArrays:
    """Sentence pairs from learnable sequences (``data.synthetic.learnable_sequences``, int64 [B, L]), row r being
    example ``examples[r]`` of the set. A generator seeded by (seed, example) draws the row's masked positions in
    1..L-1 and whether the pair is "not next"; a "not next" pair's second half is moved by a random offset within
    the vocabulary, so it no longer continues the first and the next-sentence loss is learnable (labels alone,
    random, would hold it at ln 2). The same example gives the same row in any batch."""
    tokens = np.array(tokens, dtype=np.int64)  # a copy: "not next" rows are changed
    count, length = tokens.shape
    span = vocab - FIRST_TOKEN
    positions = np.empty((count, masked_count(length)), dtype=np.int64)
    next_sentence = np.empty(count, dtype=np.int64)
    for row, example in enumerate(examples):
        random = np.random.default_rng((seed, int(example)))
        positions[row] = np.sort(random.choice(np.arange(1, length), positions.shape[1], replace=False))
        next_sentence[row] = NOT_NEXT if random.integers(2) else IS_NEXT
        if next_sentence[row] == NOT_NEXT:
            second = tokens[row, length // 2:]
            tokens[row, length // 2:] = FIRST_TOKEN + (second - FIRST_TOKEN + random.integers(1, span)) % span
    masked_ids = np.take_along_axis(tokens, positions, axis=1)
    input_ids = tokens.copy()
    np.put_along_axis(input_ids, positions, MASK_ID, axis=1)
    type_ids = np.broadcast_to((np.arange(length) >= length // 2).astype(np.int64), (count, length)).copy()
    return PretrainingArrays(input_ids, type_ids, positions, masked_ids, next_sentence)


def synthetic_pretraining(batch_size: int, length: int, vocab: int, seed: int) -> PretrainingArrays:
    """The throughput benchmark's batch: random ids in 1..vocab-1 (drawn by ``seed``) made into the same task."""
    tokens = np.random.default_rng(seed).integers(FIRST_TOKEN, vocab, (batch_size, length), dtype=np.int64)
    return learnable_pretraining(tokens, np.arange(batch_size), seed, vocab)
