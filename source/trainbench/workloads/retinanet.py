"""RetinaNet (Lin et al. 2017) with a ResNet-50-FPN backbone, object detection, at one fixed input size."""

from __future__ import annotations

import numpy as np

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

RETINANET = register(Workload(
    name="retinanet",
    title="RetinaNet ResNet-50-FPN",
    category="object detection",
    sample_unit="image",
    params={"image_size": Param(640, 64, 2048, "square input, px (fixed: no resizing inside the model)"),
            "num_classes": Param(91, 2, 1000, "object classes (COCO's 91 ids)")},
    sizes={"full": Size("ResNet-50-FPN backbone (P3-P7, 256 channels), heads of 4 convolutions, 9 anchors per "
                        "location, about 34 M parameters",
                        dims={"fpn_channels": 256, "head_convs": 4, "anchors": 9, "boxes_per_image": 8}),
           "tiny": Size("the same backbone on 128 px images, FPN of 64 channels, heads of 1 convolution",
                        dims={"fpn_channels": 64, "head_convs": 1, "anchors": 9, "boxes_per_image": 2},
                        defaults={"image_size": 128, "num_classes": 5})},
    references={"torch": "torchvision.models.detection.retinanet_resnet50_fpn (weights=None, fixed size)",
                "tf": "tf-models-official official.vision RetinaNet ResNet-50-FPN with its task's losses"},
    record_kind="coco",
    builders={"torch": "trainbench.engines.torch.workloads.retinanet",
              "tf": "trainbench.engines.tf.workloads.retinanet"},
    # torchvision checks boxes and matches anchors inside the step, image by image, reading the GPU 9 times per
    # image (engines/torch/workloads/retinanet.py: HOST_SYNCS_PER_IMAGE, counted on the CPU); a capture fails at the
    # first read, so --cuda-graph is refused here rather than left to fail in the worker.
    unsupported={"cuda_graph": "torchvision's loss reads the GPU 9 times per image every step (anchor matching, "
                               "boolean masks), which a CUDA graph cannot capture",
                 "activation_checkpointing": "recomputation is built for the transformer workloads' blocks"},
    untrainable="no learnable synthetic detection set (throughput, profile and input-bench measure it)",
    data=frozenset({"torch", "tf"}),  # converted records (trainbench data ...): engines/{torch,tf}/record_pipeline.py
    published_parameters=34e6,
    optimizer=ReferenceOptimizer("sgd", 0.16, 1e-4,
                                 source="torchvision's detection reference: SGD momentum 0.9, 0.01 per 16 images "
                                        "(0.16 per 256), weight decay 1e-4"),
    # Trainable batch norm in the backbone (torchvision's factory freezes it: 34,014,999); TF's heads differ slightly.
))


def synthetic_boxes(batch_size: int, count: int, size: int, num_classes: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The throughput benchmark's objects, the same in both frameworks: float32 [batch, count, 4] boxes (x1, y1, x2,
    y2) in pixels inside a size x size image, each side 1/16 to 1/2 of the image's, and int64 [batch, count] labels
    in 1..num_classes-1 (0 is the background to both references), drawn by ``seed``. Each builder puts them in its
    model's order (TensorFlow's: y first) and labels its anchors with them."""
    random = np.random.default_rng(seed)
    sides = random.uniform(size / 16, size / 2, (batch_size, count, 2))
    corners = random.uniform(0.0, 1.0, (batch_size, count, 2)) * (size - sides)
    boxes = np.concatenate([corners, corners + sides], axis=-1).astype(np.float32)
    return boxes, random.integers(1, num_classes, (batch_size, count), dtype=np.int64)
