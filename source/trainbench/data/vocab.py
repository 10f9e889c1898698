"""The subword vocabularies of the text converters: trained with Hugging Face ``tokenizers`` or read from files.

- ``bert``: WordPiece, lower-cased with accents stripped (BERT-uncased's BertNormalizer and BertPreTokenizer);
  the special tokens ``record_schemas.BERT_SPECIAL_TOKENS`` come first, so ``[PAD]`` is id 0. Saved as
  ``vocab.txt`` (one token per line, the line number its id); ``--vocab FILE`` reads such a file (Google's
  ``uncased_L-12_H-768_A-12/vocab.txt`` included: its specials are found by name, ``[PAD]`` must be id 0).
- ``gpt2``: byte-level BPE as GPT-2's (no prefix space, GPT-2's pre-tokenizing regular expression), with
  ``GPT2_END_OF_TEXT`` as its one special token. Saved as ``vocab.json`` + ``merges.txt``; ``--vocab DIR`` reads
  a folder holding those two files (OpenAI's GPT-2 files, or Hugging Face's ``gpt2`` ones).
- ``translation``: one WordPiece vocabulary shared by both sides, case kept, ``TRANSLATION_SPECIAL_TOKENS`` first
  (``<pad>`` 0 = PAD_ID, ``<EOS>`` 1 = EOS_ID). Saved as ``vocab.txt``; ``--vocab FILE`` reads one.

Each kind's model, files and special tokens are its ``record_kinds.Tokenization``: the code below asks it, never
the kind's name.

Training is deterministic: the same texts in the same order give the same vocabulary (``tokenizers``' parallelism
is turned off, which also keeps it quiet in forked worker processes). Texts are encoded with a tokenizer rebuilt
from the vocabulary alone, without "added tokens": a literal ``[SEP]`` or ``<|endoftext|>`` in the corpus is
text, split like any other, never the special id.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trainbench.data.record_kinds import Tokenization, record_kind
from trainbench.errors import UsageError, os_reason

TextKind = Literal["bert", "gpt2", "translation"]


def tokenization(kind: TextKind) -> Tokenization:
    """The text kind's vocabulary model, files and special tokens (``record_kinds``)."""
    found = record_kind(kind).tokenization
    if found is None:
        raise ValueError(f"{kind} records hold no text")
    return found


@dataclass(frozen=True)
class Vocabulary:
    """A vocabulary as the files saved beside the shards (name -> bytes), and what the records need of it."""

    kind: TextKind
    files: dict[str, bytes]
    size: int  # ids run 0..size-1
    specials: dict[str, int]  # id of each special token

    def save(self, folder: Path) -> None:
        from trainbench.results.files import write_text_atomic

        for name, content in self.files.items():
            write_text_atomic(folder / name, content.decode("utf-8"))

    def tokenizer(self) -> Any:
        """A ``tokenizers.Tokenizer`` that encodes text with this vocabulary (specials are not matched in text)."""
        _quiet()
        from tokenizers import Tokenizer, models

        with tempfile.TemporaryDirectory() as folder:
            for name, content in self.files.items():
                (Path(folder) / name).write_bytes(content)
            family = tokenization(self.kind)
            if family.byte_level:
                tokenizer = Tokenizer(models.BPE.from_file(f"{folder}/vocab.json", f"{folder}/merges.txt"))
            else:
                tokenizer = Tokenizer(models.WordPiece.from_file(f"{folder}/vocab.txt", unk_token=family.unknown,
                                                                 max_input_chars_per_word=100))
        _prepare(tokenizer, self.kind)
        return tokenizer


def _quiet() -> None:
    # Rayon's thread pool is off: training stays deterministic, and forked workers print no warning about it.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _prepare(tokenizer: Any, kind: TextKind) -> None:
    """The normaliser and pre-tokeniser of each kind, the same for training and encoding."""
    from tokenizers import normalizers, pre_tokenizers

    family = tokenization(kind)
    if family.byte_level:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        return
    lower = family.lowercase
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lower, strip_accents=lower)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()


def train(kind: TextKind, texts: Iterable[str], vocab_size: int) -> Vocabulary:
    """A vocabulary of at most ``vocab_size`` tokens trained on ``texts`` (in their order), specials first."""
    _quiet()
    if tokenization(kind).byte_level:
        files = _train_byte_level(kind, texts, vocab_size)
    else:
        files = {"vocab.txt": _train_wordpiece(kind, list(texts), vocab_size)}
    return from_files(kind, files, "the trained vocabulary", vocab_size)


def _train_byte_level(kind: TextKind, texts: Iterable[str], vocab_size: int) -> dict[str, bytes]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + 1:
        raise UsageError(f"--vocab-size {vocab_size}: byte-level BPE needs at least {len(alphabet) + 1} tokens "
                         "(256 bytes and the end-of-text token)")
    tokenizer = Tokenizer(models.BPE())
    _prepare(tokenizer, kind)
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(tokenization(kind).specials), initial_alphabet=alphabet,
        show_progress=False))
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.model.save(folder)
        return {name: (Path(folder) / name).read_bytes() for name in tokenization(kind).files}


def _train_wordpiece(kind: TextKind, texts: list[str], vocab_size: int) -> bytes:
    """WordPiece's vocab.txt, learnt by BPE over words marked at their start.

    ``tokenizers``' own WordPieceTrainer is not deterministic: the ids it gives the ``##`` pieces come from a hash
    map's order, and they break ties between merges of equal counts, so two runs can keep different tokens. Its BPE
    trainer is, when every character is in the initial alphabet: words are marked with a leading ``▁`` instead
    (``▁`` + piece: a word's first piece, any other piece: ``##`` + piece), and the alphabet (the most frequent
    characters, ties by code point) is chosen here. Each character comes both ways (c and ##c), so no word is
    [UNK] for want of a piece; the characters left out of the alphabet are [UNK].
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    specials = list(tokenization(kind).specials)
    marker = "\u2581"
    tokenizer = Tokenizer(models.BPE())
    _prepare(tokenizer, kind)
    counts: Counter[str] = Counter()
    for text in texts:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text)):
            counts.update(word)
    counts.pop(marker, None)
    room = max(1, (vocab_size - len(specials)) // 4)  # at most half the vocabulary for the characters, both ways
    alphabet = sorted(sorted(counts), key=lambda char: -counts[char])[:room]
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.BertPreTokenizer(),
        pre_tokenizers.Metaspace(replacement=marker, prepend_scheme="always", split=False)])
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=[*alphabet, marker], limit_alphabet=len(alphabet) + 1,
        show_progress=False))
    learnt = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    tokens = [*specials, *alphabet, *(f"##{char}" for char in alphabet)]
    known = set(tokens)
    for piece, _ in learnt:
        token = piece[1:] if piece.startswith(marker) else f"##{piece}"
        if token not in known and token not in ("", "##") and marker not in token:
            tokens.append(token)
            known.add(token)
    return "".join(f"{token}\n" for token in tokens[:vocab_size]).encode()


def load(kind: TextKind, path: Path) -> Vocabulary:
    """The vocabulary of ``--vocab``: a vocab.txt file (bert, translation) or a folder of vocab.json + merges.txt."""
    names = tokenization(kind).files
    folder = len(names) > 1  # several files come in a folder, one alone is the path itself
    paths = [path / name for name in names] if folder else [path]
    if folder and not path.is_dir():
        raise UsageError(f"--vocab {path}: for {kind}, a folder holding {' and '.join(names)}")
    files = {}
    for file, name in zip(paths, names, strict=True):
        try:
            files[name] = file.read_bytes()
            files[name].decode("utf-8")
        except OSError as error:
            raise UsageError(f"--vocab {file}: cannot be read ({os_reason(error)})") from None
        except UnicodeDecodeError as error:
            raise UsageError(f"--vocab {file}: not UTF-8 text (byte {error.start})") from None
    return from_files(kind, files, f"--vocab {path}")


def _tokens(kind: TextKind, files: dict[str, bytes], what: str) -> dict[str, int]:
    """Token -> id of a vocabulary's files; UsageError when they are not such files."""
    if not tokenization(kind).byte_level:
        lines = files["vocab.txt"].decode("utf-8").splitlines()
        return {token.strip(): index for index, token in reversed(list(enumerate(lines)))}  # the first id wins
    try:
        tokens = json.loads(files["vocab.json"])
    except ValueError as error:
        raise UsageError(f"{what}: vocab.json is not JSON ({error})") from None
    if not (isinstance(tokens, dict) and all(isinstance(i, int) and i >= 0 for i in tokens.values())):
        raise UsageError(f"{what}: vocab.json must map tokens to ids (whole numbers)")
    return tokens


def from_files(kind: TextKind, files: dict[str, bytes], what: str = "the vocabulary", limit: int | None = None
               ) -> Vocabulary:
    """The vocabulary of these files (name -> content); UsageError, naming ``what``, when they are not one."""
    family = tokenization(kind)
    tokens = _tokens(kind, files, what)
    missing = [token for token in family.specials if token not in tokens]
    if missing:
        raise UsageError(f"{what}: has no {', '.join(missing)} token (the {kind} records need it)")
    specials = {token: tokens[token] for token in family.specials}
    for token, expected in family.fixed_ids.items():
        if specials[token] != expected:
            raise UsageError(f"{what}: {token} has id {specials[token]}; the records need it at {expected}")
    size = max(tokens.values()) + 1
    if limit is not None and size > limit:
        raise UsageError(f"{what}: {size} tokens, more than --vocab-size {limit}; raise --vocab-size")
    return Vocabulary(kind, files, size, specials)


def word_ids(vocabulary: Vocabulary) -> Sequence[int]:
    """The ids a masked position may be replaced with at random: every id but the special tokens'."""
    special = set(vocabulary.specials.values())
    return [index for index in range(vocabulary.size) if index not in special]
