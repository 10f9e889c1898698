"""``trainbench data coco`` and ``trainbench data synth-coco``: COCO detection sets as TFRecords of the coco kind.

Registered under ``data`` by ``data_cmd.add_parser``. Each prints one summary line on stdout; bad input is a
UsageError (one line, exit 2). The data modules are imported when a subcommand runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.cli.data_common import add_workers, say, workers
from trainbench.cli.options import path_text, real_number, whole_number

_MB = 1e6


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """Add ``coco`` and ``synth-coco`` to the ``data`` subcommands."""
    _add_coco(commands)
    _add_synth_coco(commands)


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) >= 16 and int(height) >= 16):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, each at least 16, e.g. 640x480: {text!r}")
    return int(width), int(height)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, type=path_text, metavar="DIR")
    parser.add_argument("--seed", type=whole_number(0, 2**63), default=None, help="shuffling seed")
    add_workers(parser)


def _add_coco(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "coco", help="COCO instance annotations + images -> TFRecord shards",
        description="Convert COCO instance annotations (instances_*.json) and their images into TFRecord shards in "
                    "tf-models-official's detection schema (boxes normalised, crowd flags, areas, category ids, the "
                    "image file untouched); resumes an interrupted run. Odd entries and files are listed in "
                    "skipped.csv.")
    parser.add_argument("annotations", type=path_text, metavar="ANNOTATIONS_JSON")
    parser.add_argument("image_dir", type=path_text, metavar="IMAGE_DIR", help="the folder the file names are in")
    _add_common(parser)
    parser.add_argument("--shards", type=whole_number(1, 99_999), default=32, metavar="N",
                        help="training shards (default 32; fewer when there are fewer images)")
    parser.add_argument("--validation-fraction", type=real_number(0.0, 1.0, below=True), default=0.0, metavar="F",
                        help="share of the images held out as the validation split (default 0: none)")
    parser.add_argument("--validation-shards", type=whole_number(1, 99_999), default=4, metavar="N",
                        help="with --validation-fraction (default 4)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards of another conversion found in the output folder")
    parser.set_defaults(run=run_coco)


def _add_synth_coco(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "synth-coco", help="write a small generated COCO-format set of JPEG files",
        description="Write <DIR>/train2017/*.jpg and <DIR>/annotations/instances_train2017.json: real JPEG files "
                    "with one to four boxed objects each, COCO 2017's 80 category ids and names, for demos and tests.")
    _add_common(parser)
    parser.add_argument("--images", type=whole_number(1, 10_000_000), required=True, metavar="N")
    parser.add_argument("--size", type=_size, default=(640, 480), metavar="WxH",
                        help="largest image size; each image is 80-100 %% of it, a third portrait (default 640x480)")
    parser.add_argument("--odd-cases", action="store_true",
                        help="add a PNG, a grayscale JPEG, a non-image, a missing file, a size mismatch, and "
                             "annotations naming a missing image, outside their image, with no area or an unknown "
                             "category")
    parser.set_defaults(run=run_synth_coco)




def run_coco(args: argparse.Namespace) -> int:
    from trainbench.data.coco_convert import DEFAULT_SEED, CocoOptions, convert_coco

    summary = convert_coco(CocoOptions(
        Path(args.annotations), Path(args.image_dir), Path(args.output), shards=args.shards,
        validation_fraction=args.validation_fraction, validation_shards=args.validation_shards,
        workers=workers(args), seed=DEFAULT_SEED if args.seed is None else args.seed, overwrite=args.overwrite))
    splits = ", ".join(f"{count:,} {split}" for split, count in summary.records.items())
    seconds = max(summary.seconds, 1e-9)
    line = (f"converted {summary.written:,} images ({splits}) with {summary.boxes:,} boxes into {summary.shards} "
            f"shards in {summary.output}: {summary.seconds:.2f} s, {summary.processed / seconds:,.1f} images/s, "
            f"{summary.input_bytes / _MB / seconds:,.1f} MB/s")
    if summary.resumed:
        line += f"; {summary.resumed} of {summary.shards} shards were already done by an earlier run"
    if summary.redone:
        line += f"; {len(summary.redone)} finished shards were redone"
    line += f"; {summary.skipped:,} entries skipped or clipped (see {summary.output / 'skipped.csv'})"
    say(line)
    return 0


def run_synth_coco(args: argparse.Namespace) -> int:
    from trainbench.data.coco_synth import CocoSynthOptions, synth_coco

    summary = synth_coco(CocoSynthOptions(Path(args.output), args.images, size=args.size, seed=args.seed or 0,
                                          odd_cases=args.odd_cases, workers=workers(args)))
    say(f"wrote {summary.images:,} images ({summary.bytes / _MB:,.1f} MB) with {summary.boxes:,} annotations "
         f"({summary.annotations}) in {summary.output} in {summary.seconds:.1f} s")
    return 0
