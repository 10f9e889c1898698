"""Each framework's training input pipeline on its own, batch after batch, for the input benchmark
(``trainbench.bench.input_bench``): the pipeline the engine trains from, with no model.

Importable without a framework: each function imports its framework's pipeline only when called (a TensorFlow
process must never import torch's, nor the other way round).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

from trainbench.data.source import TFRECORDS, DataSource, record_format, tfrecords_only
from trainbench.errors import UsageError

Batches = Generator[Any, None, None]  # a generator: closing it stops the pipeline's workers now


class InputBatches(Protocol):
    def __call__(self, source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                 loader: str) -> Batches:
        """Endless preprocessed training batches of ``source``, each complete when handed over.
        ``workers``: the pipeline's parallelism (None: all cores); ``loader``: where images are decoded."""


class RecordBatches(Protocol):
    def __call__(self, source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                 loader: str, *, seq_len: int | None = None) -> Batches:
        """As InputBatches, for any record kind (``source.record_format``): collated batches of the kind's
        features; translation pairs padded to ``seq_len`` (None: the data's longest)."""


def tf_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
               loader: str) -> Batches:
    """tf.data over the TFRecords (``loader`` has one value for TensorFlow); ``workers``: its threads."""
    files = tfrecords_only(source).train  # before TensorFlow is imported: seconds saved on a refusal
    from trainbench.data import tf_pipeline

    dataset = tf_pipeline.training_dataset(files, batch_size, image_size, seed, threads=workers)
    with tf_pipeline.naming_corrupt_shard(files):
        yield from dataset


def torch_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                  loader: str, *, seq_len: int | None = None) -> Batches:
    """A DataLoader decoding in its worker processes (``loader`` "cpu") or on the GPU (``loader`` "gpu"). A folder
    of converted text or detection records (its manifest's kind) is read by ``data.torch_records``: collated
    dicts of tensors, translation pairs padded to ``seq_len`` (None: the data's longest), COCO images letterboxed
    to ``image_size``."""
    import torch

    from trainbench.data import gpu_pipeline, torch_pipeline, torch_records

    kind = record_format(source).kind if source.kind == TFRECORDS else "imagenet"
    if kind != "imagenet":
        if loader != "cpu":
            raise UsageError(f"--loader gpu decodes ImageNet's JPEG images; {kind} records are read by the CPU "
                             "workers: use --loader cpu")
        records = torch_records.make_loader(source, batch_size, seq_len=seq_len or _longest(source),
                                            image_size=image_size, train=True, seed=seed, workers=workers)
        yield from torch_pipeline.loader_batches(records, endless=True)
        return
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


def _longest(source: DataSource) -> int:
    """The longest sentence of a translation folder (its ``max_length``); 0 for the kinds without one."""
    return record_format(source).settings.get("max_length", 0)
