"""How fast ``trainbench data text`` (bert, gpt2) and ``data translate`` convert a corpus on this machine's CPUs.

The corpus is ``data synth-text``'s (the standard library's docstrings, about 650 documents, 0.24 MB), written
``--copies`` times (each copy its own files) so that the conversion, not the start, dominates; the parallel corpus
is its sentence pairs, as many times. For each converter, ``--repeats`` runs of the ``convert_text()`` the CLI runs,
in this process, with ``--workers`` workers: "train" trains the vocabulary on the corpus (``--vocab-size``) and
converts; "given" converts with that vocabulary passed as --vocab, the conversion alone. Sequence lengths are the
workloads' full defaults (bert 128, gpt2 1024; translation max_length 256). Figures: documents (sentence pairs) per
second and token ids per second (the tokenizer's output), the median of the repeats with min and max. The last line
printed is a JSON object with every figure.

    python benchmarks/text_convert_cpu.py [--copies 20] [--repeats 3] [--workers N] [--vocab-size 8000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # run from a plain checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

from trainbench.data.parallel import default_workers
from trainbench.data.text_convert import TextOptions, TextSummary, convert_text
from trainbench.data.text_synth import synth_text


def _corpus(folder: Path, copies: int) -> tuple[Path, tuple[Path, Path]]:
    synth = synth_text(folder / "synth", documents=100_000, pairs=100_000)
    corpus = folder / "corpus"
    corpus.mkdir()
    files = sorted((synth.output / "corpus").iterdir())
    for copy in range(copies):
        for path in files:
            (corpus / f"{copy:03d}-{path.name}").write_bytes(path.read_bytes())
    parallel = []
    for name in ("source.txt", "target.txt"):
        path = folder / name
        path.write_text((synth.output / "parallel" / name).read_text() * copies)
        parallel.append(path)
    return corpus, (parallel[0], parallel[1])


def _run(kind: str, inputs: tuple[Path, ...], output: Path, workers: int, vocab_size: int | None,
         vocab: Path | None) -> TextSummary:
    return convert_text(TextOptions(kind, inputs, output, vocab=vocab, vocab_size=None if vocab else vocab_size,  # type: ignore[arg-type]
                                    workers=workers, overwrite=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    figures: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        corpus, parallel = _corpus(folder, args.copies)
        for kind, inputs in (("bert", (corpus,)), ("gpt2", (corpus,)), ("translation", parallel)):
            trained = folder / f"{kind}-vocab"
            summary = _run(kind, inputs, trained, args.workers, args.vocab_size, None)  # unmeasured: the vocabulary
            vocab = trained if kind == "gpt2" else trained / "vocab.txt"
            for mode in ("train", "given"):
                rates: list[tuple[float, float, float]] = []
                for repeat in range(args.repeats):
                    start = time.perf_counter()
                    summary = _run(kind, inputs, folder / f"{kind}-{mode}-{repeat}", args.workers, args.vocab_size,
                                   vocab if mode == "given" else None)
                    seconds = time.perf_counter() - start
                    rates.append((summary.documents / seconds, summary.tokens / seconds, seconds))
                docs, tokens, seconds = (sorted(rate[i] for rate in rates) for i in range(3))
                figures[f"{kind}/{mode}"] = {
                    "documents": summary.documents, "tokens": summary.tokens, "records": summary.records,
                    "vocab_size": summary.vocab_size, "seconds": statistics.median(seconds),
                    "documents_per_s": statistics.median(docs), "documents_per_s_min_max": [docs[0], docs[-1]],
                    "tokens_per_s": statistics.median(tokens), "tokens_per_s_min_max": [tokens[0], tokens[-1]]}
                print(f"{kind:11s} {mode:5s}: {summary.documents:,} {'pairs' if kind == 'translation' else 'docs'}, "
                      f"{summary.tokens:,} tokens, {summary.records:,} records, vocabulary {summary.vocab_size:,}: "
                      f"{statistics.median(docs):,.0f} docs/s ({docs[0]:,.0f}-{docs[-1]:,.0f}), "
                      f"{statistics.median(tokens):,.0f} tokens/s ({tokens[0]:,.0f}-{tokens[-1]:,.0f})")
    print(json.dumps({"workers": args.workers, "copies": args.copies, "repeats": args.repeats, "figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
