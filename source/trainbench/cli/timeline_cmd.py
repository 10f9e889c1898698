"""``trainbench timeline FILE...``: GPU busy fraction, copies, per-step GPU time and top kernels of nsys captures.

The analysis is :mod:`trainbench.analysis.timeline`, the one ``trainbench profile nsys`` uses; this module parses
the options, exports ``.nsys-rep`` reports with the ``nsys`` on PATH, and prints. Several files (one per rank) get
a side-by-side table naming the straggler. A file that cannot be read costs one line on stderr naming it, the
other files are still reported, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainbench.analysis.nsys_export import is_report
from trainbench.analysis.timeline import (
    AUTOMATIC,
    STEP_PATTERN,
    compare_files,
    parse_window,
    step_pattern,
    straggler,
    summarize,
)
from trainbench.cli.options import path_text, whole_number
from trainbench.errors import EXIT_USAGE, UsageError, printable_line
from trainbench.profile.nsys import export_sqlite

_PREFIX = "trainbench: timeline"
_STEPS_LISTED = 20  # more steps than this are summarised (median, min, max); --json lists them all

_DESCRIPTION = (
    "GPU busy fraction (kernel intervals merged across streams), memcpy/memset time and bytes, GPU time per step "
    "(NVTX ranges) and top kernels of Nsight Systems captures: `nsys export --type sqlite` files, or .nsys-rep "
    "reports when nsys is on PATH to export them. Several files (one per rank) are compared and the straggler named."
)


def _argparse_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """A library parser as an argparse type, so that its UsageError names the option."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = name
    return convert


def _range_pattern(text: str) -> str:
    step_pattern(text)  # refused here, before any file is read
    return text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``timeline`` subcommand to the project's CLI."""
    parser = subparsers.add_parser("timeline", help="GPU busy time, steps and kernels of nsys exports",
                                   description=_DESCRIPTION)
    parser.add_argument("files", nargs="+", type=path_text, metavar="FILE",
                        help="an nsys SQLite export, or a .nsys-rep/.qdrep report (needs nsys on PATH)")
    parser.add_argument("--window", type=_argparse_type(parse_window, "window"), default=AUTOMATIC,
                        metavar="nvtx:NAME|START:END",
                        help="analyse only the NVTX range NAME (first start to last end) or [START, END) in ns of "
                        "the export's timeline (default: from the first step, or the first GPU activity without "
                        "steps, to the last GPU activity)")
    parser.add_argument("--range", dest="range_pattern", type=_argparse_type(_range_pattern, "regex"),
                        default=STEP_PATTERN, metavar="REGEX",
                        help="NVTX ranges whose whole name matches REGEX are the steps; its first group, if any, "
                        r"says which step (default 'step:(\d+)', the suite's own)")
    parser.add_argument("--top", type=whole_number(0), default=10, metavar="N",
                        help="list the N kernels with the most time in the window (default 10)")
    parser.add_argument("--json", action="store_true",
                        help="JSON instead of text: the summary of one file; with several, every summary, the "
                        "side-by-side rows and the straggler")
    parser.set_defaults(run=run)


# --- reading ------------------------------------------------------------------------------------------------

def _export_of(path: str, folder: Path, index: int) -> str:
    """The SQLite export to read for ``path``: itself, or for an nsys report its export into ``folder``."""
    if not is_report(path):
        return path
    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    binary = shutil.which("nsys")
    if binary is None:
        raise UsageError(f"{path}: an Nsight Systems report; reading it needs nsys on PATH to export it (or give "
                         "the output of `nsys export --type sqlite` instead)")
    return str(export_sqlite(binary, Path(path), folder / f"{index}_{Path(path).stem}.sqlite"))


def _summary(path: str, args: argparse.Namespace, folder: Path, index: int) -> dict[str, Any] | None:
    """The file's summary, or None after one line on stderr saying why there is none."""
    try:
        export = _export_of(path, folder, index)
        return summarize(export, window=args.window, range_pattern=args.range_pattern, top=args.top)
    except UsageError as error:
        problem = str(error) if str(error).startswith(path) else f"{path}: {error}"
    except Exception as error:  # noqa: BLE001 -- a capture must never end in a traceback; report and go on
        problem = f"{path}: cannot analyse: {type(error).__name__}: {error}"
    print(f"{_PREFIX}: {printable_line(problem)}", file=sys.stderr)
    return None


# --- text ---------------------------------------------------------------------------------------------------

def _duration(ns: float | None) -> str:
    """A time in the unit that keeps it readable: a 2 us kernel and a 3 s window both."""
    if ns is None:
        return "-"
    for unit, factor in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= factor:
            return f"{ns / factor:.3f} {unit}"
    return f"{ns:.0f} ns"


def _size(count: int) -> str:
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= factor:
            return f"{count / factor:.2f} {unit}"
    return f"{count} B"


def _count(count: int, singular: str, plural: str = "") -> str:
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def _aligned(rows: list[list[str]], indent: str = "") -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _source_line(summary: dict[str, Any]) -> str:
    release = summary["nsys_version"] or "release not recorded"
    gpus = f"; GPU {', '.join(summary['gpus'])}" if summary["gpus"] else ""
    return f"export:      Nsight Systems {release}{gpus}"


def _window_line(summary: dict[str, Any]) -> str:
    window = summary["window"]
    requested = window.get("requested_ns")
    cut = (f", cut from the requested [{requested[0]}, {requested[1]}) ns to the capture's recorded events"
           if requested else "")
    return (f"window:      {_duration(summary['window_ns'])}, [{window['start_ns']}, {window['end_ns']}) ns, "
            f"from {window['from']}{cut}")


def _busy_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"GPU busy:    {summary['gpu_busy_fraction']:.2%} ({_duration(summary['gpu_busy_ns'])} with kernels "
             f"merged across streams; {_duration(summary['kernel_ns_sum'])} summed), "
             f"{_count(summary['kernels'], 'kernel')}"]
    if summary["compute_busy_ns"] != summary["gpu_busy_ns"]:
        lines.append(f"             {_duration(summary['compute_busy_ns'])} of it outside NCCL kernels")
    for kind, singular, plural in (("memcpy", "copy", "copies"), ("memset", "memset", "memsets")):
        lines.append(f"{kind}:      {_duration(summary[f'{kind}_ns'])}, {_size(summary[f'{kind}_bytes'])} in "
                     f"{_count(summary[f'{kind}s'], singular, plural)}")
    return lines


def _step_lines(summary: dict[str, Any], pattern: str) -> list[str]:
    steps = summary["per_step"]
    if not steps:
        return [f"steps:       none (no closed NVTX range matches '{printable_line(pattern)}'; --range REGEX "
                "names other steps)"]
    busy = [step["gpu_busy_ns"] for step in steps]
    median_ns = summary["step_gpu_ms_median"] * 1e6
    lines = [f"steps:       {len(steps)}, GPU time per step: median {_duration(median_ns)} "
             f"(min {_duration(min(busy))}, max {_duration(max(busy))})"]
    if len(steps) <= _STEPS_LISTED:
        rows = [[str(step["step"]), _duration(step["gpu_busy_ns"]), str(step["kernels"]),
                 printable_line(step["name"])] for step in steps]
        lines += _aligned([["step", "GPU time", "kernels", "name"], *rows], indent="  ")
    return lines


def _top_lines(summary: dict[str, Any]) -> list[str]:
    rows = [[f"{kernel['share']:.1%}", _duration(kernel["total_ns"]), str(kernel["instances"]),
             _duration(kernel["mean_ns"]), printable_line(kernel["name"])] for kernel in summary["top_kernels"]]
    if not rows:
        return []
    table = _aligned([["share", "total", "launches", "mean", "name"], *rows], indent=" " * 13)
    return ["top kernels: " + table[0].lstrip(), *table[1:]]


def format_summary(summary: dict[str, Any], pattern: str) -> list[str]:
    """The text report of one file."""
    return [_source_line(summary), _window_line(summary), *_busy_lines(summary), *_step_lines(summary, pattern),
            *_top_lines(summary)]


_COMPARISON_HEADER = ["file", "GPU busy", "busy", "without NCCL", "steps", "median step", "without NCCL",
                      "kernels", "memcpy"]


def _ns(ms: float | None) -> float | None:
    return None if ms is None else ms * 1e6


def _comparison_cells(row: dict[str, Any]) -> list[str]:
    return [printable_line(row["file"]), f"{row['gpu_busy_fraction']:.2%}", _duration(_ns(row["gpu_busy_ms"])),
            _duration(_ns(row["compute_busy_ms"])), str(row["steps"]), _duration(_ns(row["step_gpu_ms_median"])),
            _duration(_ns(row["step_compute_ms_median"])), str(row["kernels"]), _duration(_ns(row["memcpy_ms"]))]


def _straggler_line(slowest: dict[str, Any]) -> str:
    above = slowest["over_fastest"]
    lead = f", {above:.1%} above the fastest" if above is not None else ""
    return (f"straggler: {printable_line(slowest['file'])} ({slowest['basis']}: {_duration(_ns(slowest['ms']))}"
            f"{lead}, {printable_line(slowest['fastest_file'])} at {_duration(_ns(slowest['fastest_ms']))})")


def format_comparison(summaries: dict[str, dict[str, Any]]) -> list[str]:
    """The side-by-side table of several files and the straggler's line."""
    frame = compare_files(summaries)
    lines = _aligned([_COMPARISON_HEADER, *(_comparison_cells(row) for row in frame.to_dict("records"))])
    slowest = straggler(frame.drop(columns="straggler"))
    return [*lines, _straggler_line(slowest)] if slowest is not None else lines


# --- the command --------------------------------------------------------------------------------------------

def _print_json(summaries: dict[str, dict[str, Any]], several: bool) -> None:
    documents = [{"file": path, **summary} for path, summary in summaries.items()]
    if not several:
        print(json.dumps(documents[0], allow_nan=False))
        return
    frame = compare_files(summaries)
    document = {"files": documents, "side_by_side": frame.to_dict("records"),
                "straggler": straggler(frame.drop(columns="straggler"))}
    print(json.dumps(document, allow_nan=False, default=float))


def _print_text(summaries: dict[str, dict[str, Any]], several: bool, pattern: str) -> None:
    lines: list[str] = []
    for path, summary in summaries.items():
        header = [f"==> {printable_line(path)} <=="] if several else []
        lines += [*header, *format_summary(summary, pattern)]
    if several and len(summaries) > 1:
        lines += ["==> side by side <==", *format_comparison(summaries)]
    sys.stdout.write("".join(line + "\n" for line in lines))


def _refuse_repeats(files: list[str]) -> None:
    # Files are told apart by name in the comparison: a file given twice would be its own rank.
    repeated = sorted({path for path in files if files.count(path) > 1})
    if repeated:
        raise UsageError(f"timeline: given more than once: {', '.join(repeated)}")


def run(args: argparse.Namespace) -> int:
    """Analyse every file; 0 when all succeeded, 2 when any failed (the others are still reported)."""
    _refuse_repeats(args.files)
    summaries: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="trainbench-timeline-") as folder:
        for index, path in enumerate(args.files):
            summary = _summary(path, args, Path(folder), index)
            if summary is not None:
                summaries[path] = summary
    several = len(args.files) > 1
    if summaries and args.json:
        _print_json(summaries, several)
    elif summaries:
        _print_text(summaries, several, args.range_pattern)
    return 0 if len(summaries) == len(args.files) else EXIT_USAGE

