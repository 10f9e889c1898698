"""The PyTorch engine and everything of it that imports torch: the engine (model, step, trainer, checkpoints,
distribution), the workloads' builders (``workloads/``), FLOP counting (``workloads/flops``) and the input
pipelines (ImageNet images on CPU workers or on the GPU, converted records). Importing this package itself loads
no framework: the harness names these modules and imports them only in a worker."""
