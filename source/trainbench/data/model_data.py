"""The model as its ``--data`` folder has it: one rule for the command line and campaigns, before any worker starts.

A folder whose records are not the workload's kind, or whose settings the model cannot read (a larger vocabulary,
other sequence lengths, more classes), is refused in one line; a setting not given is the data's (classes, tokens
per sequence).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from trainbench.config import ModelConfig
from trainbench.data.record_decode import settings_problem
from trainbench.data.record_kinds import RecordKindSpec, record_kind
from trainbench.data.shards import MANIFEST
from trainbench.data.source import DataSource, num_classes, open_source, record_format, tfrecords_only
from trainbench.errors import UsageError
from trainbench.frameworks import capabilities_of


def with_data(model: ModelConfig, data: str | None) -> ModelConfig:
    """The model as the data folder has it (see the module); refuses a folder its framework cannot read
    (TensorFlow's pipeline reads TFRecord shards only). A workload that
    reads no data is left to config.workload_problems to refuse."""
    if data is None or model.framework not in model.spec.data:
        return model
    source = open_source(data)
    if not capabilities_of(model.framework).reads_image_folders:
        tfrecords_only(source)
    return _fitted(model, data, source)


def records_problem(model: ModelConfig, data: str) -> str | None:
    """Why the folder's records cannot feed this model (another workload's kind, settings it cannot read), or None:
    a campaign drops such a combination as the command line refuses it. (TensorFlow given an image-folder tree is
    the data axis's error, refused with the whole matrix.)"""
    if model.framework not in model.spec.data:
        return None
    try:
        _fitted(model, data, open_source(data))
    except UsageError as error:
        return str(error)
    return None


def _fitted(model: ModelConfig, data: str, source: DataSource) -> ModelConfig:
    found = record_format(source)
    expected = record_kind(model.spec.record_kind)
    if found.kind != expected.name:
        raise UsageError(f"--data {data} holds {_held(source, found.spec)}; --workload {model.workload} reads "
                         f"{expected.name} records (make them with 'trainbench {expected.command}')")
    if problem := settings_problem(found.kind, found.settings):
        raise UsageError(f"--data {data}: {problem}")
    if found.spec.classes == "labels":
        given = model.num_classes
        if given is None and (classes := _classes(source.folder)) < 2:
            raise UsageError(f"--data {data}: its records name {classes} ImageNet class"
                             f"{'' if classes == 1 else 'es'}, and a classifier needs 2 or more (other records "
                             f"without their {MANIFEST}, which names their kind?)")
        return dataclasses.replace(model, num_classes=given if given is not None else _classes(source.folder))
    if found.spec.classes == "category ids":
        return _coco_classes(model, data, found.settings["num_classes"])
    _check_vocabulary(model, data, found.settings["vocab_size"])
    return _sequence_length(model, data, found.spec, found.settings)


def _check_vocabulary(model: ModelConfig, data: str, vocab_size: int) -> None:
    vocab = model.spec.dims(model.size)["vocab"]
    if vocab_size > vocab:
        other = " or use --size full" if vocab_size <= model.spec.dims("full")["vocab"] else ""
        raise UsageError(f"--data {data}: its vocabulary has {vocab_size} tokens, more than the {vocab} of "
                         f"--workload {model.workload} --size {model.size}: convert with --vocab-size {vocab}{other}")


def _sequence_length(model: ModelConfig, data: str, kind: RecordKindSpec, settings: dict[str, int]) -> ModelConfig:
    """bert and gpt2 records hold sequences of one length (``seq_len``): --seq-len must be it, and is it when not
    given. Translation records are sentences of up to ``max_length`` tokens, padded to --seq-len (default: that
    maximum); a shorter --seq-len leaves the longer pairs out, as the reference's length filter does."""
    if kind.pairs:
        return model if model.seq_len is not None else _with_length(model, data, settings["max_length"])
    length = settings["seq_len"]
    if model.seq_len is not None and model.seq_len != length:
        raise UsageError(f"--seq-len {model.seq_len} disagrees with --data {data}, whose sequences have {length} "
                         f"tokens: drop --seq-len, or convert with --seq-len {model.seq_len}")
    return _with_length(model, data, length)


def _with_length(model: ModelConfig, data: str, length: int) -> ModelConfig:
    """The model at the records' length, refused in one line naming the folder when this size cannot take it (tiny
    BERT and GPT-2 have 64 positions)."""
    try:
        return dataclasses.replace(model, seq_len=length)
    except UsageError as error:
        raise UsageError(f"--data {data} holds sequences of {length} tokens: {error}") from None


def _coco_classes(model: ModelConfig, data: str, largest_id: int) -> ModelConfig:
    """The detector's classes include the background (0), so labels 1..N need N + 1 of them (COCO: ids up to 90,
    91 classes); when --num-classes is not given, it is that many."""
    needed = largest_id + 1
    if model.num_classes is None:
        return dataclasses.replace(model, num_classes=needed)
    if model.num_classes < needed:
        raise UsageError(f"--num-classes {model.num_classes} is too few for --data {data}: its class ids go up to "
                         f"{largest_id} and class 0 is the background: use --num-classes {needed} or more, or "
                         "leave it out")
    return model


def _held(source: DataSource, kind: RecordKindSpec) -> str:
    """What the folder holds, in words: a folder read as ImageNet's only for want of a manifest says so."""
    if source.is_tfrecords and kind.manifest_optional and not (source.folder / MANIFEST).is_file():
        return f"TFRecords without a {MANIFEST} (read as ImageNet records, the one kind that may lack it)"
    return "an image folder tree" if not source.is_tfrecords else f"{kind.name} records"


@functools.cache
def _classes(folder: Path) -> int:
    """A folder's classes, once per process: a TFRecord folder without a manifest is scanned (a campaign asks for
    every experiment)."""
    return num_classes(open_source(folder))
