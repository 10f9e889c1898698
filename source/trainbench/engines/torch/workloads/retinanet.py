"""RetinaNet ResNet-50-FPN: torchvision's detector at one fixed input size, random boxes and labels, the sum of
its training losses (focal classification plus L1 box regression).

Full size is ``retinanet_resnet50_fpn(weights=None, weights_backbone=None)``; other dims build the same network
from its parts (the FPN's width, the heads' depth), which is that factory's own construction.

Its training step makes the host wait for the device ``HOST_SYNCS_PER_IMAGE`` times per image: torchvision checks
the boxes and matches anchors to them image by image, with values read into Python and shapes that depend on the
values (counted by ``engines.torch.host_syncs``; the same at every size). So the step cannot be captured as a CUDA
graph (the descriptor refuses --cuda-graph), and on a GPU the host stops queueing work that often, waiting for
the device to finish what is queued; TensorFlow's reference matches anchors in its input pipeline, outside the
step."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torchvision.models import resnet50
from torchvision.models.detection import RetinaNet, retinanet_resnet50_fpn
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import Builder, TorchBuilder, generator
from trainbench.workloads.retinanet import synthetic_boxes

Targets = dict[str, torch.Tensor]  # "boxes" (batch, boxes, 4) x1 y1 x2 y2 in pixels, "labels" (batch, boxes)
Batch = tuple[torch.Tensor, Targets]
FULL = {"fpn_channels": 256, "head_convs": 4}  # what retinanet_resnet50_fpn builds
RETURNED_LAYERS = (2, 3, 4)  # C3-C5 into the FPN; P6 and P7 from C5's output: P2 would make too many anchors
# Per image, in torchvision 0.29's RetinaNet (file:line), forward then backward:
#   retinanet.py:618      degenerate_boxes.any() in an if: a value read (.item())
#   _utils.py:408         Matcher.set_low_quality_matches_: torch.where(quality == best) (nonzero)
#   retinanet.py:171,173  the classification target: boolean-mask index_put_ and index
#   retinanet.py:182,183  the valid anchors' logits and targets: boolean-mask index (twice)
#   retinanet.py:186      max(1, num_foreground): a value read
#   retinanet.py:282      the foreground anchors for the box loss: torch.where (nonzero)
#   backward of :182      the logits' gradient scattered back through the boolean mask (index_put)
# Matcher's matches[mask] = constant (_utils.py:386-387) runs as masked_fill_, which reads nothing.
HOST_SYNCS_PER_IMAGE = 9


def _fixed_size(image_size: int) -> dict[str, Any]:
    """The transform at exactly the input size: no resizing (``_skip_resize``, the switch torchvision's own
    detection references use), so every step runs the same shapes; it still normalises and batches."""
    return {"min_size": image_size, "max_size": image_size, "_skip_resize": True}


def from_parts(num_classes: int, fpn_channels: int, head_convs: int, image_size: int) -> RetinaNet:
    """The factory's network with the FPN's width and the heads' number of convolutions as given. Untrained, so
    every layer trains and batch norm is the ordinary one (as the factory does without weights)."""
    trunk = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    stage2 = trunk.inplanes // 8  # 256: C2's channels; C3-C5 double it each stage
    backbone = BackboneWithFPN(
        trunk, {f"layer{layer}": str(index) for index, layer in enumerate(RETURNED_LAYERS)},
        [stage2 * 2 ** (layer - 1) for layer in RETURNED_LAYERS], fpn_channels,
        extra_blocks=LastLevelP6P7(fpn_channels, fpn_channels),
    )
    network = RetinaNet(backbone, num_classes, **_fixed_size(image_size))
    for head in (network.head.classification_head, network.head.regression_head):
        head.conv = head.conv[:head_convs]  # torchvision's heads always make 4; the first ones, in order
    return network


class RetinanetBuilder(Builder):
    def build(self, model: ModelConfig) -> nn.Module:
        dims = model.spec.dims(model.size)
        num_classes, image_size = model.param("num_classes"), model.param("image_size")
        if all(dims[name] == value for name, value in FULL.items()):
            network = retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=num_classes,
                                             **_fixed_size(image_size))
        else:
            network = from_parts(num_classes, dims["fpn_channels"], dims["head_convs"], image_size)
        if model.channels_last:  # the convolutions' layout; the transform batches its input anew, in NCHW
            network = network.to(memory_format=torch.channels_last)
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str, seed: int) -> Batch:
        """Noise images in [0, 1] (the detector normalises them) and the boxes and labels of
        ``workloads.retinanet.synthetic_boxes`` (TensorFlow's too)."""
        size, count = model.param("image_size"), model.spec.dims(model.size)["boxes_per_image"]
        images = torch.rand((batch_size, 3, size, size), device=device, generator=generator(device, seed))
        boxes, labels = synthetic_boxes(batch_size, count, size, model.param("num_classes"), seed)
        return images, {"boxes": torch.from_numpy(boxes).to(device), "labels": torch.from_numpy(labels).to(device)}

    def batch_from_features(self, features: dict[str, torch.Tensor], model: ModelConfig,
                            device: torch.device | str) -> Batch:
        """A batch of converted COCO images (``record_pipeline``): the letterboxed images in [0, 1] (the
        detector normalises them) and each image's boxes in pixels, repeated up to a fixed count (a repeat
        changes neither loss), with their labels."""
        images = features["image"].to(device, non_blocking=True)  # NCHW: the transform batches them anew
        return images, {"boxes": features["boxes"].to(device, non_blocking=True),
                        "labels": features["labels"].to(device, non_blocking=True)}

    def loss(self, network: nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
        """The sum of the detector's losses; ``smoothing`` does not apply (focal loss)."""
        images, targets = batch
        per_image = [{"boxes": boxes, "labels": labels}
                     for boxes, labels in zip(targets["boxes"], targets["labels"], strict=True)]
        losses = network(list(images), per_image)
        return torch.stack(list(losses.values())).sum()


BUILDER: type[TorchBuilder] = RetinanetBuilder
