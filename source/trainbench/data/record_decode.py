"""One record of a converted folder as numpy arrays, by its kind's schema (``record_schemas``): framework-free.

Both frameworks' pipelines and the tests read records through this, so a record that does not match its folder's
schema fails the same way everywhere: a DataError naming the shard and record (a missing feature, a value of the
wrong type, a fixed-length feature of another length, COCO object lists of different lengths).

Every feature comes back as a 1-D array: int64 features as int64, float features as float32, bytes features as an
object array of ``bytes``. Fixed-length features (``Feature.length``) have exactly that length.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from trainbench.data.record_kinds import record_kind
from trainbench.data.record_schemas import Feature, RecordKind
from trainbench.data.tfrecord_reader import DataError, parse_example
from trainbench.errors import UsageError

Features = dict[str, np.ndarray]

_PYTHON_TYPES = {"int64": int, "float": float, "bytes": bytes}
_DTYPES = {"int64": np.int64, "float": np.float32, "bytes": object}


def settings_problem(kind: RecordKind, settings: Mapping[str, int]) -> str | None:
    """Which setting the kind's fixed lengths need is missing from a folder's manifest, or None."""
    missing = [name for name in record_kind(kind).settings
               if not (isinstance(settings.get(name), int) and settings[name] > 0)]
    if missing:
        return f"{kind} records need the manifest setting(s) {', '.join(missing)} (a positive whole number)"
    return None


def check_settings(kind: RecordKind, settings: Mapping[str, int]) -> None:
    if problem := settings_problem(kind, settings):
        raise UsageError(problem)


def _array(name: str, key: str, feature: Feature, values: list, settings: Mapping[str, int]) -> np.ndarray:
    expected = _PYTHON_TYPES[feature.type]
    # bool is an int: never in a parsed Example, but a float list may hold ints only if it is not one
    if not all(type(value) is expected for value in values):
        raise DataError(f"{name}: feature {key!r} holds values that are not {feature.type}")
    size = feature.size(settings)
    if size is not None and len(values) != size:
        raise DataError(f"{name}: feature {key!r} has {len(values)} values, the folder's records {size}")
    if feature.type == "bytes":
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    return np.asarray(values, dtype=_DTYPES[feature.type])


def decode_record(payload: bytes, kind: RecordKind, settings: Mapping[str, int], name: str) -> Features:
    """Every feature of ``kind``'s schema in one serialised ``tf.train.Example``; ``name`` ("<shard> record <n>")
    is what a DataError names. Features outside the schema are ignored, as tf-models-official's decoders do."""
    try:
        parsed = parse_example(payload)
    except ValueError as error:
        raise DataError(f"{name}: {error}") from None
    spec = record_kind(kind)
    features: Features = {}
    for key, feature in spec.schema.items():
        if key not in parsed:
            raise DataError(f"{name}: not a {kind} record (it has no feature {key!r})")
        features[key] = _array(name, key, feature, parsed[key], settings)
    if spec.object_features:  # one value per box: all of one length
        lengths = {key: len(features[key]) for key in spec.object_features}
        if len(set(lengths.values())) > 1:
            raise DataError(f"{name}: the object features have different lengths ({lengths})")
    return features
