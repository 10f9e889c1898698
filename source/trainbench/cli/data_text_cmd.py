"""``trainbench data text|translate|synth-text``: text corpora into the BERT, GPT-2/Llama and Transformer records.

``data text --workload W`` writes the records W reads (its descriptor's ``record_kind``: gpt2 and llama both read
the gpt2 kind, made by the same writer); its choices, its --seq-len default and bounds, and its --vocab-size default
come from the descriptors of the workloads reading a kind of whole documents.

Registered by ``data_cmd``; each subcommand prints one summary line on stdout, bad input is one UsageError line
(exit 2). The data modules (and ``tokenizers``) are imported when a subcommand runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trainbench import workloads
from trainbench.cli.data_common import add_workers, reasons, say, workers
from trainbench.cli.options import path_text, whole_number
from trainbench.data.record_kinds import record_kind, record_kinds

if TYPE_CHECKING:
    from trainbench.data.text_convert import TextOptions, TextSummary
    from trainbench.workloads import Workload


def text_workloads() -> tuple[Workload, ...]:
    """The workloads ``data text`` writes records for: those reading a text kind of whole documents (the sentence
    pairs of the translation kind are ``data translate``'s)."""
    kinds = {spec.name for spec in record_kinds() if spec.is_text and not spec.pairs}
    return tuple(workload for workload in workloads.all_workloads()
                 if workload.record_kind in kinds and "seq_len" in workload.params)


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """Add ``text``, ``translate`` and ``synth-text`` to ``trainbench data``."""
    _add_text(commands)
    _add_translate(commands)
    _add_synth_text(commands)


def _add_common(parser: argparse.ArgumentParser, default_vocab: str) -> None:
    parser.add_argument("--output", required=True, type=path_text, metavar="DIR", help="where the shards go")
    vocab = parser.add_mutually_exclusive_group()
    vocab.add_argument("--vocab", type=path_text, metavar="PATH",
                       help="use this vocabulary instead of training one: bert and translate a vocab.txt file, "
                            "gpt2 and llama a folder holding vocab.json and merges.txt (GPT-2's own files work)")
    vocab.add_argument("--vocab-size", type=whole_number(64, 1_000_000), metavar="N",
                       help=f"tokens of the vocabulary trained on the corpus, at most (default {default_vocab}; "
                            "the tiny models read 512)")
    parser.add_argument("--shards", type=whole_number(1, 99_999), metavar="N",
                        help="train-NNNNN-of-NNNNN shards (default 16, fewer for a smaller corpus)")
    parser.add_argument("--seed", type=whole_number(0, 2**63), default=12345,
                        help="seed of the shuffling and of the records' random choices (default 12345)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards of another conversion found in the output folder")
    add_workers(parser)


def _add_text(commands: argparse._SubParsersAction) -> None:
    readers = text_workloads()
    parser = commands.add_parser(
        "text", help="UTF-8 text -> BERT or GPT-2/Llama TFRecord shards",
        description="Convert plain UTF-8 text (one document per blank-line-separated block) into the records "
                    "tf-models-official's BERT pre-training reader reads (WordPiece, sentence pairs with "
                    "next-sentence labels, 15 % masked, as create_pretraining_data.py makes them), or into the "
                    "causal-LM blocks of seq-len + 1 token ids that gpt2 and llama both read (gpt2 records: "
                    "byte-level BPE, documents joined by <|endoftext|>). The vocabulary is trained on the corpus "
                    "unless --vocab gives one, and saved beside the shards. Unreadable or non-UTF-8 files are listed "
                    "in skipped.csv. Resumes an interrupted run.")
    parser.add_argument("inputs", nargs="+", type=path_text, metavar="FILE",
                        help="text files, or folders (every file under them, in sorted order)")
    parser.add_argument("--workload", required=True, choices=tuple(workload.name for workload in readers))
    bounds = {workload.name: workload.bounds("seq_len") for workload in readers}
    parser.add_argument("--seq-len", type=whole_number(min(low for low, _ in bounds.values()),
                                                       max(high for _, high in bounds.values())), metavar="N",
                        help="tokens per sequence, within the workload's positions ("
                             + ", ".join(f"{name} {low}-{high}" for name, (low, high) in bounds.items())
                             + "; default: what the workload trains at, "
                             + ", ".join(f"{workload.name} {workload.default('seq_len')}" for workload in readers)
                             + ")")
    parser.add_argument("--max-predictions", type=whole_number(1, 1024), metavar="N",
                        help="bert: masked positions per sequence at most (default 15 %% of --seq-len, as the "
                             "bert workload masks: 19 at 128)")
    parser.add_argument("--one-document-per-file", action="store_true",
                        help="each file is one document (blank lines inside it are paragraph breaks)")
    _add_common(parser, _vocab_defaults(readers))
    parser.set_defaults(run=run_text)


def _vocab_defaults(readers: tuple[Workload, ...]) -> str:
    """--vocab-size's default for each workload: its record kind's trained vocabulary, and why when that is not the
    published model's (llama reads gpt2's records: Llama 3's own vocabulary is not one a corpus here could train)."""

    defaults = []
    for workload in readers:
        tokens = record_kind(workload.record_kind).tokenization
        assert tokens is not None, "text_workloads keeps the text kinds"
        published = workload.dims("full").get("vocab", tokens.default_size)
        model = "byte-level BPE" if tokens.byte_level else "WordPiece"
        note = "" if published == tokens.default_size else (
            f" ({workload.record_kind}'s {model} trained on the corpus: {workload.title}'s own {published:,}-token "
            "vocabulary is another tokenizer's, trained on far more text than a corpus here holds)")
        defaults.append(f"{workload.name} {tokens.default_size}{note}")
    return ", ".join(defaults)


def _add_translate(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "translate", help="a parallel corpus -> Transformer TFRecord shards",
        description="Convert a parallel corpus (one sentence per line, line n of TGT_FILE the translation of line n "
                    "of SRC_FILE) into the inputs/targets records of tf-models-official's legacy Transformer, with "
                    "one subword vocabulary (WordPiece, case kept; <pad> 0, <EOS> 1, <unk> 2) shared by both "
                    "sides. Each side ends in <EOS>; pairs longer than --max-length, or with an empty side, are "
                    "dropped and counted. Resumes an interrupted run.")
    parser.add_argument("source", type=path_text, metavar="SRC_FILE")
    parser.add_argument("target", type=path_text, metavar="TGT_FILE")
    parser.add_argument("--max-length", type=whole_number(2, 65536), default=256, metavar="N",
                        help="longest side kept, in tokens with <EOS> (default 256, the Transformer's max_length)")
    _add_common(parser, "33708")
    parser.set_defaults(run=run_translate)


def _add_synth_text(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "synth-text", help="write a small corpus of real text (Python's own documentation)",
        description="Write DIR/corpus/<module>.txt: the docstrings of standard-library modules, one document each "
                    "(the input 'data text' reads), and DIR/parallel/source.txt + target.txt for 'data "
                    "translate'. The target side is NOT a translation: it is the source line's words in reverse "
                    "order, lower-cased (a deterministic transformation). The same Python writes the same files.")
    parser.add_argument("--output", required=True, type=path_text, metavar="DIR")
    parser.add_argument("--documents", type=whole_number(1), default=2000, metavar="N",
                        help="documents at most (default 2000)")
    parser.add_argument("--pairs", type=whole_number(1), default=2000, metavar="N",
                        help="sentence pairs at most (default 2000)")
    parser.set_defaults(run=run_synth_text)


def _options(args: argparse.Namespace, kind: str, inputs: tuple[Path, ...], **extra: object) -> TextOptions:
    from trainbench.data.text_convert import TextOptions

    return TextOptions(kind, inputs, Path(args.output), vocab=Path(args.vocab) if args.vocab else None,  # type: ignore[arg-type]
                       vocab_size=args.vocab_size, shards=args.shards, seed=args.seed,
                       workers=workers(args), overwrite=args.overwrite, **extra)  # type: ignore[arg-type]


def _report(summary: TextSummary) -> int:

    kind = record_kind(summary.kind)
    what = kind.holds  # what the corpus was made of: documents, or sentence pairs
    seconds = max(summary.seconds, 1e-9)
    line = (f"converted {summary.documents:,} {what} ({summary.tokens:,} tokens) into {summary.records:,} "
            f"{summary.kind} records in {summary.shards} shards in {summary.output} (vocabulary "
            f"{summary.vocab_size:,} tokens): {summary.seconds:.2f} s, {summary.documents / seconds:,.1f} {what}/s, "
            f"{summary.tokens / seconds:,.0f} tokens/s")
    if summary.resumed:
        line += f"; {summary.resumed} of {summary.shards} shards were already done by an earlier run"
    if summary.redone:
        line += f"; {len(summary.redone)} finished shards were redone ({reasons(summary.redone)})"
    if kind.pairs:
        line += f"; {summary.filtered:,} pairs dropped (longer than --max-length, or a side empty)"
    line += f"; {summary.skipped:,} files skipped (see {summary.output / 'skipped.csv'})"
    say(line)
    return 0


def run_text(args: argparse.Namespace) -> int:
    from trainbench.data.text_convert import convert_text
    from trainbench.errors import UsageError

    workload = workloads.get(args.workload)
    kind = record_kind(workload.record_kind)
    # Only records holding masked positions have a number of them to set.
    if args.max_predictions and "max_predictions_per_seq" not in kind.settings:
        masking = [other.name for other in text_workloads()
                   if "max_predictions_per_seq" in record_kind(other.record_kind).settings]
        raise UsageError(f"--max-predictions is for --workload {' or '.join(masking)} ({args.workload} masks "
                         "nothing)")
    if args.seq_len is not None:
        low, high = workload.bounds("seq_len")
        if not low <= args.seq_len <= high:  # records no run of the workload could read
            raise UsageError(f"--seq-len {args.seq_len}: --workload {args.workload} reads sequences of {low} to "
                             f"{high} tokens (its positions)")
    # Not given: the length the workload trains at (its descriptor's full default: bert 128, gpt2 1024, llama 8192).
    seq_len = args.seq_len if args.seq_len is not None else workload.default("seq_len")
    options = _options(args, kind.name, tuple(Path(path) for path in args.inputs), seq_len=seq_len,
                       max_predictions=args.max_predictions, one_per_file=args.one_document_per_file)
    return _report(convert_text(options))


def run_translate(args: argparse.Namespace) -> int:
    from trainbench.data.text_convert import convert_text

    options = _options(args, "translation", (Path(args.source), Path(args.target)), max_length=args.max_length)
    return _report(convert_text(options))


def run_synth_text(args: argparse.Namespace) -> int:
    from trainbench.data.text_synth import synth_text

    summary = synth_text(Path(args.output), args.documents, args.pairs)
    say(f"wrote {summary.documents:,} documents in {summary.files} files ({summary.bytes / 1e6:,.2f} MB) in "
         f"{summary.output / 'corpus'} and {summary.pairs:,} sentence pairs in {summary.output / 'parallel'} "
         f"in {summary.seconds:.1f} s")
    return 0
