"""``trainbench data verify``: read every record of a TFRecord folder and check it against what it declares.

Per shard (in parallel): every record's checksums, the Example's schema, the label (1..N), a JPEG that decodes
(``decode=False``: its header and end marker only) to the declared height and width in RGB; the file's sha256 and
record count against the manifest. Across shards: each split's shards all present, and one label per synset, in
sorted synset order. Each bad shard gives one problem naming the file (the first one found in it).

A folder whose manifest names a record kind other than labelled images (``"kind"``: bert, gpt2, translation, coco;
``record_kinds.RecordKindSpec.classes``) is checked against ``record_schemas.SCHEMAS`` with the manifest's
``"settings"`` instead: every feature there with its type and fixed length, then the kind's own check from
``RECORD_CHECKS`` (token ids below ``vocab_size``, masked positions inside the sequence, EOS last, ...); a kind
without an entry there gets the schema check alone.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

from PIL import Image

from trainbench.data.coco_records import check_coco_record
from trainbench.data.imagefiles import jpeg_is_complete
from trainbench.data.parallel import WorkerDied, counter, default_workers, run_parallel
from trainbench.data.progress import Progress
from trainbench.data.record_kinds import record_kind
from trainbench.data.record_schemas import EOS_ID, RecordKind
from trainbench.data.shards import SHARD_NAME, load_manifest, shard_files, shard_name
from trainbench.data.source import TFRECORDS, DataSource, record_format
from trainbench.data.tfrecord_reader import DataError, Feature, parse_example, read_records
from trainbench.errors import UsageError

REQUIRED = ("image/encoded", "image/height", "image/width", "image/class/label", "image/class/synset",
            "image/format")


@dataclass(frozen=True)
class ShardCheck:
    path: Path
    records: int
    sha256: str
    synset_labels: dict[str, int]
    problem: str | None


@dataclass
class VerifyReport:
    folder: Path
    shards: int = 0
    records: dict[str, int] = field(default_factory=dict)  # per split
    num_classes: int = 0
    problems: list[str] = field(default_factory=list)
    kind: RecordKind = "imagenet"
    checked: str = ""  # what every record was found to satisfy, for a kind other than imagenet (RECORD_CHECKS)


def verify(folder: Path, workers: int | None = None, decode: bool = True, stream: TextIO | None = None
           ) -> VerifyReport:
    """Check every shard of ``folder``; problems are listed in the report, a folder without shards is a UsageError."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder")
    files = shard_files(folder)
    if not files:
        raise UsageError(f"{folder}: no TFRecord shards (train-NNNNN-of-NNNNN, validation-NNNNN-of-NNNNN)")
    manifest = load_manifest(folder) or {}
    form = record_format(DataSource(folder, TFRECORDS, tuple(files), tuple(files)))
    listed = shards if isinstance(shards := manifest.get("shards"), dict) else {}
    synsets = manifest.get("synsets")
    synsets = synsets if isinstance(synsets, list) and all(isinstance(name, str) for name in synsets) else None
    report = VerifyReport(folder, shards=len(files), problems=_missing_shards(folder, files, listed), kind=form.kind)
    if not _labelled(form.kind):
        report.checked = RECORD_CHECKS[form.kind].checked if form.kind in RECORD_CHECKS else \
            f"every record has the {form.kind} schema's features"
    counts = [entry.get("records") for entry in listed.values() if isinstance(entry, dict)]
    whole = [n for n in counts if isinstance(n, int)]
    total = sum(whole) if len(whole) == len(counts) == len(files) else None
    done = counter()
    tasks = [(path, len(synsets) if synsets else None, decode, form.kind, form.settings) for path in files]
    try:
        with Progress("verify", total, done, stream):
            checks = sorted(run_parallel(_check_shard, tasks, workers or default_workers(), _init_worker, (done,)),
                            key=lambda check: check.path.name)
    except WorkerDied as death:
        raise UsageError(f"{folder}: {death} while verifying; run again (with fewer --workers if memory is short)"
                         ) from None
    for check in checks:
        split = SHARD_NAME.fullmatch(check.path.name).group(1)  # type: ignore[union-attr]
        report.records[split] = report.records.get(split, 0) + check.records
        problem = check.problem or _against_manifest(check, listed.get(check.path.name))
        if problem:
            report.problems.append(problem)
    report.problems += _label_problems(folder, checks, synsets)
    if not any(report.records.values()):  # shards of nothing: no run can fill a batch from them
        report.problems.append(f"{folder}: its {len(files)} shards hold no record")
    report.num_classes = len(synsets) if synsets else len({s for c in checks for s in c.synset_labels})
    return report


def _missing_shards(folder: Path, files: Sequence[Path], listed: dict[str, Any]) -> list[str]:
    """Each split needs shards 0..N-1 of one N; a shard the manifest lists must be there."""
    present = {path.name for path in files}
    counts: dict[str, set[int]] = {}
    for name in present:
        split, _, count = SHARD_NAME.fullmatch(name).groups()  # type: ignore[union-attr]
        counts.setdefault(split, set()).add(int(count))
    expected = {shard_name(split, index, count) for split, sizes in counts.items() for count in sizes
                for index in range(count)} | set(listed)
    return [f"{folder / name}: missing (the {'manifest lists it' if name in listed else 'other shards name it'})"
            for name in sorted(expected - present)]


def _against_manifest(check: ShardCheck, entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    if entry.get("records") != check.records:
        return f"{check.path}: {check.records} records, the manifest lists {entry.get('records')}"
    if entry.get("sha256") != check.sha256:
        return f"{check.path}: content differs from the manifest's sha256 (replaced or altered after conversion)"
    return None


def _label_problems(folder: Path, checks: Sequence[ShardCheck], synsets: list[str] | None) -> list[str]:
    """One label per synset, 1..N in sorted synset order (the manifest's list, else the synsets seen)."""
    seen: dict[str, set[int]] = {}
    for check in checks:
        for synset, label in check.synset_labels.items():
            seen.setdefault(synset, set()).add(label)
    order = synsets or sorted(seen)
    expected = {synset: label for label, synset in enumerate(order, start=1)}
    return [f"{folder}: synset {synset} has label(s) {sorted(labels)}, expected {expected.get(synset, 'none')}"
            for synset, labels in sorted(seen.items()) if labels != {expected.get(synset)}]


# --- in the worker processes -------------------------------------------------------------------------------

_done = None


def _init_worker(done: object) -> None:
    global _done
    _done = done


def _check_shard(task: tuple[Path, int | None, bool, RecordKind, dict[str, int]]) -> ShardCheck:
    path, num_classes, decode, kind, settings = task
    if not path.is_file():  # a folder, a pipe (reading it would wait forever), a dangling link or a loop
        return ShardCheck(path, 0, "", {}, f"{path}: not a regular file")
    synset_labels: dict[str, int] = {}
    records = 0
    problem = None
    labelled = _labelled(kind)
    try:
        for records, payload in enumerate(read_records(path), start=1):
            problem = _check_record(payload, num_classes, decode, synset_labels) if labelled else \
                _check_other(payload, kind, settings, decode)
            with _done.get_lock():  # type: ignore[attr-defined]
                _done.value += 1  # type: ignore[attr-defined]
            if problem:
                problem = f"{path}: record {records - 1}: {problem}"
                break
    except DataError as error:
        problem = str(error)
    return ShardCheck(path, records, _sha256(path), synset_labels, problem)


def _labelled(kind: RecordKind) -> bool:
    """Whether the kind's records are labelled images, checked as ImageNet's are (a JPEG, one label per synset)."""
    return record_kind(kind).classes == "labels"


def _sha256(path: Path) -> str:
    """The file's sha256; empty when it cannot be read (reading its records has reported why)."""
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return ""


def _check_record(payload: bytes, num_classes: int | None, decode: bool, synset_labels: dict[str, int]) -> str | None:
    try:
        features = parse_example(payload)
    except ValueError as error:
        return str(error)
    missing = [key for key in REQUIRED if len(features.get(key, [])) != 1]
    if missing:
        return f"no single {missing[0]}"
    name = _text(features, "image/filename") or "unnamed"
    label, synset = features["image/class/label"][0], _text(features, "image/class/synset")
    if not isinstance(label, int) or label < 1 or (num_classes is not None and label > num_classes):
        return f"({name}) label {label!r} outside 1..{num_classes or 'N'}"
    if synset_labels.setdefault(synset, label) != label:
        return f"({name}) synset {synset} with label {label}, earlier {synset_labels[synset]}"
    problem = _check_image(features, decode)
    return f"({name}) {problem}" if problem else None


def _text(features: dict[str, Feature], key: str) -> str:
    values = features.get(key) or [b""]
    # surrogate escapes, as the converter read a non-UTF-8 synset folder name: the same str as in the manifest
    return values[0].decode("utf-8", "surrogateescape") if isinstance(values[0], bytes) else str(values[0])


def _check_image(features: dict[str, Feature], decode: bool) -> str | None:
    encoded = features["image/encoded"][0]
    declared = (features["image/width"][0], features["image/height"][0])
    try:
        image = Image.open(io.BytesIO(encoded))  # type: ignore[arg-type]
        if image.format != "JPEG" or image.mode != "RGB":
            return f"image is {image.format} {image.mode}, not an RGB JPEG"
        if decode:
            image.load()
        elif not jpeg_is_complete(encoded):  # type: ignore[arg-type]
            return "truncated JPEG"
    except Exception as error:  # noqa: BLE001 -- Pillow raises many kinds on corrupt data: a finding, not a crash
        return f"image does not decode ({error})"
    if image.size != declared:
        return f"declared {declared[0]!r}x{declared[1]!r}, the JPEG is {image.width}x{image.height}"
    return None


# --- the other record kinds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordCheck:
    """A record kind's own check (after the schema's): the problem with one record's features, or None."""

    check: Callable[[dict[str, Feature], dict[str, int], bool], str | None]  # features, settings, decode
    checked: str  # the summary's words for what every record satisfied


def _check_other(payload: bytes, kind: RecordKind, settings: dict[str, int], decode: bool) -> str | None:
    try:
        features = parse_example(payload)
    except ValueError as error:
        return str(error)
    problem = _check_schema(features, kind, settings)
    if problem is None and kind in RECORD_CHECKS:
        problem = RECORD_CHECKS[kind].check(features, settings, decode)
    return problem


_PYTHON_TYPES = {"int64": int, "float": float, "bytes": bytes}


def _check_schema(features: dict[str, Feature], kind: RecordKind, settings: dict[str, int]) -> str | None:
    """Every feature of the kind's schema, of its type, with its fixed length (from the manifest's settings)."""
    for name, feature in record_kind(kind).schema.items():
        if name not in features:
            return f"no {name}"
        values = features[name]
        if values and not isinstance(values[0], _PYTHON_TYPES[feature.type]):
            return f"{name} is not a {feature.type} list"
        try:
            size = feature.size(settings)
        except KeyError:
            return f"the manifest's settings have no {feature.length} (the length of {name})"
        if size is not None and len(values) != size:
            return f"{name} has {len(values)} values, expected {size}"
    return None


def _ids_problem(name: str, ids: Sequence[int], settings: dict[str, int]) -> str | None:
    vocab_size = settings.get("vocab_size")
    bad = [token for token in ids if token < 0 or (vocab_size is not None and token >= vocab_size)]
    return f"{name} holds id {bad[0]}, outside 0..{vocab_size - 1 if vocab_size else 'N'}" if bad else None


def _ints(features: dict[str, Feature], name: str) -> list[int]:
    return cast(list[int], features[name])  # the schema check found int64 values


def _check_bert(features: dict[str, Feature], settings: dict[str, int], decode: bool) -> str | None:
    ids, mask, segments = (_ints(features, name) for name in ("input_ids", "input_mask", "segment_ids"))
    length = sum(1 for value in mask if value == 1)
    if list(mask) != [1] * length + [0] * (len(mask) - length) or length < 3:
        return "input_mask is not ones (at least 3) then zeros"
    if any(ids[length:]) or any(segments[length:]):
        return "input_ids or segment_ids not 0 past the input_mask"
    if any(value not in (0, 1) for value in segments):
        return "segment_ids other than 0 and 1"
    weights = features["masked_lm_weights"]
    count = sum(1 for weight in weights if weight == 1.0)
    if list(weights) != [1.0] * count + [0.0] * (len(weights) - count) or count == 0:
        return "masked_lm_weights are not ones (at least one) then zeros"
    positions = _ints(features, "masked_lm_positions")[:count]
    if any(not 0 < position < length - 1 for position in positions) or list(positions) != sorted(set(positions)):
        return f"masked_lm_positions {list(positions)} not increasing inside the sequence (1..{length - 2})"
    label = _ints(features, "next_sentence_labels")[0]
    if label not in (0, 1):
        return f"next_sentence_labels {label} is not 0 or 1"
    return _ids_problem("input_ids", ids, settings) or _ids_problem("masked_lm_ids", _ints(features, "masked_lm_ids"),
                                                                    settings)


def _check_gpt2(features: dict[str, Feature], settings: dict[str, int], decode: bool) -> str | None:
    return _ids_problem("input_ids", _ints(features, "input_ids"), settings)


def _check_translation(features: dict[str, Feature], settings: dict[str, int], decode: bool) -> str | None:
    longest = settings.get("max_length")
    for name in ("inputs", "targets"):
        ids = _ints(features, name)
        if not ids or ids[-1] != EOS_ID:
            return f"{name} does not end with the end-of-sentence id {EOS_ID}"
        if longest is not None and len(ids) > longest:
            return f"{name} has {len(ids)} ids, more than max_length {longest}"
        problem = _ids_problem(name, ids, settings)
        if problem:
            return problem
    return None


# A record kind's own check, after the schema's (``decode``: images are decoded, else their headers read).
RECORD_CHECKS: dict[RecordKind, RecordCheck] = {
    "bert": RecordCheck(_check_bert, "every record has the bert schema's features, token ids below vocab_size, "
                                     "masked positions inside the sequence"),
    "gpt2": RecordCheck(_check_gpt2, "every record has the gpt2 schema's features, token ids below vocab_size"),
    "translation": RecordCheck(_check_translation, "every record has inputs and targets ending in the "
                                                   "end-of-sentence id, token ids below vocab_size"),
    "coco": RecordCheck(check_coco_record, "every record has the coco schema's features, boxes inside [0, 1], "
                                           "labels 1..num_classes, an image of its declared format and size"),
}
