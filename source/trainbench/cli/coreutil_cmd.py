"""``trainbench coreutil FILE...`` and ``Core-Utilization-Analyzer/coreutil.py``: core utilization per profile.

Default output per file, the original four lines: ``fma\\t17.50765 %``, ``fp16\\t...``, ``tensor\\t...``,
``sfu\\t...`` (``n/a`` where the profile lacks the metric). With several files each block is preceded by
``==> FILE <==``; nvprof input adds a ``#`` line saying that values are levels x 10 %. A bad file costs one line on
stderr naming it, the other files are still processed, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from trainbench.analysis.coreutil import CORES, CoreUtilization, analyze_file, summary_frame
from trainbench.cli.options import path_text, whole_number
from trainbench.cli.parsing import Parser
from trainbench.errors import EXIT_USAGE, UsageError, os_reason, printable_line
from trainbench.results.csv_cells import neutral_frame

_PREFIX = "trainbench: coreutil"


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="ncu --csv (details or --page raw) or nvprof CSV")
    parser.add_argument("--json", action="store_true", help="one JSON object per file instead of the four lines")
    parser.add_argument("--per-kernel", type=whole_number(1), metavar="N",
                        help="also the N kernels with the largest weight share, with their utilizations")
    parser.add_argument("--csv", type=path_text, metavar="OUT", help="also write one row per file to the CSV file OUT")


_DESCRIPTION = "Average FMA, FP16, Tensor Core and SFU utilization of Nsight Compute (or nvprof) CSV profiles."


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``coreutil`` subcommand to the project's CLI."""
    parser = subparsers.add_parser("coreutil", help="core utilization from ncu/nvprof CSVs", description=_DESCRIPTION)
    _add_options(parser)
    parser.set_defaults(run=run)


def build_parser(prog: str = "coreutil") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description=_DESCRIPTION)
    _add_options(parser)
    return parser


def _error(subject: str, problem: str) -> None:
    print(f"{_PREFIX}: {printable_line(subject)}: {printable_line(problem)}", file=sys.stderr)


def _pct(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.5f} %"


def format_text(result: CoreUtilization, per_kernel: int | None = None) -> list[str]:
    """The four lines (plus the nvprof note and the per-kernel table when asked for)."""
    lines = [f"# {result.note}"] if result.note else []
    lines += [f"{core}\t{_pct(result.cores[core].value)}" for core in CORES]
    if per_kernel:
        lines.append(f"# top {per_kernel} kernels by share of the weight ({result.weight})")
        lines.append("\t".join(["share", "launches", *CORES, "kernel"]))
        for kernel, row in result.per_kernel.head(per_kernel).iterrows():
            cells = [_pct(row["weight_share"]), str(int(row["launches"])), *(_pct(row[c]) for c in CORES)]
            lines.append("\t".join([*cells, printable_line(str(kernel))]))
    return lines


def _analyze(path: str) -> CoreUtilization | None:
    try:
        return analyze_file(path)
    except UsageError as error:
        _error(path, str(error))
    except Exception as error:  # noqa: BLE001 -- a profile must never end in a traceback; report and go on
        _error(path, f"cannot analyse: {type(error).__name__}: {error}")
    return None


def _write_csv(out: str, results: Sequence[CoreUtilization]) -> int:
    try:
        with open(out, "x", encoding="utf-8", newline="") as handle:  # "x": results are never overwritten
            neutral_frame(summary_frame(results)).to_csv(handle, index=False)
    except FileExistsError:
        _error(out, "already exists; not overwritten (choose another --csv name)")
        return EXIT_USAGE
    except OSError as error:
        _error(out, f"cannot write the CSV: {os_reason(error)}")
        return EXIT_USAGE
    return 0


def run(args: argparse.Namespace) -> int:
    """Analyse every file; 0 when all succeeded, 2 when any failed (the others are still reported)."""
    status = 0
    results = []
    for path in args.files:
        result = _analyze(path)
        if result is None:
            status = EXIT_USAGE
            continue
        results.append(result)
        if args.json:
            lines = [json.dumps(result.to_json(args.per_kernel), allow_nan=False)]
        else:
            header = [f"==> {printable_line(path)} <=="] if len(args.files) > 1 else []
            lines = header + format_text(result, args.per_kernel)
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    if args.csv and _write_csv(args.csv, results):
        status = EXIT_USAGE
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """The thin script's entry point: its own parser with only the coreutil options."""
    try:
        return run(build_parser().parse_args(argv))
    except UsageError as error:
        print(f"trainbench: {printable_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
