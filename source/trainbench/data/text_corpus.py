"""Reading the text converters' input: documents from plain UTF-8 files, sentence pairs from a parallel corpus.

- A monolingual corpus (``data text``): each file is UTF-8 text; a document is a block of lines separated from the
  next by a blank line (Google's BERT input format), or the whole file with ``one_per_file``. A folder given
  stands for every regular file under it, in sorted path order. A file that cannot be read, is not UTF-8, or holds
  no text is listed as skipped with its reason and the rest converts; when no file gives a document, that is one
  UsageError line.
- A parallel corpus (``data translate``): two UTF-8 files, one sentence per line, line n of one the translation of
  line n of the other; unequal line counts, or a file that cannot be read, is one UsageError line.

The files' bytes are hashed as they are read: the digest is part of the conversion's fingerprint.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainbench.errors import UsageError, os_reason

_BLANK_LINE = re.compile(r"\n[ \t\f\v\r]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?]) +(?=\S)")


@dataclass(frozen=True)
class Document:
    """One document: its text, and where it comes from (for the order and the messages)."""

    file: str
    index: int  # the document's number within its file
    text: str


@dataclass
class Corpus:
    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    files: int = 0  # files that gave at least one document
    bytes: int = 0
    digest: str = ""  # sha256 over the content of every file read, in reading order


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files named, a folder standing for the regular files under it (sorted); a missing path is an error."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(Path(root) / name for root, _, names in os.walk(path) for name in names)
        elif path.exists() or path.is_symlink():
            files.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return files


def read_corpus(paths: Sequence[Path], one_per_file: bool = False) -> Corpus:
    """Every document of the files, in file order; odd files skipped with their reason."""
    corpus = Corpus()
    digest = hashlib.sha256()
    for path in input_files(paths):
        name = str(path)
        try:
            content = path.read_bytes()
            text = content.decode("utf-8")
        except OSError as error:
            corpus.skipped.append((name, f"cannot be read ({os_reason(error)})"))
            continue
        except UnicodeDecodeError as error:
            corpus.skipped.append((name, f"not UTF-8 text (byte {error.start}: {content[error.start:error.end]!r})"))
            continue
        digest.update(f"{len(content)}\n".encode() + content)  # contents only: the same files moved still resume
        blocks = [text] if one_per_file else _BLANK_LINE.split(text.replace("\r\n", "\n"))
        documents = [block.strip() for block in blocks if block.strip()]
        if not documents:
            corpus.skipped.append((name, "no text (empty or only blank lines)"))
            continue
        corpus.files += 1
        corpus.bytes += len(content)
        corpus.documents += [Document(name, index, text) for index, text in enumerate(documents)]
    corpus.digest = digest.hexdigest()
    if not corpus.documents:
        reasons = "; ".join(f"{file}: {reason}" for file, reason in corpus.skipped[:3])
        more = f"; and {len(corpus.skipped) - 3} more" if len(corpus.skipped) > 3 else ""
        files = f"{len(corpus.skipped)} input file{'' if len(corpus.skipped) == 1 else 's'}"
        raise UsageError(f"no text to convert in {files} ({reasons}{more})")
    return corpus


def sentences(document: str) -> list[str]:
    """A document's sentences: its lines, each cut after '.', '!' or '?' followed by a space (a simple splitter:
    BERT's own input has one sentence per line already)."""
    return [part for line in document.splitlines() for part in _SENTENCE_END.split(line.strip()) if part]


@dataclass(frozen=True)
class SentencePair:
    line: int  # 1-based line number in both files
    source: str
    target: str


@dataclass
class ParallelCorpus:
    pairs: list[SentencePair]
    bytes: int
    digest: str


def _lines(path: Path) -> tuple[list[str], bytes]:
    try:
        content = path.read_bytes()
        return content.decode("utf-8").splitlines(), content
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({os_reason(error)})") from None
    except UnicodeDecodeError as error:
        line = content[:error.start].count(b"\n") + 1
        raise UsageError(f"{path}: not UTF-8 text (line {line}, byte {error.start})") from None


def read_parallel(source: Path, target: Path) -> ParallelCorpus:
    """The sentence pairs of two files, line by line; unequal line counts or no text at all is a UsageError."""
    source_lines, source_bytes = _lines(source)
    target_lines, target_bytes = _lines(target)
    if len(source_lines) != len(target_lines):
        raise UsageError(f"{source} has {len(source_lines):,} lines and {target} {len(target_lines):,}: a parallel "
                         "corpus needs one target line per source line")
    pairs = [SentencePair(number, src.strip(), tgt.strip())
             for number, (src, tgt) in enumerate(zip(source_lines, target_lines, strict=True), start=1)]
    if not any(pair.source and pair.target for pair in pairs):
        raise UsageError(f"{source}, {target}: no sentence pair with text on both sides")
    digest = hashlib.sha256()
    for content in (source_bytes, target_bytes):
        digest.update(f"{len(content)}\n".encode() + content)
    return ParallelCorpus(pairs, len(source_bytes) + len(target_bytes), digest.hexdigest())
