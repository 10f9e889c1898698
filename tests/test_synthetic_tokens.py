"""The learnable token sequences end-to-end training of the sequence workloads uses (``data.synthetic``)."""

from __future__ import annotations

import numpy as np

from trainbench.data.synthetic import TOKEN_STRIDES, learnable_sequences, translated


def test_each_sequence_follows_its_stride_within_the_vocabulary() -> None:
    rows = learnable_sequences(0, 50, 12, vocab=40, seed=3)
    assert rows.shape == (50, 12) and rows.dtype == np.int64
    assert rows.min() >= 1 and rows.max() < 40  # token 0 (padding in the references) never appears
    steps = np.diff(rows, axis=1) % 39  # the stride, modulo the span [1, 40)
    assert all(len(set(row)) == 1 and row[0] in TOKEN_STRIDES for row in steps.tolist())
    assert len({row[0] for row in steps.tolist()}) == len(TOKEN_STRIDES)  # every stride is used


def test_any_slice_regenerates_and_other_seeds_differ() -> None:
    whole = learnable_sequences(0, 20, 8, vocab=30, seed=1)
    assert np.array_equal(learnable_sequences(5, 10, 8, vocab=30, seed=1), whole[5:15])
    assert not np.array_equal(learnable_sequences(0, 20, 8, vocab=30, seed=2), whole)


def test_the_translation_is_the_next_token_of_each() -> None:
    source = learnable_sequences(0, 10, 6, vocab=30, seed=0)
    target = translated(source, vocab=30)
    assert target.min() >= 1 and target.max() < 30
    assert np.array_equal((target - 1) % 29, (source - 1 + 1) % 29)
