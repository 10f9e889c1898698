"""Each framework's training input pipeline on its own, batch after batch, for the input benchmark
(``trainbench.bench.input_bench``): the pipeline the engine trains from, with no model.

Importable without a framework: each function imports its framework's pipeline only when called (a TensorFlow
process must never import torch's, nor the other way round).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

from trainbench.data.source import DataSource, tfrecords_only
from trainbench.errors import UsageError

Batches = Generator[Any, None, None]  # a generator: closing it stops the pipeline's workers now


class InputBatches(Protocol):
    def __call__(self, source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                 loader: str) -> Batches:
        """Endless preprocessed training batches of ``source``, each complete when handed over.
        ``workers``: the pipeline's parallelism (None: all cores); ``loader``: where images are decoded."""


def tf_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
               loader: str) -> Batches:
    """tf.data over the TFRecords (``loader`` has one value for TensorFlow); ``workers``: its threads."""
    files = tfrecords_only(source).train  # before TensorFlow is imported: seconds saved on a refusal
    from trainbench.data import tf_pipeline

    dataset = tf_pipeline.training_dataset(files, batch_size, image_size, seed, threads=workers)
    with tf_pipeline.naming_corrupt_shard(files):
        yield from dataset


def torch_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                  loader: str) -> Batches:
    """A DataLoader decoding in its worker processes (``loader`` "cpu") or on the GPU (``loader`` "gpu")."""
    import torch

    from trainbench.data import gpu_pipeline, torch_pipeline

    if loader == "cpu":
        batches = torch_pipeline.make_loader(source, batch_size, image_size, train=True, seed=seed, workers=workers)
        yield from torch_pipeline.batches(batches, endless=True)
        return
    if not torch.cuda.is_available():
        raise UsageError("--loader gpu: PyTorch sees no GPU; use --loader cpu")
    gpu_loader = gpu_pipeline.make_loader(source, batch_size, train=True, seed=seed, workers=workers, pin_memory=True)
    on_gpu = gpu_pipeline.batches(gpu_loader, image_size, "cuda", train=True, endless=True)
    try:
        for batch in on_gpu:
            torch.cuda.current_stream().synchronize()  # a batch counts once prepared on the GPU, not once queued
            yield batch
    finally:
        on_gpu.close()
