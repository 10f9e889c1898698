"""ResNet-50: torchvision's network, label-smoothed cross-entropy (``ImageClassifier``), NCHW noise and random
labels."""

from __future__ import annotations

import torch
from torch import nn

from trainbench.config import ModelConfig
from trainbench.engines.torch.workloads import ImageClassifier, TorchBuilder, generator


class Resnet50(ImageClassifier):
    def build(self, model: ModelConfig) -> nn.Module:
        import torchvision  # here: importing torchvision costs seconds a sequence workload's worker never needs

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


BUILDER: type[TorchBuilder] = Resnet50
