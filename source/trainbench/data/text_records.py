"""The records of the text kinds, from token ids, in ``record_schemas.SCHEMAS``' feature names and types.

- ``bert``: the algorithm of Google's ``create_pretraining_data.py`` (BERT's repository) with ``dupe_factor`` 1:
  for each document, chunks of consecutive sentences up to a target length (the full ``seq_len - 3``, or with
  probability 0.1 a shorter random one), cut at a random sentence boundary into A and B; half the time (and always
  for a one-sentence chunk) B is instead a random stretch of another document of the same shard (the unused
  sentences are put back), label 1. ``[CLS] A [SEP] B [SEP]``, the pair truncated to fit by removing tokens from
  the longer side, at its front or back at random; then 15 % of the tokens but ``[CLS]``/``[SEP]`` (at most
  ``max_predictions_per_seq``) are predicted: 80 % replaced by ``[MASK]``, 10 % kept, 10 % replaced by a random
  word (the original draws any vocabulary entry; here never a special token). The instances of a shard are
  shuffled, as the original shuffles its output.
- ``gpt2``: the shard's documents joined, each followed by the end-of-text token, cut into blocks of
  ``block_len`` = ``seq_len + 1`` ids; the last, short block is dropped.
- ``translation``: ``inputs`` and ``targets``, each ending in ``EOS_ID``; a pair with either side longer than
  ``max_length`` (the legacy Transformer's ``_filter_max_length``: EOS included) is dropped, and counted.

Every random choice comes from the generator it is given, seeded per shard by the converter.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from trainbench.data.record_schemas import EOS_ID, PAD_ID
from trainbench.data.tfrecord_writer import encode_example, float_feature, int64_feature

MASKED_LM_PROB = 0.15
SHORT_SEQ_PROB = 0.1
RANDOM_NEXT_PROB = 0.5

Sentence = list[int]


@dataclass(frozen=True)
class BertIds:
    """The special ids the BERT records use, and the ids a masked token may become at random."""

    cls: int
    sep: int
    mask: int
    words: Sequence[int]


@dataclass
class Instance:
    tokens: list[int]
    segment_ids: list[int]
    random_next: bool
    positions: list[int]
    labels: list[int]


def bert_instances(documents: Sequence[Sequence[Sentence]], seq_len: int, max_predictions: int, ids: BertIds,
                   rng: random.Random) -> list[Instance]:
    """Every instance of the shard's documents (lists of tokenised sentences), shuffled."""
    instances = [instance for index in range(len(documents))
                 for instance in _document_instances(documents, index, seq_len, max_predictions, ids, rng)]
    rng.shuffle(instances)
    return instances


def _document_instances(documents: Sequence[Sequence[Sentence]], index: int, seq_len: int, max_predictions: int,
                        ids: BertIds, rng: random.Random) -> Iterator[Instance]:
    document = documents[index]
    max_tokens = seq_len - 3  # [CLS], [SEP], [SEP]
    target = rng.randint(2, max_tokens) if rng.random() < SHORT_SEQ_PROB else max_tokens
    chunk: list[Sentence] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [token for sentence in chunk[:a_end] for token in sentence]
            if len(chunk) == 1 or rng.random() < RANDOM_NEXT_PROB:
                random_next = True
                tokens_b = _random_stretch(documents, index, target - len(tokens_a), rng)
                i -= len(chunk) - a_end  # the chunk's unused sentences start the next one
            else:
                random_next = False
                tokens_b = [token for sentence in chunk[a_end:] for token in sentence]
            _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            tokens = [ids.cls, *tokens_a, ids.sep, *tokens_b, ids.sep]
            segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            positions, labels = _mask(tokens, max_predictions, ids, rng)
            yield Instance(tokens, segments, random_next, positions, labels)
            chunk, length = [], 0
        i += 1


def _random_stretch(documents: Sequence[Sequence[Sentence]], index: int, length: int, rng: random.Random
                    ) -> list[int]:
    """Consecutive sentences of another document (the same one when the shard has no other), from a random one,
    until ``length`` tokens (at least one sentence)."""
    other = index
    for _ in range(10):  # the original's ten tries
        other = rng.randint(0, len(documents) - 1)
        if other != index:
            break
    document = documents[other]
    tokens: list[int] = []
    for sentence in document[rng.randint(0, len(document) - 1):]:
        tokens += sentence
        if len(tokens) >= length:
            break
    return tokens


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Drop tokens one at a time from the longer side, from its front or its end at random (BERT's
    create_pretraining_data), counted first and cut once: deleting each from the front of a list was quadratic, and
    a 10 MB line with no sentence end ran for many minutes."""
    spans = [[0, len(tokens_a)], [0, len(tokens_b)]]  # [start, end) kept of each side
    while (spans[0][1] - spans[0][0]) + (spans[1][1] - spans[1][0]) > max_tokens:
        longer = spans[0] if spans[0][1] - spans[0][0] > spans[1][1] - spans[1][0] else spans[1]
        if rng.random() < 0.5:
            longer[0] += 1
        else:
            longer[1] -= 1
    for tokens, (start, end) in ((tokens_a, spans[0]), (tokens_b, spans[1])):
        tokens[:] = tokens[start:end]


def _mask(tokens: list[int], max_predictions: int, ids: BertIds, rng: random.Random) -> tuple[list[int], list[int]]:
    """Mask ``tokens`` in place: the sorted positions predicted and their original ids."""
    candidates = [index for index, token in enumerate(tokens) if token not in (ids.cls, ids.sep)]
    rng.shuffle(candidates)
    count = min(max_predictions, max(1, round(len(tokens) * MASKED_LM_PROB)))
    chosen = sorted(candidates[:count])
    labels = [tokens[index] for index in chosen]
    for index in chosen:
        if rng.random() < 0.8:
            tokens[index] = ids.mask
        elif rng.random() >= 0.5:  # else 10 %: kept as it is
            tokens[index] = ids.words[rng.randint(0, len(ids.words) - 1)]
    return chosen, labels


def bert_example(instance: Instance, seq_len: int, max_predictions: int) -> bytes:
    padding = seq_len - len(instance.tokens)
    unused = max_predictions - len(instance.positions)
    return encode_example({
        "input_ids": int64_feature(instance.tokens + [PAD_ID] * padding),
        "input_mask": int64_feature([1] * len(instance.tokens) + [0] * padding),
        "segment_ids": int64_feature(instance.segment_ids + [0] * padding),
        "masked_lm_positions": int64_feature(instance.positions + [0] * unused),
        "masked_lm_ids": int64_feature(instance.labels + [0] * unused),
        "masked_lm_weights": float_feature([1.0] * len(instance.positions) + [0.0] * unused),
        "next_sentence_labels": int64_feature([int(instance.random_next)]),
    })


def gpt2_blocks(documents: Sequence[Sequence[int]], end_of_text: int, block_len: int) -> Iterator[list[int]]:
    """The documents' ids, each followed by ``end_of_text``, in blocks of ``block_len`` (the last short one dropped)."""
    stream: list[int] = []
    for document in documents:
        stream += document
        stream.append(end_of_text)
        while len(stream) >= block_len:
            yield stream[:block_len]
            del stream[:block_len]


def gpt2_example(block: Sequence[int]) -> bytes:
    return encode_example({"input_ids": int64_feature(block)})


def translation_example(source: Sequence[int], target: Sequence[int], max_length: int) -> bytes | None:
    """The pair's record, both sides ending in EOS_ID; None when a side is longer than ``max_length``."""
    inputs, targets = [*source, EOS_ID], [*target, EOS_ID]
    if len(inputs) > max_length or len(targets) > max_length:
        return None
    return encode_example({"inputs": int64_feature(inputs), "targets": int64_feature(targets)})
