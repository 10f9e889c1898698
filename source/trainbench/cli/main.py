"""Entry point of ``trainbench`` and ``python -m trainbench``."""

from __future__ import annotations

import importlib
import sys

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


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except UsageError as error:
        print(f"trainbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("trainbench: interrupted; results written so far are kept", file=sys.stderr)
        return 130
