"""ResNet-50: torchvision's network, label-smoothed cross-entropy, NCHW noise and random labels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import generator


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float,
                        reduction: str = "mean") -> torch.Tensor:
    """The training criterion; the trainer's evaluation sums it (reduction "sum")."""
    return F.cross_entropy(logits, labels, label_smoothing=smoothing, reduction=reduction)


class Resnet50:
    def build(self, model: ModelConfig) -> nn.Module:
        import torchvision  # here: the engine imports classification_loss for every workload; torchvision is seconds

        network = torchvision.models.resnet50(weights=None, num_classes=model.param("num_classes"))
        if model.channels_last:
            network = network.to(memory_format=torch.channels_last)
        return network

    def synthetic_batch(self, model: ModelConfig, batch_size: int, device: torch.device | str,
                        seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        random = generator(device, seed)
        size = model.param("image_size")
        images = torch.randn((batch_size, 3, size, size), device=device, generator=random)
        if model.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, model.param("num_classes"), (batch_size,), device=device, generator=random)
        return images, labels

    def loss(self, network: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], smoothing: float) -> torch.Tensor:
        images, labels = batch
        return classification_loss(network(images), labels, smoothing)


BUILDER = Resnet50()
