"""Each framework's training input pipeline on its own, batch after batch, for the input benchmark
(``trainbench.bench.input_bench``): the pipeline the engine trains from, with no model.

Importable without a framework: each function imports its framework's pipeline only when called (a TensorFlow
process must never import torch's, nor the other way round).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Protocol

from trainbench import workloads
from trainbench.config import ModelConfig
from trainbench.data.source import DataSource, RecordFormat, record_format, tfrecords_only
from trainbench.engines.launchers import process_place
from trainbench.errors import UsageError

if TYPE_CHECKING:
    from trainbench.engines.tf.workloads import TfBuilder

Batches = Generator[Any, None, None]  # a generator: closing it stops the pipeline's workers now


class InputBatches(Protocol):
    def __call__(self, source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                 loader: str, *, seq_len: int | None = None) -> Batches:
        """Endless preprocessed training batches of ``source`` (any record kind, ``source.record_format``), each
        complete when handed over. ``workers``: the pipeline's parallelism (None: all cores); ``loader``: where
        images are decoded; ``seq_len``: the run's tokens per sequence (None: the records' own)."""


class BeforeInput(Protocol):
    def __call__(self, model: ModelConfig) -> None:
        """Whatever this process must set up before its input pipeline runs alone (``bench.worker.input_rate``),
        for the model that trains after it."""


def tf_before_input(model: ModelConfig) -> None:
    """One TensorFlow worker of several (TF_CONFIG, a Slurm step): MultiWorkerMirroredStrategy made now. It must
    come before TensorFlow runs any operation, and tf.data runs some; the runner then finds it made (the engine
    keeps one per process). Alone, nothing: the strategy can come later."""
    from trainbench.engines.tf.distribute import cluster_of, make_strategy  # TensorFlow: this is a TF process

    if cluster_of(os.environ) is not None:
        make_strategy(model)


def nothing_before_input(model: ModelConfig) -> None:
    """For an engine whose input pipeline needs nothing set up first."""


def tf_training_dataset(source: DataSource, model: ModelConfig, batch_size: int, threads: int | None = None) -> Any:
    """The tf.data training input of ``model`` over the folder's shards: ImageNet through ``tf_pipeline``, the
    other record kinds through ``tf_records`` made into the builder's (inputs, targets) by its
    ``batch_from_features`` inside the pipeline. A folder of another kind than the workload reads is refused."""
    files = tfrecords_only(source).train
    fmt = record_format(source)
    expected = model.spec.record_kind
    if fmt.kind != expected:
        raise UsageError(f"{source.folder}: holds {fmt.kind} records; --workload {model.workload} reads {expected} "
                         "records")
    if model.spec.image_input:
        from trainbench.engines.tf import image_pipeline as tf_pipeline

        return tf_pipeline.training_dataset(files, batch_size, model.param("image_size"), model.seed, threads)

    # The builder first: its package sets TF_USE_LEGACY_KERAS before TensorFlow is imported.
    from trainbench.engines.tf.workloads import builder_of

    builder: TfBuilder | None = builder_of(model) if "tf" in model.spec.builders else None
    from trainbench.engines.tf import record_pipeline as tf_records

    params = model.params()
    features = tf_records.training_dataset(
        files, fmt, batch_size, model.seed, seq_len=params.get("seq_len"), image_size=params.get("image_size"),
        num_classes=params.get("num_classes"), threads=threads)
    if builder is None:  # GPT-2: no TensorFlow model; its input alone is the parsed blocks
        return features
    return tf_records.mapped(features, lambda batch: builder.batch_from_features(batch, model))


def _reader_model(fmt: RecordFormat, image_size: int, seq_len: int | None, seed: int) -> ModelConfig:
    """The model whose input a folder of this kind feeds, at the shape settings of the input benchmark: the given
    image size, and the given sequence length or else the records' own."""
    reader = workloads.reader_of(fmt.kind)
    params = reader.params
    if "seq_len" in params and seq_len is None:
        seq_len = fmt.settings.get("seq_len", fmt.settings.get("max_length"))
    return ModelConfig(framework="tf" if "tf" in reader.builders else "torch", workload=reader.name,
                       image_size=image_size if "image_size" in params else None,
                       seq_len=seq_len if "seq_len" in params else None, seed=seed)


def tf_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
               loader: str, *, seq_len: int | None = None) -> Batches:
    """tf.data over the TFRecords (``loader`` has one value for TensorFlow); ``workers``: its threads. Every record
    kind: the batches the engine trains from (RetinaNet's anchors labelled, text padded), see
    ``tf_training_dataset``; ``seq_len``: the run's tokens per sequence (None: the records' own)."""
    files = tfrecords_only(source).train  # before TensorFlow is imported: seconds saved on a refusal
    model = _reader_model(record_format(source), image_size, seq_len, seed)
    dataset = tf_training_dataset(source, model, batch_size, threads=workers)
    from trainbench.engines.tf.image_pipeline import naming_corrupt_shard

    with naming_corrupt_shard(files):
        yield from dataset


def torch_batches(source: DataSource, batch_size: int, image_size: int, seed: int, workers: int | None,
                  loader: str, *, seq_len: int | None = None) -> Batches:
    """A DataLoader decoding in its worker processes (``loader`` "cpu") or on the GPU (``loader`` "gpu"). A folder
    of converted text or detection records (its manifest's kind) is read by ``engines.torch.record_pipeline``: collated
    dicts of tensors, translation pairs padded to ``seq_len`` (None: the data's longest), COCO images letterboxed
    to ``image_size``."""
    import torch

    from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
    from trainbench.engines.torch import image_pipeline as torch_pipeline
    from trainbench.engines.torch import record_pipeline as torch_records

    fmt = record_format(source) if source.is_tfrecords else None  # None: an image folder tree
    if fmt is not None and not workloads.reader_of(fmt.kind).image_input:
        kind = fmt.kind
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
    # This process's GPU, as training will use it: under torchrun every rank measures at once, each on its own.
    device = f"cuda:{process_place().local_rank}"
    torch.cuda.set_device(device)
    gpu_loader = gpu_pipeline.make_loader(source, batch_size, train=True, seed=seed, workers=workers, pin_memory=True)
    on_gpu = gpu_pipeline.batches(gpu_loader, image_size, device, train=True, endless=True)
    prepared = None
    try:
        for prepared in on_gpu:
            torch.cuda.current_stream().synchronize()  # a batch counts once prepared on the GPU, not once queued
            yield prepared
    finally:
        on_gpu.close()
        prepared = None  # the last batch's tensors go before the cache is emptied
        torch.cuda.empty_cache()  # the blocks cached for its stream, which training would never reuse


def _longest(source: DataSource) -> int:
    """The longest sentence of a translation folder (its ``max_length``); 0 for the kinds without one."""
    return record_format(source).settings.get("max_length", 0)


# Each framework's pipeline alone and what its process sets up first, by --framework's name: the input benchmark's
# worker runs them in a process of that framework.
INPUT_BATCHES: dict[str, InputBatches] = {"tf": tf_batches, "torch": torch_batches}
BEFORE_INPUT: dict[str, BeforeInput] = {"tf": tf_before_input, "torch": nothing_before_input}
