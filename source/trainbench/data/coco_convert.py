"""``trainbench data coco``: COCO instance annotations and their images to TFRecord shards of the ``coco`` kind.

The ImageNet converter's steps and promises (``data/convert.py``): read and validate the annotations (``coco``),
fix each shard's content before any work (``shards.plan_split`` over the images, shuffled with the seed; with
``validation_fraction``, a seeded share of them forms the validation split), keep the shards a previous run of the
same plan finished and that are still intact (``shards.Manifest``; the fingerprint covers the annotations file's
bytes, every image's name and size, and the options), write the others in parallel, one shard per task, and list
the skipped entries and files in ``skipped.csv``. The shards depend on the plan alone, so they are byte-identical
whatever the worker count, and a killed run finishes, when rerun, with the bytes of an uninterrupted one. The
output folder is locked for the run; temporaries of stopped runs are removed.

``manifest.json`` carries ``"kind": "coco"`` and ``"settings": {"num_classes": <largest category id>}`` (what
``data.source.record_format`` reads), and ``"categories"`` (id and name of each) for users.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from trainbench.data.coco import CocoImage, CocoSet, read_coco
from trainbench.data.coco_records import coco_example, image_header
from trainbench.data.convert import SKIPPED_CSV, output_folder, remove_temporaries, write_shards, write_skipped
from trainbench.data.imagefiles import SIGNATURE_BYTES, SkipImage, check_signature
from trainbench.data.outputs import exclusive_folder
from trainbench.data.parallel import default_workers
from trainbench.data.shards import KIND_MANIFEST_FORMAT, TRAIN, VALIDATION, Manifest, ShardResult, ShardTask, plan_split
from trainbench.data.tfrecord_writer import write_shard
from trainbench.errors import os_reason

DEFAULT_SEED = 12345
DEFAULT_SHARDS = 32  # create_coco_tf_record.py's default --num_shards
DEFAULT_VALIDATION_SHARDS = 4


@dataclass(frozen=True)
class CocoOptions:
    annotations: Path
    image_dir: Path
    output: Path
    shards: int = DEFAULT_SHARDS  # training shards; fewer when there are fewer images
    validation_fraction: float = 0.0  # share of the images held out as the validation split
    validation_shards: int = DEFAULT_VALIDATION_SHARDS
    workers: int = field(default_factory=default_workers)
    seed: int = DEFAULT_SEED
    overwrite: bool = False


@dataclass(frozen=True)
class CocoSummary:
    output: Path
    shards: int
    resumed: int  # shards a previous run had finished, kept as they were
    redone: dict[str, str]  # finished shards that were written again, with the reason
    records: dict[str, int]  # per split, in all the shards
    boxes: int  # in all the shards
    processed: int  # images read by this run
    skipped: int  # rows of skipped.csv
    input_bytes: int  # of the images read by this run
    seconds: float

    @property
    def written(self) -> int:
        return sum(self.records.values())


def convert_coco(options: CocoOptions, stream: TextIO | None = None) -> CocoSummary:
    """Convert (or finish converting) the set; UsageError for input wrong as a whole, before any shard is written."""
    start = time.perf_counter()
    coco = read_coco(options.annotations, options.image_dir)
    tasks = plan_coco(coco, options)
    output = output_folder(options.output)
    with exclusive_folder(output, "conversion"):
        remove_temporaries(output)  # the lock is ours: no other run is writing them
        manifest = Manifest.open(output, _header(coco, tasks, options), (task.name for task in tasks),
                                 options.overwrite)
        todo = [task for task in tasks if task.name not in manifest.shards]
        try:
            write_shards(convert_shard, todo, manifest, output, "coco", options.workers, stream, _init_worker,
                         (coco.image_dir, output))
        finally:
            remove_temporaries(output)  # of shards a failure or Ctrl-C stopped: their workers are gone
        entries = [manifest.shards[task.name] for task in tasks]
        skipped = [*coco.skipped, *((file, reason) for entry in entries for file, reason in entry["skipped"])]
        write_skipped(output / SKIPPED_CSV, skipped)
    records: dict[str, int] = {}
    for entry in entries:
        records[entry["split"]] = records.get(entry["split"], 0) + entry["records"]
    return CocoSummary(
        output=output, shards=len(tasks), resumed=len(tasks) - len(todo), redone=manifest.redone, records=records,
        boxes=sum(_boxes(task, entry) for task, entry in zip(tasks, entries, strict=True)),
        processed=sum(len(task.sources) for task in todo), skipped=len(skipped),
        input_bytes=sum(image.size for task in todo for image in task.sources), seconds=time.perf_counter() - start)


def plan_coco(coco: CocoSet, options: CocoOptions) -> list[ShardTask]:
    """Training then validation shards, each a contiguous range of its split's shuffled images; no shard count
    above the split's image count (no empty shards)."""
    images = list(coco.images)
    held_out = round(len(images) * options.validation_fraction)
    if options.validation_fraction > 0 and len(images) > 1:
        held_out = min(max(held_out, 1), len(images) - 1)  # both splits keep at least one image
    order = list(range(len(images)))
    random.Random(f"{options.seed}/validation").shuffle(order)
    chosen = set(order[:held_out])
    train = [image for index, image in enumerate(images) if index not in chosen]
    validation = [image for index, image in enumerate(images) if index in chosen]
    return [*plan_split(TRAIN, train, min(options.shards, len(train)), options.seed),
            *plan_split(VALIDATION, validation, min(options.validation_shards, len(validation)), options.seed)]


def _fingerprint(coco: CocoSet, tasks: list[ShardTask], options: CocoOptions) -> str:
    """sha256 of what decides the shards' bytes: the annotations file, the plan, each image's name and size."""
    digest = hashlib.sha256(f"{coco.sha256}\n{options.seed}\n{options.validation_fraction!r}\n".encode())
    for task in tasks:
        digest.update(f"{task.name}\n".encode())
        for image in task.sources:
            digest.update(f"{image.source_id}\t{image.file_name}\t{image.size}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _header(coco: CocoSet, tasks: list[ShardTask], options: CocoOptions) -> dict:
    counts = {split: sum(task.split == split for task in tasks) for split in (TRAIN, VALIDATION)}
    return {"format": KIND_MANIFEST_FORMAT, "kind": "coco", "settings": {"num_classes": coco.num_classes},
            "fingerprint": _fingerprint(coco, tasks, options), "seed": options.seed,
            "validation_fraction": options.validation_fraction, "shard_counts": counts,
            "categories": [{"id": key, "name": name} for key, name in coco.categories.items()]}


def _boxes(task: ShardTask, entry: dict) -> int:
    """Boxes written in a shard: those of its images that were not skipped."""
    skipped = {file for file, _ in entry["skipped"]}
    return sum(len(image.objects) for image in task.sources if image.file_name not in skipped)


# --- in the worker processes -------------------------------------------------------------------------------

_image_dir: Path | None = None
_output: Path | None = None
_done = None  # the shared image counter


def _init_worker(image_dir: Path, output: Path, done: object) -> None:
    global _image_dir, _output, _done
    _image_dir, _output, _done = image_dir, output, done


def convert_shard(task: ShardTask) -> ShardResult:
    """Write one shard of the plan; its content depends on the plan alone, never on the worker or the timing."""
    assert _output is not None, "_init_worker sets up each worker"
    skipped: list[tuple[str, str]] = []
    written = write_shard(_output / task.name, _payloads(task.sources, skipped))
    return ShardResult(task.name, task.split, written.records, written.bytes, written.sha256, 0, skipped)


def _payloads(images: tuple[CocoImage, ...], skipped: list[tuple[str, str]]) -> Iterator[bytes]:
    for image in images:
        try:
            data = _read_image(image.file_name)
            header = image_header(data)
            if (header.width, header.height) != (image.width, image.height):
                raise SkipImage(f"the {header.format.upper()} is {header.width}x{header.height}, the annotations "
                                f"say {image.width}x{image.height}")
        except SkipImage as reason:
            skipped.append((image.file_name, str(reason)))
            continue
        finally:
            with _done.get_lock():  # type: ignore[attr-defined]
                _done.value += 1  # type: ignore[attr-defined]
        yield coco_example(image, data, header)


def _read_image(name: str) -> bytes:
    """The file's bytes; its head alone when that already shows it is not an image (a huge stray file)."""
    assert _image_dir is not None
    try:
        with open(_image_dir / name, "rb") as file:
            head = file.read(SIGNATURE_BYTES)
            check_signature(head)
            return head + file.read()
    except OSError as error:
        raise SkipImage(f"cannot read ({os_reason(error)})") from None
