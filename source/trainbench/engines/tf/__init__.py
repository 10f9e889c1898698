"""The TensorFlow engine and everything of it that imports TensorFlow: the engine (model, step, trainer,
checkpoints, FLOP counting), strategies and clusters (``distribute``), the workloads' builders (``workloads/``) and
the tf.data input pipelines (ImageNet records and images, converted records). Importing this package itself loads
no framework: the harness names these modules and imports them only in a worker."""
