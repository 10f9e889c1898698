"""Transformer-base: tf-models-official's ``official.legacy.transformer`` with its base params.

``transformer.Transformer`` (the model ``create_model(params, is_train=True)`` wraps) built from
``model_params.BASE_PARAMS`` with the descriptor's dims: one embedding matrix shared by source, target and the
output projection, sinusoidal positions, pre-norm layers (layer norm before each sublayer, one more after each
stack) with dropout 0.1. The loss is the reference's ``metrics.transformer_loss``: label-smoothed cross-entropy
over the target tokens (minus its lowest possible value, as the reference logs it), padding (id 0) excluded; the
synthetic sentences hold no padding, real ones (``--data``: translation records, ``batch_from_features``) are
padded to seq_len.

Trained end to end on learnable sequences (``data.synthetic``): the source is the sequence, the target its
``translated`` form (every token moved up by one), so the loss falls when the network learns to translate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras
from official.legacy.transformer import metrics, model_params, transformer

from trainbench.config import ModelConfig
from trainbench.data.synthetic import translated
from trainbench.engines.tf.workloads import Batch, Builder, TfBuilder
from trainbench.workloads.transformer import synthetic_pair


def params_for(model: ModelConfig) -> dict[str, Any]:
    """BASE_PARAMS with the descriptor's dims, in the compute dtype of the precision policy in force."""
    dims = model.spec.dims(model.size)
    params = model_params.BASE_PARAMS.copy()  # a defaultdict: absent keys read None, as the reference expects
    params.update(
        vocab_size=dims["vocab"], hidden_size=dims["hidden"], num_hidden_layers=dims["layers"],
        num_heads=dims["heads"], filter_size=dims["ffn"], max_length=model.param("seq_len"),
        dtype=tf.as_dtype(tf_keras.mixed_precision.global_policy().compute_dtype), padded_decode=False,
    )
    return params


class TransformerBuilder(Builder):
    def build(self, model: ModelConfig) -> tf_keras.Model:
        network = transformer.Transformer(params_for(model), name="transformer_v2")
        ids = tf.ones((1, model.param("seq_len")), tf.int32)
        network([ids, ids], training=False)  # creates the variables now: the optimizer builds its slots on them
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        """Random sentence pairs (``workloads.transformer.synthetic_pair``, PyTorch's too)."""
        vocab = model.spec.dims(model.size)["vocab"]
        source, target = synthetic_pair(batch_size, model.param("seq_len"), vocab, seed)
        with tf.device(device):
            return tf.constant(source, tf.int32), tf.constant(target, tf.int32)

    def batch_from_tokens(self, model: ModelConfig, tokens: np.ndarray, device: Any, examples: np.ndarray) -> Batch:
        """(the sequences, their translations); nothing is drawn, so the examples' indices are unused."""
        vocab = model.spec.dims(model.size)["vocab"]
        with tf.device(device):
            return tf.constant(tokens, tf.int32), tf.constant(translated(tokens, vocab), tf.int32)

    def batch_from_features(self, features: dict[str, tf.Tensor], model: ModelConfig) -> Batch:
        """(source ids, target ids) from a batch of translation records (``record_pipeline``: padded with id 0 to
        seq_len, which the loss leaves out)."""
        return features["inputs"], features["targets"]

    def loss(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tf.Tensor:
        source, target = batch
        logits = network([source, target], training=True)
        return metrics.transformer_loss(logits, target, smoothing, network.params["vocab_size"])

    def eval_outputs(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tuple[tf.Tensor, ...]:
        """Per sentence pair: ``loss``'s criterion over its target tokens; then every target token's logits (the
        decoder is fed the target shifted right, as in training) and the token."""
        source, target = batch
        logits = network([source, target], training=False)
        vocab = network.params["vocab_size"]
        losses, weights = metrics.padded_cross_entropy_loss(logits, target, smoothing, vocab)
        per_pair = tf.math.divide_no_nan(tf.reduce_sum(losses, axis=1), tf.reduce_sum(weights, axis=1))
        return per_pair, tf.reshape(tf.cast(logits, tf.float32), (-1, vocab)), tf.reshape(target, (-1,))


BUILDER: type[TfBuilder] = TransformerBuilder
