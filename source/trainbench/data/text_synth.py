"""``trainbench data synth-text``: a small corpus of real English text, available offline wherever Python is.

The text is the documentation of Python's standard library: the docstrings of a fixed list of modules and of their
public functions and classes, in a fixed order (modules as listed, members by name), so the same Python version
writes the same files. One file per module, ``corpus/<module>.txt``: each docstring is a document (its non-blank
lines), documents separated by a blank line, the format ``data text`` reads.

The parallel corpus (``parallel/source.txt``, ``parallel/target.txt``, for ``data translate``) pairs the corpus's
lines with a deterministic transformation of them, not a translation: the target is the source's words in reverse
order, lower-cased. It has the shape of a translation task (two vocabularies' worth of text, lengths that match
line by line), not its difficulty.
"""

from __future__ import annotations

import importlib
import inspect
import time
from dataclasses import dataclass
from pathlib import Path

from trainbench.errors import UsageError, os_reason

MODULES = (
    "abc", "argparse", "ast", "base64", "bisect", "calendar", "collections", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "email.message", "enum", "fractions", "functools", "glob",
    "gzip", "heapq", "hmac", "html.parser", "http.client", "inspect", "ipaddress", "json", "logging", "mailbox",
    "operator", "optparse", "pathlib", "pickle", "pprint", "queue", "random", "re", "sched", "secrets", "shlex",
    "shutil", "smtplib", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "tokenize", "typing", "unittest.case", "urllib.parse", "uuid", "warnings", "zipfile",
)


@dataclass(frozen=True)
class TextSynthSummary:
    output: Path
    files: int
    documents: int
    pairs: int
    bytes: int
    seconds: float


def docstrings(module_name: str) -> list[str]:
    """The module's docstring and its public members' own ones (members defined in it, sorted by name)."""
    module = importlib.import_module(module_name)
    objects = [module] + [member for name, member in sorted(vars(module).items())
                          if not name.startswith("_") and (inspect.isfunction(member) or inspect.isclass(member))
                          and getattr(member, "__module__", None) == module_name]
    texts = []
    for thing in objects:
        doc = thing.__doc__ if isinstance(thing.__doc__, str) else ""  # own docstring only, never inherited
        lines = [line.strip() for line in inspect.cleandoc(doc).splitlines() if line.strip()]
        if len(" ".join(lines).split()) >= 5:  # a line such as "Return self." is not a document
            texts.append("\n".join(lines))
    return texts


def _target(line: str) -> str:
    return " ".join(reversed(line.lower().split()))


def synth_text(output: Path, documents: int = 2000, pairs: int = 2000) -> TextSynthSummary:
    """Write up to ``documents`` documents (whole modules' worth) and ``pairs`` sentence pairs under ``output``."""
    start = time.perf_counter()
    corpus, parallel = output / "corpus", output / "parallel"
    written = files = size = 0
    lines: list[str] = []
    try:
        corpus.mkdir(parents=True, exist_ok=True)
        parallel.mkdir(parents=True, exist_ok=True)
        for name in MODULES:
            if written >= documents:
                break
            texts = docstrings(name)[:documents - written]
            if not texts:
                continue
            content = "\n\n".join(texts) + "\n"
            (corpus / f"{name}.txt").write_text(content, encoding="utf-8")
            written, files, size = written + len(texts), files + 1, size + len(content.encode())
            lines += [line for text in texts for line in text.splitlines() if len(line.split()) >= 3]
        lines = lines[:pairs]
        (parallel / "source.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        (parallel / "target.txt").write_text("".join(f"{_target(line)}\n" for line in lines), encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{output}: cannot write the corpus ({os_reason(error)})") from None
    if not written:
        raise UsageError("the standard library has no docstrings here (Python run with -OO?): no corpus written")
    return TextSynthSummary(output, files, written, len(lines), size, time.perf_counter() - start)
