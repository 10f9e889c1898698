"""BERT-base pre-training: tf-models-official's ``BertEncoderV2`` + ``BertPretrainerV2`` (``official.nlp.modeling``).

The pretrainer's masked-LM head (dense + layer norm, output projection tied to the word embeddings, as in
``MaskedLMTask.build_model``) predicts the masked positions only; the next-sentence head classifies the encoder's
pooled [CLS] output (its ``pooler_transform``: dense + tanh) with one dense layer of 2 outputs. That is BERT's own
head, and Hugging Face's ``BertForPreTraining`` (``BertPooler`` + ``seq_relationship``): the task's default head
(``ClassificationHead(inner_dim=768)``) would add a second 768x768 pooler beside the encoder's unused one, 0.54 %
more parameters than the PyTorch network. The loss is ``MaskedLMTask.build_losses``': the masked-LM cross-entropy
averaged over the weighted masked positions plus the next-sentence cross-entropy averaged over the batch.

Synthetic and learnable batches hold the task of ``workloads.bert`` (the same arrays as PyTorch's): 15 % of each
sequence's positions (never the first, BERT's [CLS] place) replaced by [MASK] and predicted from their neighbours,
and half the pairs "not next", their second segment moved so that it no longer continues the first.

With real data (``--data``: bert records, ``record_pipeline``), ``batch_from_features`` feeds the records' own
masking (at most ``max_predictions_per_seq`` positions, padded with weight 0) and next-sentence labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras
from official.modeling import tf_utils
from official.nlp.modeling import models, networks

from trainbench.config import ModelConfig
from trainbench.engines.tf.workloads import Batch, Builder, TfBuilder
from trainbench.workloads.bert import PretrainingArrays, learnable_pretraining, synthetic_pretraining

BUILD_SEED_OFFSET = 2_000_003
INITIALIZER_RANGE = 0.02  # BERT's truncated-normal stddev (the task's mlm_initializer_range)


def pretraining_batch(arrays: PretrainingArrays, device: Any) -> Batch:
    """The task's arrays (``workloads.bert``) as the pretrainer's inputs and ``loss``'s targets, on the device;
    every masked position counts (weight 1) and no position is padding (mask 1)."""
    rows, seq_len = arrays.input_ids.shape
    with tf.device(device):
        inputs = {
            "input_word_ids": tf.constant(arrays.input_ids, tf.int32),
            "input_mask": tf.ones((rows, seq_len), tf.int32),
            "input_type_ids": tf.constant(arrays.type_ids, tf.int32),
            "masked_lm_positions": tf.constant(arrays.masked_positions, tf.int32),
        }
        targets = {
            "masked_lm_ids": tf.constant(arrays.masked_ids, tf.int32),
            "masked_lm_weights": tf.ones(arrays.masked_ids.shape, tf.float32),
            "next_sentence_labels": tf.constant(arrays.next_sentence, tf.int32),
        }
        return inputs, targets


class NextSentence(tf_keras.layers.Layer):
    """The next-sentence head on the encoder's own pooler: dense(2) on tanh(dense(the [CLS] vector))."""

    def __init__(self, pooler: tf_keras.layers.Dense, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pooler = pooler
        self.out_proj = tf_keras.layers.Dense(
            2, kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=INITIALIZER_RANGE), name="logits")

    def call(self, sequence_output: tf.Tensor) -> tf.Tensor:
        return self.out_proj(self.pooler(sequence_output[:, 0, :]))

    @property
    def checkpoint_items(self) -> dict[str, Any]:  # BertPretrainerV2.checkpoint_items asks every head
        return {}


class BertBuilder(Builder):
    def build(self, model: ModelConfig) -> tf_keras.Model:
        dims = model.spec.dims(model.size)
        encoder = networks.BertEncoderV2(
            vocab_size=dims["vocab"], hidden_size=dims["hidden"], num_layers=dims["layers"],
            num_attention_heads=dims["heads"], inner_dim=dims["ffn"], max_sequence_length=dims["positions"],
            type_vocab_size=dims["type_vocab"],
            initializer=tf_keras.initializers.TruncatedNormal(stddev=INITIALIZER_RANGE),
        )
        network = models.BertPretrainerV2(
            encoder_network=encoder,
            mlm_activation=tf_utils.get_activation("gelu"),
            mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=INITIALIZER_RANGE),
            classification_heads=[NextSentence(encoder.pooler_layer, name="next_sentence")],
        )
        # Builds the heads' variables now (the optimizer builds its slots on them), on a batch seeded apart from
        # the runner's so that its random ops do not advance the generators the runner's batch draws from.
        inputs, _ = self.synthetic_batch(model, 1, "/cpu:0", model.seed + BUILD_SEED_OFFSET)
        network(inputs)
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        """Random sentence pairs made into the pre-training task (``workloads.bert.synthetic_pretraining``)."""
        vocab, seq_len = model.spec.dims(model.size)["vocab"], model.param("seq_len")
        return pretraining_batch(synthetic_pretraining(batch_size, seq_len, vocab, seed), device)

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: Any, examples: np.ndarray) -> Batch:
        """Learnable sentence pairs (``workloads.bert.learnable_pretraining``: the masked positions, the [MASK] id
        and the "not next" pairs decided there, the same as PyTorch's)."""
        vocab = model.spec.dims(model.size)["vocab"]
        return pretraining_batch(learnable_pretraining(tokens, examples, model.seed, vocab), device)

    def batch_from_features(self, features: dict[str, tf.Tensor], model: ModelConfig) -> Batch:
        """synthetic_batch's format from a batch of bert records (``record_pipeline``): the records' own masked
        positions, ids and weights (0.0 on the padding positions) and next-sentence labels."""
        inputs = {
            "input_word_ids": features["input_ids"],
            "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "masked_lm_positions": features["masked_lm_positions"],
        }
        targets = {
            "masked_lm_ids": features["masked_lm_ids"],
            "masked_lm_weights": tf.cast(features["masked_lm_weights"], tf.float32),
            "next_sentence_labels": tf.reshape(features["next_sentence_labels"], [-1]),
        }
        return inputs, targets

    def loss(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tf.Tensor:
        """MaskedLMTask.build_losses (without its metrics); BERT pre-training has no label smoothing."""
        inputs, labels = batch
        outputs = network(inputs, training=True)
        lm_losses = tf_keras.losses.sparse_categorical_crossentropy(
            labels["masked_lm_ids"], tf.cast(outputs["mlm_logits"], tf.float32), from_logits=True)
        weights = labels["masked_lm_weights"]
        mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(lm_losses * weights), tf.reduce_sum(weights))
        sentence_loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
            labels["next_sentence_labels"], tf.cast(outputs["next_sentence"], tf.float32), from_logits=True))
        return mlm_loss + sentence_loss

    def eval_outputs(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tuple[tf.Tensor, ...]:
        """Per sequence: its masked-LM cross-entropy (over its weighted masked positions) plus its next-sentence
        one, whose batch mean is ``loss``'s; then the masked positions' logits and true tokens."""
        inputs, labels = batch
        outputs = network(inputs, training=False)
        mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
        lm_losses = tf_keras.losses.sparse_categorical_crossentropy(labels["masked_lm_ids"], mlm_logits,
                                                                    from_logits=True)
        weights = labels["masked_lm_weights"]
        mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(lm_losses * weights, axis=1), tf.reduce_sum(weights, axis=1))
        sentence_loss = tf_keras.losses.sparse_categorical_crossentropy(
            labels["next_sentence_labels"], tf.cast(outputs["next_sentence"], tf.float32), from_logits=True)
        vocab = mlm_logits.shape[-1]
        return mlm_loss + sentence_loss, tf.reshape(mlm_logits, (-1, vocab)), tf.reshape(labels["masked_lm_ids"], (-1,))


BUILDER: type[TfBuilder] = BertBuilder
