"""ResNet-50: tf-models-official's Keras ResNet-50 v1.5 (``resnet_model.resnet50``, Keras 2).

The builder fixes the input at 224x224; for other sizes the same model is cloned onto a new ``Input``
(``tf_keras.models.clone_model``): identical layers and configuration, only the input shape differs (the network
ends in global average pooling, so any size >= 32 works). It is built with ``use_l2_regularizer=False``: the
engine adds the weight-decay penalty over the kernels (``engines.base.is_decayed``, as torch's engine), so that
``OptimizerConfig.weight_decay`` applies (the built-in one is fixed at 1e-4 and twice as strong in the gradient).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras
from official.legacy.image_classification.resnet import resnet_model

from trainbench.config import ModelConfig
from trainbench.engines.tf.workloads import Batch, Builder, TfBuilder


class ResNet50Builder(Builder):
    def build(self, model: ModelConfig) -> tf_keras.Model:
        network = resnet_model.resnet50(num_classes=model.param("num_classes"), use_l2_regularizer=False)
        size = model.param("image_size")
        if size != 224:  # the builder hard-codes 224x224; reuse its layers on another input shape
            inputs = tf_keras.layers.Input(shape=(size, size, 3))
            network = tf_keras.models.clone_model(network, input_tensors=inputs)
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        with tf.device(device):
            size = model.param("image_size")
            images = tf.random.normal((batch_size, size, size, 3), seed=seed)
            labels = tf.random.uniform((batch_size,), 0, model.param("num_classes"), tf.int32, seed=seed)
            return images, labels

    def loss(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tf.Tensor:
        """Categorical cross-entropy with label smoothing on the model's float32 softmax (labels made one-hot)."""
        images, labels = batch
        probabilities = network(images, training=True)
        one_hot = tf.one_hot(labels, network.output_shape[-1])
        per_example = tf_keras.losses.categorical_crossentropy(one_hot, probabilities, label_smoothing=smoothing)
        return tf.reduce_mean(per_example)

    def eval_outputs(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tuple[tf.Tensor, ...]:
        """Per image: the training criterion (label smoothing included, so the two losses compare), the float32
        class probabilities, the label."""
        images, labels = batch
        probabilities = network(images, training=False)
        one_hot = tf.one_hot(labels, network.output_shape[-1])
        losses = tf_keras.losses.categorical_crossentropy(one_hot, probabilities, label_smoothing=smoothing)
        return losses, probabilities, labels


BUILDER: type[TfBuilder] = ResNet50Builder
