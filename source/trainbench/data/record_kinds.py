"""The record kinds' facts, registered once: code asks a kind what it is instead of comparing its name.

One ``RecordKindSpec`` per kind of ``record_schemas.RECORD_KINDS``, looked up by name (``record_kind``; an unknown
name is a one-line UsageError listing the known ones, as ``workloads.get`` refuses an unknown workload). A spec says
what a reader, a converter or a message needs to know of the kind: what its records are made of, in words; the
command that writes them; its schema and the manifest settings that schema's lengths need; how a model's classes
follow from the records; for a text kind, how its texts become ids (``Tokenization``, used by ``vocab``); whether
its examples are sentence pairs; whether a folder may hold it without naming it in a manifest.

What differs in code rather than in facts (each framework's pipeline, ``verify``'s record checks, the converters'
record builders) is chosen by a dict keyed by the kind's name inside the module that holds the code.

Framework-free, and light: importing it loads no image or text library (the command line asks it before any work).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from trainbench.data.record_schemas import (
    BERT_SPECIAL_TOKENS,
    EOS_ID,
    GPT2_END_OF_TEXT,
    PAD_ID,
    SCHEMAS,
    TRANSLATION_SPECIAL_TOKENS,
    Feature,
    RecordKind,
)
from trainbench.errors import UsageError

# How a model's classes follow from a kind's records. "labels": each record has one class label, 1..N (one per
# synset), and a classifier has N classes; "category ids": each box has a category id up to the manifest's
# ``num_classes`` setting, and a detector has one more (class 0 is the background).
ClassCount = Literal["labels", "category ids"]


@dataclass(frozen=True)
class Tokenization:
    """How a text kind's texts become token ids: its vocabulary's model, files and special tokens (``vocab``)."""

    byte_level: bool  # byte-level BPE (GPT-2's), read from several files; else WordPiece, one vocab.txt
    lowercase: bool  # WordPiece's normaliser lower-cases and strips accents (BERT-uncased); else case is kept
    files: tuple[str, ...]  # the vocabulary's files, saved beside the shards
    specials: tuple[str, ...]  # its special tokens, the first ids of a trained vocabulary
    fixed_ids: Mapping[str, int]  # the specials whose id the records rely on (padding, end of sentence)
    default_size: int  # tokens of a trained vocabulary when --vocab-size is not given (the published model's)
    unknown: str | None = None  # WordPiece's token for a word it cannot split (byte-level BPE has none)


@dataclass(frozen=True)
class RecordKindSpec:
    """One record kind: what its records are and hold, which command writes them, and what a reader checks."""

    name: RecordKind  # the registry key: the manifest's "kind" and a workload's ``record_kind``
    holds: str  # what the records are made from, plural, as messages say it ("images", "documents", ...)
    command: str  # the ``trainbench`` subcommand that writes them ("data convert")
    classes: ClassCount | None = None  # how a model's classes follow from the records; None: no classes (text)
    tokenization: Tokenization | None = None  # a text kind's; None for images
    # An example is a source and a target sentence of their own lengths, up to the ``max_length`` setting, padded
    # to the run's --seq-len (longer pairs left out); the other text kinds hold sequences of exactly ``seq_len``.
    pairs: bool = False
    # A folder whose manifest names no kind (the first manifest format, or no manifest) holds this kind; one only.
    manifest_optional: bool = False

    @property
    def schema(self) -> Mapping[str, Feature]:
        """The features of one record (``record_schemas.SCHEMAS``)."""
        return SCHEMAS[self.name]

    @cached_property  # asked per record by the decoders
    def settings(self) -> tuple[str, ...]:
        """The manifest settings the schema's fixed lengths need (``seq_len``, ...), sorted: what a reader checks
        before reading a record."""
        return tuple(sorted({feature.length for feature in self.schema.values() if isinstance(feature.length, str)}))

    @cached_property
    def object_features(self) -> tuple[str, ...]:
        """The per-object features (one value per box, so all of one length in a record); () for a kind without
        objects."""
        return tuple(name for name in self.schema if name.startswith("image/object/"))

    @property
    def is_text(self) -> bool:
        """Whether the records hold token ids of a vocabulary (saved beside the shards) rather than images."""
        return self.tokenization is not None

    @property
    def texts_per_example(self) -> int:
        """Texts the tokenizer encodes per example: a sentence pair's two, else one document's one."""
        return 2 if self.pairs else 1


_KINDS: dict[str, RecordKindSpec] = {}


def register(spec: RecordKindSpec) -> RecordKindSpec:
    """Add a kind; a second registration of a name, a kind without a schema, or a second kind that needs no
    manifest is an error (a programming one: the registry is written once, below)."""
    if spec.name in _KINDS:
        raise ValueError(f"record kind {spec.name!r} is registered twice")
    if spec.name not in SCHEMAS:
        raise ValueError(f"record kind {spec.name!r} has no schema in record_schemas.SCHEMAS")
    if spec.manifest_optional and any(other.manifest_optional for other in _KINDS.values()):
        raise ValueError(f"record kind {spec.name!r}: only one kind may be read from a folder naming none")
    _KINDS[spec.name] = spec
    return spec


def record_kind(name: str) -> RecordKindSpec:
    """The registered kind of this name; an unknown one is a one-line UsageError listing the known ones."""
    if name not in _KINDS:
        raise UsageError(f"unknown record kind {name!r}: choose one of {', '.join(_KINDS)}")
    return _KINDS[name]


def record_kinds() -> tuple[RecordKindSpec, ...]:
    """Every registered kind, in registration order (``RECORD_KINDS``'s)."""
    return tuple(_KINDS.values())


def unnamed_kind() -> RecordKindSpec:
    """The kind of a folder whose manifest names none (``manifest_optional``)."""
    return next(spec for spec in _KINDS.values() if spec.manifest_optional)


register(RecordKindSpec(
    "imagenet", holds="images", command="data convert", classes="labels", manifest_optional=True))
register(RecordKindSpec(
    "bert", holds="documents", command="data text --workload bert",
    tokenization=Tokenization(byte_level=False, lowercase=True, files=("vocab.txt",), specials=BERT_SPECIAL_TOKENS,
                              fixed_ids={"[PAD]": PAD_ID}, default_size=30522, unknown="[UNK]")))
register(RecordKindSpec(
    "gpt2", holds="documents", command="data text --workload gpt2",
    tokenization=Tokenization(byte_level=True, lowercase=False, files=("vocab.json", "merges.txt"),
                              specials=(GPT2_END_OF_TEXT,), fixed_ids={}, default_size=50257)))
register(RecordKindSpec(
    "translation", holds="sentence pairs", command="data translate", pairs=True,
    tokenization=Tokenization(byte_level=False, lowercase=False, files=("vocab.txt",),
                              specials=TRANSLATION_SPECIAL_TOKENS, fixed_ids={"<pad>": PAD_ID, "<EOS>": EOS_ID},
                              default_size=33708, unknown="<unk>")))
register(RecordKindSpec(
    "coco", holds="images", command="data coco", classes="category ids"))
