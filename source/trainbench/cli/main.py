"""Entry point of ``trainbench`` and ``python -m trainbench``."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from types import FrameType

from trainbench import __version__
from trainbench.cli.parsing import PROGRAM, Parser
from trainbench.errors import EXIT_USAGE, UsageError, printable_line
from trainbench.workloads import all_workloads

# One module per command under trainbench.cli; each has add_parser(subparsers) setting the default ``run``.
COMMAND_MODULES = (
    "throughput_cmd",
    "compare_cmd",
    "train_cmd",
    "data_cmd",
    "coreutil_cmd",
    "input_bench_cmd",
    "profile_cmd",
    "campaign_cmd",
    "variability_cmd",
    "model_cmd",
    "report_cmd",
    "timeline_cmd",
    "workloads_cmd",
)


def build_parser() -> Parser:
    parser = Parser(prog=PROGRAM, description="Training benchmarks for TensorFlow and PyTorch: "
                    f"{', '.join(w.title for w in all_workloads())} (trainbench workloads lists them).")
    parser.add_argument("--version", action="version", version=f"{PROGRAM} {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"trainbench.cli.{name}").add_parser(subparsers)
    return parser


def parse_command_line(argv: list[str] | None) -> argparse.Namespace:
    """The parsed options; what nobody recognised is named with its subcommand (argparse leaves that to the
    top-level parser, which cannot tell whose options were meant)."""
    args, unknown = build_parser().parse_known_args(argv)
    # A command's trailing positionals (campaign's key=value overrides) that argparse left unmatched because an
    # option stood between them: argparse matches a nargs="*" positional only once.
    trailing = getattr(args, "trailing_positionals", None)
    if trailing is not None:
        words = [word for word in unknown if not word.startswith("-")]
        setattr(args, trailing, [*getattr(args, trailing), *words])
        unknown = [word for word in unknown if word.startswith("-")]
    if unknown:
        raise UsageError(f"{args.command}: unrecognized arguments: {' '.join(unknown)}")
    return args


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's time limit, ``kill``, ``timeout``) handled as a Ctrl-C: results so far are kept."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _default_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# Forked helpers (multiprocessing pool workers, which their pool ends with SIGTERM) must die on it at once, as
# before any handler: never raise in the middle of the pool's own locking. Exec'd children get the default anyway.
os.register_at_fork(after_in_child=_default_sigterm)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        args = parse_command_line(argv)
        return args.run(args)
    except UsageError as error:
        print(f"trainbench: {printable_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as interruption:
        print("trainbench: interrupted; results written so far are kept", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(interruption, Terminated) else signal.SIGINT)
