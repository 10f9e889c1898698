"""ResNet-50 (He et al. 2015), image classification: the suite's first workload."""

from __future__ import annotations

from trainbench.workloads import Param, ReferenceOptimizer, Size, Workload, register

RESNET50 = register(Workload(
    name="resnet50",
    title="ResNet-50",
    category="image classification",
    sample_unit="image",
    # ModelConfig checks these bounds (config.MAX_IMAGE_SIZE, MAX_NUM_CLASSES are read from here).
    params={"image_size": Param(224, 32, 4096, "square input, px"),
            "num_classes": Param(1000, 2, 2**20, "classifier outputs")},
    sizes={"full": Size("the published network: 4 stages of 3, 4, 6, 3 bottleneck blocks, about 25.6 M parameters"),
           # The reference builders fix the architecture (TF's resnet_model.resnet50 has no width argument): tiny
           # keeps the network and shrinks its input and classifier, which is what its CPU tests always ran.
           "tiny": Size("the same network on 64 px images with 10 classes", defaults={"image_size": 64,
                                                                                       "num_classes": 10})},
    references={"torch": "torchvision.models.resnet50 (weights=None)",
                "tf": "tf-models-official official.vision ResNet-50 (resnet_model.resnet50, Keras 2)"},
    record_kind="imagenet",
    builders={"torch": "trainbench.engines.torch.workloads.resnet50",
              "tf": "trainbench.engines.tf.workloads.resnet50"},
    # Recomputing a block in training mode would update batch norm's running statistics a second time.
    unsupported={"activation_checkpointing": "recomputing a block would update batch norm's running statistics twice"},
    data=frozenset({"torch", "tf"}),
    published_parameters=25.557e6,
    optimizer=ReferenceOptimizer("sgd", 0.1, 1e-4, label_smoothing=0.1,
                                 source="tf-models-official's ResNet-50 and the original suite: SGD momentum 0.9, 0.1 "
                                        "per 256 images, label smoothing 0.1"),
))
