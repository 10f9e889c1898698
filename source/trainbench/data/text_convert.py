"""``trainbench data text`` and ``data translate``: a text corpus into BERT, GPT-2 or Transformer TFRecord shards.

The gpt2 records are the causal-LM records of every workload whose ``record_kind`` is gpt2 (gpt2 and llama): one
writer and one schema, whatever the workload; only the command line's defaults (--seq-len) follow the workload.

Steps, as ``data convert``'s: read the corpus (``text_corpus``: skipped files listed), train the vocabulary (or read
``--vocab``; ``vocab``), fix each shard's content (``shards.plan_split`` over the documents, or the sentence pairs),
keep the shards a previous run of the same conversion finished and that are intact (``shards.Manifest``: the
fingerprint covers the input files' contents, the options and the vocabulary), write the others in parallel, one
shard per task, each with its own random generator seeded from the seed and the shard's name (``text_records``),
and list the skipped files in ``skipped.csv``. The output is the same bytes whatever the worker count, and a
stopped conversion rerun finishes with the bytes an uninterrupted one writes.

A converted folder holds ``train-NNNNN-of-NNNNN`` shards, the vocabulary files (bert and translation
``vocab.txt``; gpt2 ``vocab.json`` + ``merges.txt``), ``manifest.json`` (with ``"kind"`` and ``"settings"``, see
``record_schemas``) and ``skipped.csv``.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

from trainbench.data.convert import SKIPPED_CSV, output_folder, remove_temporaries, write_shards, write_skipped
from trainbench.data.outputs import exclusive_folder, outside_inputs
from trainbench.data.parallel import default_workers
from trainbench.data.record_kinds import RecordKindSpec, record_kind
from trainbench.data.record_schemas import GPT2_END_OF_TEXT
from trainbench.data.shards import (
    KIND_MANIFEST_FORMAT,
    MANIFEST,
    TRAIN,
    Manifest,
    ShardResult,
    ShardTask,
    plan_split,
)
from trainbench.data.text_corpus import Document, SentencePair, read_corpus, read_parallel, sentences
from trainbench.data.text_records import (
    BertIds,
    bert_example,
    bert_instances,
    gpt2_blocks,
    gpt2_example,
    translation_example,
)
from trainbench.data.tfrecord_writer import write_shard
from trainbench.data.vocab import TextKind, Vocabulary, from_files, load, tokenization, train, word_ids
from trainbench.errors import UsageError
from trainbench.results.files import temporary_files

DEFAULT_SEED = 12345
DEFAULT_SHARDS = 16  # fewer when the corpus has fewer documents (or sentence pairs)
DEFAULT_MAX_LENGTH = 256  # the legacy Transformer's max_length
_ALGORITHM = 1  # raised when the records of the same input and options change: older manifests are not resumed


@dataclass(frozen=True)
class TextOptions:
    kind: TextKind
    inputs: tuple[Path, ...]  # text files or folders; for translation the source and the target file
    output: Path
    vocab: Path | None = None
    vocab_size: int | None = None  # default: the kind's Tokenization.default_size
    seq_len: int | None = None  # bert, gpt2; default: the full default of the kind's first reader (_seq_len)
    max_predictions: int | None = None  # bert; default: workloads.bert.masked_count(seq_len)
    max_length: int = DEFAULT_MAX_LENGTH  # translation
    shards: int | None = None
    one_per_file: bool = False
    seed: int = DEFAULT_SEED
    workers: int = field(default_factory=default_workers)
    overwrite: bool = False

    @property
    def spec(self) -> RecordKindSpec:
        return record_kind(self.kind)


@dataclass(frozen=True)
class TextSummary:
    output: Path
    kind: TextKind
    shards: int
    resumed: int
    redone: dict[str, str]
    records: int  # in all the shards
    documents: int  # documents (sentence pairs) read by this run
    tokens: int  # token ids the tokenizer gave for them
    filtered: int  # translation: pairs dropped (too long, or a side empty), in all the shards
    skipped: int  # input files listed in skipped.csv
    vocab_size: int
    seconds: float


@dataclass(frozen=True)
class TextShardResult(ShardResult):
    documents: int = 0
    tokens: int = 0
    filtered: int = 0


def settings_of(options: TextOptions, vocabulary: Vocabulary) -> dict[str, int]:
    """The manifest's "settings": what a reader of the records needs (``record_schemas``)."""
    return _SETTINGS[options.kind](options, vocabulary.size)


def _bert_settings(options: TextOptions, vocab_size: int) -> dict[str, int]:
    from trainbench.workloads.bert import masked_count

    seq_len = _seq_len(options)
    return {"seq_len": seq_len, "max_predictions_per_seq": options.max_predictions or masked_count(seq_len),
            "vocab_size": vocab_size}


def _gpt2_settings(options: TextOptions, vocab_size: int) -> dict[str, int]:
    seq_len = _seq_len(options)
    return {"seq_len": seq_len, "block_len": seq_len + 1, "vocab_size": vocab_size}


def _translation_settings(options: TextOptions, vocab_size: int) -> dict[str, int]:
    return {"max_length": options.max_length, "vocab_size": vocab_size}


def _seq_len(options: TextOptions) -> int:
    """--seq-len (the command line passes its --workload's default when not given), else the full default of the
    kind's first reader (bert 128; gpt2's records gpt2's 1024, not llama's 8192)."""
    from trainbench import workloads

    return options.seq_len or workloads.reader_of(options.kind).default("seq_len")


# Each kind's manifest settings, from the options and the vocabulary's size (in the order manifests list them).
_SETTINGS: dict[TextKind, Callable[[TextOptions, int], dict[str, int]]] = {
    "bert": _bert_settings, "gpt2": _gpt2_settings, "translation": _translation_settings}


def convert_text(options: TextOptions, stream: TextIO | None = None) -> TextSummary:
    """Convert (or finish converting) the corpus; UsageError for bad input, before any shard is written."""
    start = time.perf_counter()
    outside_inputs(options.output, options.inputs)
    items, skipped, digest, texts = _read(options)
    vocabulary = load(options.kind, options.vocab) if options.vocab else \
        train(options.kind, texts, options.vocab_size or tokenization(options.kind).default_size)
    settings = settings_of(options, vocabulary)
    count = options.shards or min(DEFAULT_SHARDS, len(items))
    if count > len(items):
        raise UsageError(f"--shards {count} is more than the {len(items):,} {options.spec.holds} of the corpus")
    tasks = plan_split(TRAIN, items, count, options.seed)
    output = output_folder(options.output)
    with exclusive_folder(output, "conversion"):
        _remove_temporaries(output, vocabulary)
        header = _header(options, settings, vocabulary, digest, count)
        manifest = Manifest.open(output, header, (task.name for task in tasks), options.overwrite)
        vocabulary.save(output)
        todo = [task for task in tasks if task.name not in manifest.shards]
        try:
            write_shards(convert_text_shard, todo, manifest, output, "convert", options.workers, stream, _init_worker,
                         (_Settings(options.kind, output, vocabulary.files, settings, options.seed),))
        finally:
            _remove_temporaries(output, vocabulary)
        write_skipped(output / SKIPPED_CSV, skipped)
        entries = [manifest.shards[task.name] for task in tasks]
        if not any(entry["records"] for entry in entries):  # under the lock: no other conversion writes here now
            _refuse_empty(options, output, [task.name for task in tasks], len(items),
                          sum(entry["filtered"] for entry in entries))
    done = [manifest.shards[task.name] for task in todo]
    return TextSummary(
        output=output, kind=options.kind, shards=len(tasks), resumed=len(tasks) - len(todo), redone=manifest.redone,
        records=sum(entry["records"] for entry in entries), documents=sum(entry["documents"] for entry in done),
        tokens=sum(entry["tokens"] for entry in done), filtered=sum(entry["filtered"] for entry in entries),
        skipped=len(skipped), vocab_size=vocabulary.size, seconds=time.perf_counter() - start)


def _refuse_empty(options: TextOptions, output: Path, shards: list[str], items: int, dropped: int) -> None:
    """A conversion that kept nothing: its empty shards and manifest removed (no run could fill a batch from them,
    and `data verify` would have nothing to check), the vocabulary kept for --vocab, and one line saying why. Called
    while the output folder's lock is held."""
    for name in [*shards, MANIFEST]:
        (output / name).unlink(missing_ok=True)
    why = (f"all {dropped:,} were longer than --max-length {options.max_length} tokens or had an "
           "empty side: raise --max-length" if options.spec.pairs else "none was long enough to make a record")
    raise UsageError(f"{options.inputs[0]}: none of its {items:,} {options.spec.holds} made a record ({why}); no "
                     f"shards kept in {output}")


def _read(options: TextOptions) -> tuple[list[Any], list[tuple[str, str]], str, Iterator[str]]:
    """The items the shards are cut from, the skipped files, the input's digest and the vocabulary's training texts."""
    if options.spec.pairs:
        source, target = options.inputs
        corpus = read_parallel(source, target)
        texts = (text for pair in corpus.pairs for text in (pair.source, pair.target) if text)
        return list(corpus.pairs), [], corpus.digest, texts
    documents = read_corpus(options.inputs, options.one_per_file)
    return documents.documents, documents.skipped, documents.digest, (doc.text for doc in documents.documents)


def _remove_temporaries(output: Path, vocabulary: Vocabulary) -> None:
    remove_temporaries(output)
    for name in vocabulary.files:
        for path in temporary_files(output / name):
            path.unlink(missing_ok=True)


def _header(options: TextOptions, settings: dict[str, int], vocabulary: Vocabulary, digest: str, count: int
            ) -> dict[str, Any]:
    decided = {"algorithm": _ALGORITHM, "kind": options.kind, "settings": settings, "seed": options.seed,
               "shards": count, "one_per_file": options.one_per_file, "input": digest,
               "vocabulary": {name: hashlib.sha256(content).hexdigest() for name, content in vocabulary.files.items()}}
    return {"format": KIND_MANIFEST_FORMAT, "kind": options.kind, "settings": settings,
            "fingerprint": hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest(),
            "seed": options.seed, "shard_counts": {"train": count, "validation": 0},
            "vocabulary": sorted(vocabulary.files), "special_tokens": vocabulary.specials}


# --- in the worker processes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    kind: TextKind
    output: Path
    vocabulary: dict[str, bytes]
    settings: dict[str, int]
    seed: int


_settings: _Settings | None = None
_vocabulary: Vocabulary | None = None
_tokenizer: Any = None
_done: Any = None


def _init_worker(settings: _Settings, done: object) -> None:
    global _settings, _vocabulary, _tokenizer, _done
    _settings, _done = settings, done
    _vocabulary = from_files(settings.kind, settings.vocabulary)
    _tokenizer = _vocabulary.tokenizer()


def convert_text_shard(task: ShardTask) -> TextShardResult:
    """Write one shard of the plan; its content depends on the plan, the seed and the vocabulary alone."""
    assert _settings is not None and _vocabulary is not None, "_init_worker sets up each worker"
    rng = random.Random(f"{_settings.seed}/{task.name}")
    builder = _ShardBuilder(_settings, _vocabulary, rng)
    written = write_shard(_settings.output / task.name, builder.payloads(task.sources))
    return TextShardResult(task.name, task.split, written.records, written.bytes, written.sha256, 0, [],
                           documents=len(task.sources), tokens=builder.tokens, filtered=builder.filtered)


class _ShardBuilder:
    def __init__(self, settings: _Settings, vocabulary: Vocabulary, rng: random.Random) -> None:
        self.settings = settings.settings
        self.kind = settings.kind
        self.vocabulary = vocabulary
        self.rng = rng
        self.tokens = 0
        self.filtered = 0

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        ids = [encoding.ids for encoding in _tokenizer.encode_batch(list(texts), add_special_tokens=False)]
        self.tokens += sum(map(len, ids))
        with _done.get_lock():
            _done.value += len(texts) // record_kind(self.kind).texts_per_example
        return ids

    def payloads(self, sources: tuple[Any, ...]) -> Iterator[bytes]:
        return self._PAYLOADS[self.kind](self, sources)

    def _bert(self, documents: tuple[Document, ...]) -> Iterator[bytes]:
        tokenised = []
        for document in documents:
            parts = [ids for ids in self._encode(sentences(document.text)) if ids]
            if parts:
                tokenised.append(parts)
        specials = self.vocabulary.specials
        ids = BertIds(specials["[CLS]"], specials["[SEP]"], specials["[MASK]"], word_ids(self.vocabulary))
        seq_len, most = self.settings["seq_len"], self.settings["max_predictions_per_seq"]
        for instance in bert_instances(tokenised, seq_len, most, ids, self.rng) if tokenised else ():
            yield bert_example(instance, seq_len, most)

    def _gpt2(self, documents: tuple[Document, ...]) -> Iterator[bytes]:
        ids = self._encode([document.text for document in documents])
        end = self.vocabulary.specials[GPT2_END_OF_TEXT]
        yield from map(gpt2_example, gpt2_blocks(ids, end, self.settings["block_len"]))

    def _translation(self, pairs: tuple[SentencePair, ...]) -> Iterator[bytes]:
        usable = [pair for pair in pairs if pair.source and pair.target]
        self.filtered += len(pairs) - len(usable)
        ids = self._encode([text for pair in usable for text in (pair.source, pair.target)])
        for source, target in zip(ids[::2], ids[1::2], strict=True):
            example = translation_example(source, target, self.settings["max_length"])
            if example is None:
                self.filtered += 1
            else:
                yield example

    # Each kind's records from a shard's documents (or sentence pairs).
    _PAYLOADS: ClassVar[dict[TextKind, Callable[[_ShardBuilder, tuple[Any, ...]], Iterator[bytes]]]] = {
        "bert": _bert, "gpt2": _gpt2, "translation": _translation}
