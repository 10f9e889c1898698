"""ResNet-50 (He et al. 2015), image classification: the suite's first workload."""

from __future__ import annotations

from trainbench.workloads import Param, Workload, register

RESNET50 = register(Workload(
    name="resnet50",
    title="ResNet-50",
    category="image classification",
    sample_unit="image",
    # ModelConfig checks these bounds (config.MAX_IMAGE_SIZE, MAX_NUM_CLASSES are read from here).
    params={"image_size": Param(224, 32, 4096, "square input, px"),
            "num_classes": Param(1000, 2, 2**20, "classifier outputs")},
    sizes={"full": "the published network: 4 stages of 3, 4, 6, 3 bottleneck blocks, about 25.6 M parameters"},
    references={"torch": "torchvision.models.resnet50 (weights=None)",
                "tf": "tf-models-official official.vision ResNet-50 (resnet_model.resnet50, Keras 2)"},
))
