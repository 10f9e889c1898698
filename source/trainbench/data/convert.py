"""``trainbench data convert``: an ImageNet folder to TFRecord shards in the standard record schema.

Steps: scan the tree (``imagenet_tree``), fix each shard's content (``shards.plan_shards``), keep the shards a
previous run of the same plan finished and that are still intact (``shards.Manifest``), write the others in
parallel, one shard per task (``convert_shard``), and list the skipped files in ``skipped.csv``. Workers report
each image to a shared counter that drives the progress bar; the parent alone writes the manifest, after each
finished shard. The output folder is locked for the run (``outputs.exclusive_folder``): a second conversion into it
is refused, and every temporary file found there at the start or left by this run's stopped workers is stale and
removed.
"""

from __future__ import annotations

import contextlib
import csv
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from trainbench.data.bboxes import Box, read_boxes
from trainbench.data.imagefiles import SIGNATURE_BYTES, PreparedImage, SkipImage, check_signature, prepare_image
from trainbench.data.imagenet_tree import TRAIN, VAL, ImageTree, Source, scan_tree
from trainbench.data.outputs import exclusive_folder, outside_inputs, printable
from trainbench.data.parallel import WorkerDied, counter, default_workers, run_parallel
from trainbench.data.progress import Progress
from trainbench.data.shards import MANIFEST, MANIFEST_FORMAT, Manifest, ShardResult, ShardTask, fingerprint, plan_shards
from trainbench.data.tfrecord_writer import PARTIAL, image_example, write_shard
from trainbench.errors import UsageError, os_reason
from trainbench.results.csv_cells import neutral
from trainbench.results.files import temporary_files, write_text_atomic

OUTPUT_FOLDER = "TFRecords"
SKIPPED_CSV = "skipped.csv"
DEFAULT_SEED = 12345  # the original converter's shuffling seed


@dataclass(frozen=True)
class ConvertOptions:
    data_dir: Path
    output: Path | None = None  # default: <data_dir>/TFRecords
    train_shards: int = 1024
    validation_shards: int = 128
    workers: int = field(default_factory=default_workers)
    seed: int = DEFAULT_SEED
    synset_names: Path | None = None  # lines '<synset> <text>' for image/class/text
    overwrite: bool = False

    @property
    def output_dir(self) -> Path:
        return self.output or self.data_dir / OUTPUT_FOLDER


@dataclass(frozen=True)
class ConvertSummary:
    output: Path
    shards: int
    resumed: int  # shards a previous run had finished, kept as they were
    redone: dict[str, str]  # shards a previous run had finished that were written again, with the reason
    records: dict[str, int]  # per split, in all the shards
    processed: int  # files read by this run
    reencoded: int  # records whose image was re-encoded as an RGB JPEG (PNG, CMYK, ...), in all the shards
    skipped: int  # files (and tree entries) listed in skipped.csv
    input_bytes: int
    seconds: float

    @property
    def written(self) -> int:
        """Records in all the shards: every image converted, re-encoded or stored as it was."""
        return sum(self.records.values())


def convert(options: ConvertOptions, stream: TextIO | None = None) -> ConvertSummary:
    """Convert (or finish converting) the tree; UsageError for bad input, before any shard is written."""
    start = time.perf_counter()
    # The default output is <data dir>/TFRecords: only train/ and val/ are read, so only they must not hold it.
    outside_inputs(options.output_dir, (options.data_dir / TRAIN, options.data_dir / VAL))
    tree = scan_tree(options.data_dir)
    texts = read_synset_names(options.synset_names, tree.synsets)
    tasks = plan_shards(tree, options.train_shards, options.validation_shards, options.seed)
    output = output_folder(options.output_dir)
    with exclusive_folder(output, "conversion"):
        remove_temporaries(output)  # the lock is ours: no other run is writing them
        manifest = Manifest.open(output, _header(tree, tasks, texts, options), (task.name for task in tasks),
                                 options.overwrite)
        todo = [task for task in tasks if task.name not in manifest.shards]
        try:
            write_shards(convert_shard, todo, manifest, output, "convert", options.workers, stream, _init_worker,
                         (_Settings(tree.root, output, texts),))
        finally:
            remove_temporaries(output)  # of shards a failure or Ctrl-C stopped: their workers are gone
        entries = [manifest.shards[task.name] for task in tasks]
        skipped = [*tree.skipped, *((file, reason) for entry in entries for file, reason in entry["skipped"])]
        write_skipped(output / SKIPPED_CSV, skipped)
    return _summary(output, entries, todo, manifest.redone, len(skipped), time.perf_counter() - start)


def write_shards(function: Callable[[ShardTask], ShardResult], todo: list[ShardTask], manifest: Manifest,
                 output: Path, label: str, workers: int, stream: TextIO | None,
                 initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
    """Every converter's parallel step: ``function`` writes each shard of ``todo`` on ``workers`` processes set up
    by ``initializer(*initargs, done)`` (``done``: the shared count of sources read, which drives the progress bar
    named ``label``); the parent records each finished shard in the manifest. A dead worker is one line saying the
    finished shards are kept."""
    done = counter()
    total = sum(len(task.sources) for task in todo)
    try:
        with Progress(label, total, done, stream):
            for result in run_parallel(function, todo, workers, initializer, (*initargs, done)):
                manifest.record(result)
    except WorkerDied as death:
        raise UsageError(f"{output}: {death}; the {len(manifest.shards)} shards finished are kept: rerun the same "
                         "command to resume") from None


def _summary(output: Path, entries: list[dict], todo: list[ShardTask], redone: dict[str, str], skipped: int,
             seconds: float) -> ConvertSummary:
    """Totals over every shard (this run's and earlier runs'); files and bytes read by this run."""
    records: dict[str, int] = {}
    for entry in entries:
        records[entry["split"]] = records.get(entry["split"], 0) + entry["records"]
    return ConvertSummary(
        output=output, shards=len(entries), resumed=len(entries) - len(todo), redone=redone, records=records,
        processed=sum(len(task.sources) for task in todo), reencoded=sum(entry["converted"] for entry in entries),
        skipped=skipped, input_bytes=sum(source.size for task in todo for source in task.sources), seconds=seconds)


def read_synset_names(path: Path | None, synsets: tuple[str, ...]) -> dict[str, str]:
    """``image/class/text`` per synset from lines '<synset> <text>' (LOC_synset_mapping.txt, imagenet_metadata.txt);
    the synset itself where the file has no line for it."""
    texts = dict.fromkeys(synsets, "")
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"{path}: cannot read the synset names ({getattr(error, 'strerror', None) or error})"
                             ) from None
        for line in lines:
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] in texts:
                texts[parts[0]] = parts[1].strip()
    return {synset: text or synset for synset, text in texts.items()}


def output_folder(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{path}: cannot create the output folder ({os_reason(error)})") from None
    return path


def remove_temporaries(folder: Path) -> None:
    """Delete the temporary files of shards and of the manifest and skipped.csv (left by stopped or killed runs).

    Called only while holding the folder's lock: no other run is writing them. (A worker orphaned by a killed
    parent dies with it, see ``parallel``; one that did not would lose its rename, and the shard is redone.)
    """
    stale = [*folder.glob(f".*{PARTIAL}*"), *temporary_files(folder / MANIFEST), *temporary_files(folder / SKIPPED_CSV)]
    for path in stale:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _header(tree: ImageTree, tasks: list[ShardTask], texts: dict[str, str], options: ConvertOptions) -> dict:
    return {"format": MANIFEST_FORMAT, "fingerprint": fingerprint(tasks, texts), "num_classes": len(tree.synsets),
            "label_offset": 1, "synsets": list(tree.synsets), "seed": options.seed,
            "shard_counts": {"train": options.train_shards if tree.train else 0,
                             "validation": options.validation_shards if tree.validation else 0}}


def write_skipped(path: Path, skipped: list[tuple[str, str]]) -> None:
    """``file,reason`` rows with LF line ends; the bytes of a non-UTF-8 file name shown as ``\\xNN``."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(("file", "reason"))
    writer.writerows((neutral(printable(file)), neutral(printable(reason))) for file, reason in skipped)
    write_text_atomic(path, text.getvalue())


# --- in the worker processes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    root: Path
    output: Path
    texts: dict[str, str]


_settings: _Settings | None = None
_done = None  # the shared image counter


def _init_worker(settings: _Settings, done: object) -> None:
    global _settings, _done
    _settings, _done = settings, done


def convert_shard(task: ShardTask) -> ShardResult:
    """Write one shard of the plan; its content depends on the plan alone, never on the worker or the timing."""
    assert _settings is not None, "_init_worker sets up each worker"
    builder = _ShardBuilder(_settings)
    written = write_shard(_settings.output / task.name, builder.payloads(task.sources))
    return ShardResult(task.name, task.split, written.records, written.bytes, written.sha256, builder.reencoded,
                       builder.skipped)


class _ShardBuilder:
    """The records of one shard, noting the files skipped and re-encoded on the way."""

    def __init__(self, settings: _Settings) -> None:
        self.settings = settings
        self.skipped: list[tuple[str, str]] = []
        self.reencoded = 0

    def payloads(self, sources: tuple[Source, ...]) -> Iterator[bytes]:
        for source in sources:
            try:
                image = prepare_image(self._read_image(source.path))
            except SkipImage as reason:
                self.skipped.append((source.path, str(reason)))
                continue
            finally:
                with _done.get_lock():  # type: ignore[attr-defined]
                    _done.value += 1  # type: ignore[attr-defined]
            self.reencoded += image.conversion is not None
            yield image_example(image, source.path.rsplit("/", 1)[-1], source.label, source.synset,
                                self.settings.texts[source.synset], self._boxes(source, image))

    def _read_image(self, path: str) -> bytes:
        """The file's bytes; its head alone when that already shows it is not an image (a huge stray file)."""
        try:
            with open(self.settings.root / path, "rb") as file:
                head = file.read(SIGNATURE_BYTES)
                check_signature(head)
                return head + file.read()
        except OSError as error:
            raise SkipImage(f"cannot read ({os_reason(error)})") from None

    def _read(self, path: str) -> bytes:
        try:
            return (self.settings.root / path).read_bytes()
        except OSError as error:
            raise SkipImage(f"cannot read ({os_reason(error)})") from None

    def _boxes(self, source: Source, image: PreparedImage) -> list[Box]:
        if source.annotation is None:
            return []
        try:
            return read_boxes(self._read(source.annotation), image.width, image.height)
        except (SkipImage, ValueError) as problem:
            self.skipped.append((source.annotation, f"bounding boxes ignored, image kept: {problem}"))
            return []

