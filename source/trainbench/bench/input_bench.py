"""The input pipeline alone: how many preprocessed training samples (images, sequences, sentence pairs) per second
it delivers, with no training; for text also tokens per second (samples/s x the workload's tokens per sample, as
the training's tokens/s counts them: padding included).

Measured as the throughput is: warm-up batches excluded (pipeline start-up, worker processes, tf.data's
autotuning), then images / wall time of the timed batches. Each batch is complete when it is handed over (tf.data
returns computed tensors, a DataLoader stacked ones), so no synchronisation is needed.

``trainbench throughput --data`` measures this in each batch size's worker just before the training window and
flags the result ``input_bound`` when the pipeline alone has less than 10 % headroom over the measured training
rate (``INPUT_HEADROOM``): such a run measures the input pipeline at least as much as the training step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from trainbench import workloads
from trainbench.config import (
    FRAMEWORKS,
    LOADERS,
    MAX_BATCH_SIZE,
    MAX_IMAGE_SIZE,
    MAX_SEED,
    MAX_WORKERS,
    MIN_IMAGE_SIZE,
    Framework,
    Loader,
    check,
    check_choice,
    int_problem,
    loader_problem,
)
from trainbench.data.source import DataSource, open_source, record_format
from trainbench.engines.input_batches import INPUT_BATCHES, Batches
from trainbench.errors import UsageError

INPUT_HEADROOM = 1.1


@dataclass(frozen=True)
class InputBench:
    """One measurement of the input pipeline; validated when built, as the configurations in trainbench.config are."""

    framework: Framework
    data: str
    batch_size: int = 128
    image_size: int = 224
    warmup: int = 5
    steps: int = 20
    workers: int | None = None  # torch: DataLoader processes; tf: tf.data threads (None: all cores, autotuned)
    seed: int = 0
    loader: Loader = "cpu"  # torch: decode and augment in the workers, or on the GPU
    workload: str = workloads.DEFAULT  # whose pipeline: its record kind is the folder's (checked by the command line)
    seq_len: int | None = None  # text: tokens per sequence (None: the data's); translation pairs are padded to it

    def __post_init__(self) -> None:
        check_choice("framework", self.framework, FRAMEWORKS)
        workloads.get(self.workload)
        if self.seq_len is not None:
            check("sequence length", int_problem(self.seq_len, 1))
        check_choice("loader", self.loader, LOADERS)
        if problem := loader_problem(self.loader, self.framework, self.data, "auto"):
            raise UsageError(problem)
        check("batch size", int_problem(self.batch_size, 1, MAX_BATCH_SIZE))
        check("image size", int_problem(self.image_size, MIN_IMAGE_SIZE, MAX_IMAGE_SIZE))
        check("warm-up batches", int_problem(self.warmup, 0))
        check("timed batches", int_problem(self.steps))
        if self.workers is not None:
            check("workers", int_problem(self.workers, 0, MAX_WORKERS))
        check("seed", int_problem(self.seed, 0, MAX_SEED))


def measure_input(bench: InputBench) -> dict[str, Any]:
    """Samples/s (for ImageNet: images/s) of the training pipeline alone, with the figures it is computed from."""
    source = open_source(bench.data)
    record = record_format(source) if source.is_tfrecords else None
    seq_len = bench.seq_len or (record.settings.get("seq_len", record.settings.get("max_length")) if record else None)
    batches = _batches(bench, source, "imagenet" if record is None else record.kind, seq_len)
    taken = 0
    try:
        for _ in range(bench.warmup):
            next(batches)
            taken += 1
        start = time.perf_counter()
        for _ in range(bench.steps):
            next(batches)
            taken += 1
        seconds = time.perf_counter() - start
    except StopIteration:  # an endless pipeline that ended made no batch on a pass: say why, not a traceback
        raise UsageError(f"--data {bench.data}: the input pipeline ended after {taken} of "
                         f"{bench.warmup + bench.steps} batches of {bench.batch_size}: every record left out (e.g. "
                         "each translation pair longer than --seq-len), or fewer records than a batch") from None
    finally:
        batches.close()  # stops DataLoader workers now, not when garbage is collected during training
    samples = bench.batch_size * bench.steps
    result: dict[str, Any] = {
        "framework": bench.framework, "loader": bench.loader, "workload": bench.workload,
        "batch_size": bench.batch_size, "warmup_batches": bench.warmup, "timed_batches": bench.steps,
        "samples": samples, "seconds": seconds, "samples_per_sec": samples / seconds}
    spec = workloads.get(bench.workload)
    if "image_size" in spec.params or record is None:
        result.update(image_size=bench.image_size, images=samples, images_per_sec=samples / seconds)
    tokens = spec.tokens_per_sample({"seq_len": seq_len}) if seq_len is not None else None
    if tokens is not None:
        result.update(seq_len=seq_len, tokens_per_sec=tokens * samples / seconds)
    return result


def _batches(bench: InputBench, source: DataSource, kind: str, seq_len: int | None) -> Batches:
    return INPUT_BATCHES[bench.framework](source, bench.batch_size, bench.image_size, bench.seed, bench.workers,
                                          bench.loader, seq_len=seq_len)


def is_input_bound(input_images_per_sec: float, training_images_per_sec: float) -> bool:
    """True when the pipeline alone has less than 10 % headroom over the measured training rate."""
    # the ratio, not rate x 1.1: 100 x 1.1 is 110.00000000000001 in floating point, which made 110 % "bound"
    return input_images_per_sec / training_images_per_sec < INPUT_HEADROOM
