"""``trainbench data ...``: prepare ImageNet, text corpora and COCO sets (or generated stand-ins) as TFRecords.

Each subcommand prints one summary line on stdout; bad input is a UsageError (one line, exit 2). The data modules
are imported when a subcommand runs, so the other commands do not pay for Pillow and numpy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainbench.cli import data_coco_cmd, data_text_cmd
from trainbench.cli.data_common import add_workers, reasons, say, workers
from trainbench.cli.options import path_text, whole_number
from trainbench.errors import EXIT_USAGE, UsageError

_MB = 1e6


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) >= 16 and int(height) >= 16):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, each at least 16, e.g. 500x375: {text!r}")
    return int(width), int(height)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``data`` and its subcommands to the project's CLI."""
    parser = subparsers.add_parser("data", help="prepare ImageNet, text corpora and COCO sets as TFRecords",
                                   description="Prepare ImageNet, text corpora or COCO detection sets (or generated "
                                               "stand-ins) as TFRecord shards in tf-models-official's schemas.")
    commands = parser.add_subparsers(dest="data_command", required=True,
                                     metavar="{convert,valprep,verify,synth,text,translate,synth-text,coco,synth-coco}")
    _add_convert(commands)
    _add_valprep(commands)
    _add_verify(commands)
    _add_synth(commands)
    data_text_cmd.add_parsers(commands)  # text, translate, synth-text
    data_coco_cmd.add_parsers(commands)  # coco, synth-coco



def _add_convert(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "convert", help="ImageNet folder -> TFRecord shards",
        description="Convert <data dir>/train/<synset>/* and val/<synset>/* (with boxes from Annotation/) into "
                    "TFRecord shards in the standard ImageNet record schema; resumes an interrupted run.")
    parser.add_argument("data_dir", type=path_text, metavar="DATA_DIR",
                        help="folder holding train/, val/ and optionally Annotation/")
    parser.add_argument("--output", type=path_text, metavar="DIR",
                        help="where the shards go (default: DATA_DIR/TFRecords)")
    parser.add_argument("--train-shards", type=whole_number(1, 99_999), default=1024, metavar="N", help="default 1024")
    parser.add_argument("--validation-shards", type=whole_number(1, 99_999), default=128, metavar="N",
                        help="default 128")
    parser.add_argument("--synset-names", type=path_text, metavar="FILE",
                        help="'<synset> <text>' lines for image/class/text (e.g. LOC_synset_mapping.txt)")
    parser.add_argument("--seed", type=whole_number(0, 2**63), default=12345, help="shuffling seed (default 12345)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards of another conversion found in the output folder")
    add_workers(parser)
    parser.set_defaults(run=run_convert)


def _add_valprep(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "valprep", help="sort a flat val/ folder into synset folders",
        description="Move each validation image into <val dir>/<synset>/ by the ground truth: Kaggle's "
                    "LOC_val_solution.csv, or the devkit's ground-truth file with its synset order.")
    parser.add_argument("val_dir", type=path_text, metavar="VAL_DIR",
                        help="the flat folder of ILSVRC2012_val_*.JPEG files")
    truth = parser.add_mutually_exclusive_group(required=True)
    truth.add_argument("--solution", type=path_text, metavar="CSV",
                       help="LOC_val_solution.csv (ImageId,PredictionString)")
    truth.add_argument("--ground-truth", type=path_text, metavar="TXT",
                       help="ILSVRC2012_validation_ground_truth.txt (class numbers) or one synset per line")
    parser.add_argument("--synset-order", type=path_text, metavar="TXT",
                        help="with --ground-truth numbers: class k's synset on line k")
    parser.set_defaults(run=run_valprep)


def _add_verify(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "verify", help="read and check every record of a TFRecord folder",
        description="Check every shard: checksums, record schema, labels, JPEGs that decode to their declared "
                    "size, record counts and sha256 against the manifest. Exit 2 if any shard is bad.")
    parser.add_argument("folder", type=path_text, metavar="TFRECORDS_DIR")
    parser.add_argument("--headers-only", action="store_true",
                        help="check each JPEG's header and end marker instead of decoding it (faster)")
    add_workers(parser)
    parser.set_defaults(run=run_verify)


def _add_synth(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "synth", help="write a small generated ImageNet-layout tree of JPEG files",
        description="Write train/<synset>/*.JPEG, val/<synset>/*.JPEG, Annotation/ boxes and "
                    "LOC_synset_mapping.txt: real JPEG files of ImageNet-like sizes, for demos and tests.")
    parser.add_argument("--output", required=True, type=path_text, metavar="DIR")
    parser.add_argument("--classes", type=whole_number(1, 100_000), required=True, metavar="N")
    parser.add_argument("--train-per-class", type=whole_number(1), required=True, metavar="K")
    parser.add_argument("--val-per-class", type=whole_number(0), default=0, metavar="M")
    parser.add_argument("--size", type=_size, default=(500, 375), metavar="WxH",
                        help="largest image size; each image is 80-100 %% of it, a third portrait (default 500x375)")
    parser.add_argument("--odd-cases", action="store_true",
                        help="add PNG, RGBA, CMYK, grayscale, truncated, empty and non-image files to one class")
    parser.add_argument("--flat-val", action="store_true",
                        help="val/ unsorted with LOC_val_solution.csv, as Kaggle ships it (for valprep)")
    parser.add_argument("--seed", type=whole_number(0, 2**63), default=0)
    add_workers(parser)
    parser.set_defaults(run=run_synth)




def run_convert(args: argparse.Namespace) -> int:
    from trainbench.data.convert import ConvertOptions, convert

    summary = convert(ConvertOptions(
        Path(args.data_dir), output=Path(args.output) if args.output else None, train_shards=args.train_shards,
        validation_shards=args.validation_shards, workers=workers(args), seed=args.seed,
        synset_names=Path(args.synset_names) if args.synset_names else None, overwrite=args.overwrite))
    splits = ", ".join(f"{count:,} {split}" for split, count in summary.records.items())
    line = (f"converted {summary.written:,} images ({splits}) into {summary.shards} shards in "
            f"{summary.output}: {summary.seconds:.2f} s, {summary.processed / summary.seconds:,.1f} images/s, "
            f"{summary.input_bytes / _MB / summary.seconds:,.1f} MB/s")
    if summary.resumed:
        line += f"; {summary.resumed} of {summary.shards} shards were already done by an earlier run"
    if summary.redone:
        line += f"; {len(summary.redone)} finished shards were redone ({reasons(summary.redone)})"
    line += f"; {summary.reencoded:,} odd files re-encoded as RGB JPEG"
    line += f"; {summary.skipped:,} files skipped (see {summary.output / 'skipped.csv'})"
    say(line)
    return 0



def run_valprep(args: argparse.Namespace) -> int:
    from trainbench.data import valprep

    if args.synset_order and not args.ground_truth:
        raise UsageError("--synset-order goes with --ground-truth (LOC_val_solution.csv names the synsets itself)")
    if args.solution:
        truth = valprep.read_solution_csv(Path(args.solution))
    else:
        truth = valprep.read_devkit_ground_truth(Path(args.ground_truth),
                                                 Path(args.synset_order) if args.synset_order else None)
    summary = valprep.sort_validation(Path(args.val_dir), truth)
    say(f"moved {summary.moved:,} files into {summary.synsets:,} synset folders in {summary.folder}; "
          f"{summary.unmatched:,} files without ground truth and {summary.conflicts:,} already sorted left in place; "
          f"{summary.missing:,} ground-truth entries without a file")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from trainbench.data.verify import verify

    report = verify(Path(args.folder), workers(args), decode=not args.headers_only)
    for problem in report.problems:
        print(f"trainbench: {problem}", file=sys.stderr)  # stderr shows odd bytes as \xNN itself
    if report.problems:
        return EXIT_USAGE
    splits = ", ".join(f"{count:,} {split}" for split, count in report.records.items())
    checked = report.checked or (f"labels 1..{report.num_classes}, every image "
                                 f"{'a complete JPEG' if args.headers_only else 'decodes'} at its declared size")
    say(f"ok: {report.shards} shards in {report.folder}, {sum(report.records.values()):,} records ({splits}), "
          f"{checked}")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    from trainbench.data.synth_tree import SynthOptions, synth

    summary = synth(SynthOptions(Path(args.output), args.classes, args.train_per_class, args.val_per_class,
                                 size=args.size, seed=args.seed, odd_cases=args.odd_cases, flat_val=args.flat_val,
                                 workers=workers(args)))
    say(f"wrote {summary.images:,} images ({summary.bytes / _MB:,.1f} MB) in {summary.output} "
          f"in {summary.seconds:.1f} s")
    return 0
