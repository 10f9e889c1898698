"""Entry point of ``trainbench`` and ``python -m trainbench``."""

from __future__ import annotations

import importlib
import os
import signal
import sys
from types import FrameType

from trainbench import __version__
from trainbench.cli.options import Parser
from trainbench.errors import EXIT_USAGE, UsageError

# One module per command under trainbench.cli; each has add_parser(subparsers) setting the default ``run``.
COMMAND_MODULES = (
    "throughput",
    "compare_cmd",
    "train",
    "data_cmd",
    "coreutil_cmd",
    "input_bench_cmd",
    "profile_cmd",
)


def build_parser() -> Parser:
    parser = Parser(prog="trainbench", description="ResNet-50 training benchmarks for TensorFlow and PyTorch.")
    parser.add_argument("--version", action="version", version=f"trainbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"trainbench.cli.{name}").add_parser(subparsers)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's time limit, ``kill``, ``timeout``) handled as a Ctrl-C: results so far are kept."""


_MAIN_PID = os.getpid()  # the CLI's own process; forked children inherit the handler but not this identity


def _terminated(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _MAIN_PID:
        # A forked helper (a multiprocessing pool worker, which its pool ends with SIGTERM) inherits this handler:
        # it must die as it would have without it, silently.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except UsageError as error:
        print(f"trainbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as interruption:
        print("trainbench: interrupted; results written so far are kept", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(interruption, Terminated) else signal.SIGINT)
