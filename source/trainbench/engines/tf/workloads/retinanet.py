"""RetinaNet ResNet-50-FPN: tf-models-official's ``official.vision`` RetinaNet, built and trained as its task does.

The model is ``RetinaNetTask.build_model()`` (``factory.build_retinanet``) from a ``RetinaNetTask`` config: the
ResNet-50 backbone, an FPN over levels 3-7 of ``fpn_channels``, class and box heads of ``head_convs``
convolutions, 3 scales x 3 aspect ratios = 9 anchors per location, at one fixed square input size. The loss is
``RetinaNetTask.build_losses``: focal loss (alpha 0.25, gamma 1.5) plus 50 x Huber box loss (delta 0.1), both
summed and divided by the number of positive anchors + 1. No L2 regulariser in the model: the engine's weight
decay covers its kernels.

Targets: as in the task's input pipeline (``retinanet_input.Parser``), each image's boxes are assigned to anchors by
``anchor.AnchorLabeler`` (IoU 0.5 match, box targets encoded against the anchors), once, when the synthetic
batch is made: the reference labels anchors in the input pipeline, not in the training step, so the step timed
here is the reference's step. The boxes are random, ``boxes_per_image`` per image, inside the image. With real
data (``--data``: coco records, ``record_pipeline``), ``batch_from_features`` labels every batch's boxes the same
way inside the tf.data pipeline, in its threads.
"""

from __future__ import annotations

import weakref
from typing import Any

import tensorflow as tf
import tf_keras
from official.vision.configs import backbones, decoders
from official.vision.configs import retinanet as retinanet_config
from official.vision.ops import anchor
from official.vision.tasks import retinanet as retinanet_task

from trainbench.config import ModelConfig
from trainbench.engines.tf.record_pipeline import PADDING_CLASS
from trainbench.engines.tf.workloads import Batch, Builder, TfBuilder
from trainbench.workloads.retinanet import synthetic_boxes

MIN_LEVEL, MAX_LEVEL = 3, 7
NUM_SCALES, ASPECT_RATIOS, ANCHOR_SIZE = 3, (0.5, 1.0, 2.0), 4.0  # the official config's anchors: 9 per location


def task_config(model: ModelConfig) -> retinanet_config.RetinaNetTask:
    dims, size = model.spec.dims(model.size), model.param("image_size")
    if NUM_SCALES * len(ASPECT_RATIOS) != dims["anchors"]:
        raise ValueError(f"the descriptor's {dims['anchors']} anchors are not the official 3 scales x 3 ratios")
    return retinanet_config.RetinaNetTask(
        model=retinanet_config.RetinaNet(
            num_classes=model.param("num_classes"), input_size=[size, size, 3],
            min_level=MIN_LEVEL, max_level=MAX_LEVEL,
            anchor=retinanet_config.Anchor(num_scales=NUM_SCALES, aspect_ratios=list(ASPECT_RATIOS),
                                           anchor_size=ANCHOR_SIZE),
            backbone=backbones.Backbone(type="resnet", resnet=backbones.ResNet(model_id=50)),
            decoder=decoders.Decoder(type="fpn", fpn=decoders.FPN(num_filters=dims["fpn_channels"])),
            head=retinanet_config.RetinaNetHead(num_convs=dims["head_convs"], num_filters=dims["fpn_channels"]),
        ),
        losses=retinanet_config.Losses(l2_weight_decay=0.0),
    )


def anchors(size: int) -> tuple[dict[str, tf.Tensor], anchor.AnchorLabeler]:
    """The official config's anchors on a size x size input, and the task's labeler (IoU 0.5 match)."""
    generator = anchor.build_anchor_generator(MIN_LEVEL, MAX_LEVEL, NUM_SCALES, list(ASPECT_RATIOS), ANCHOR_SIZE)
    return generator(image_size=(size, size)), anchor.AnchorLabeler(match_threshold=0.5, unmatched_threshold=0.5)


class RetinaNetBuilder(Builder):
    def __init__(self) -> None:
        # network -> its task (for build_losses): a tf.Module, so not set on the Keras model (it would be tracked
        # and checkpointed with it).
        self._tasks: weakref.WeakKeyDictionary[tf_keras.Model, retinanet_task.RetinaNetTask] = (
            weakref.WeakKeyDictionary())

    def build(self, model: ModelConfig) -> tf_keras.Model:
        task = retinanet_task.RetinaNetTask(task_config(model))
        network = task.build_model()
        self._tasks[network] = task
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: Any, seed: int) -> Batch:
        size = model.param("image_size")
        boxes_per_image = model.spec.dims(model.size)["boxes_per_image"]
        anchor_boxes, labeler = anchors(size)
        # The boxes and labels of workloads.retinanet.synthetic_boxes (PyTorch's too), y first as the model's are.
        boxes, classes = synthetic_boxes(batch_size, boxes_per_image, size, model.param("num_classes"), seed)
        boxes = boxes[..., [1, 0, 3, 2]]
        with tf.device(device):
            images = tf.random.normal((batch_size, size, size, 3), seed=seed)
            per_image = []
            for index in range(batch_size):
                cls_targets, box_targets, _, cls_weights, box_weights = labeler.label_anchors(
                    anchor_boxes, tf.constant(boxes[index]), tf.constant(classes[index, :, None], tf.int32))
                per_image.append({"cls_targets": cls_targets, "box_targets": box_targets,
                                  "cls_weights": cls_weights, "box_weights": box_weights})
            labels = tf.nest.map_structure(lambda *parts: tf.stack(parts), *per_image)
            return images, labels

    def batch_from_features(self, features: dict[str, tf.Tensor], model: ModelConfig) -> Batch:
        """synthetic_batch's (images, labels) from a batch of coco records (``record_pipeline``: images, pixel boxes
        padded with class -1): each image's real boxes labelled against the anchors, as the task's Parser does."""
        anchor_boxes, labeler = anchors(model.param("image_size"))

        def label(example: tuple[tf.Tensor, tf.Tensor]) -> dict[str, Any]:
            boxes, classes = example
            real = classes != PADDING_CLASS
            cls_targets, box_targets, _, cls_weights, box_weights = labeler.label_anchors(
                anchor_boxes, tf.boolean_mask(boxes, real), tf.expand_dims(tf.boolean_mask(classes, real), 1))
            return {"cls_targets": dict(cls_targets), "box_targets": dict(box_targets), "cls_weights": cls_weights,
                    "box_weights": box_weights}

        per_location = {level: [*boxes.shape[:2], boxes.shape[2] // 4] for level, boxes in anchor_boxes.items()}
        count = sum(height * width * per_cell for height, width, per_cell in per_location.values())
        signature = {
            "cls_targets": {level: tf.TensorSpec(shape, tf.int32) for level, shape in per_location.items()},
            "box_targets": {level: tf.TensorSpec(boxes.shape, tf.float32) for level, boxes in anchor_boxes.items()},
            "cls_weights": tf.TensorSpec([count], tf.float32), "box_weights": tf.TensorSpec([count], tf.float32)}
        labels = tf.map_fn(label, (features["boxes"], features["classes"]), fn_output_signature=signature)
        return features["image"], labels

    def loss(self, network: tf_keras.Model, batch: Batch, smoothing: float) -> tf.Tensor:
        """The task's total loss (focal + 50 x Huber); detection has no label smoothing."""
        images, labels = batch
        # float32 outputs under a mixed policy, as RetinaNetTask.train_step casts them before its losses.
        outputs = tf.nest.map_structure(lambda output: tf.cast(output, tf.float32), network(images, training=True))
        total, _, _, _ = self._tasks[network].build_losses(outputs, labels)
        return total


BUILDER: type[TfBuilder] = RetinaNetBuilder
