"""What the ``data`` subcommands share: the --workers option, the summary line on stdout, redone shards' reasons."""

from __future__ import annotations

import argparse

from trainbench.cli.options import whole_number


def add_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=whole_number(1, 1024), metavar="N", help="processes (default: all cores)")


def workers(args: argparse.Namespace) -> int:
    """--workers, else every core this process may use."""
    from trainbench.data.parallel import default_workers

    return args.workers or default_workers()


def say(line: str) -> None:
    """A summary line on stdout; the bytes of a non-UTF-8 path as \\xNN (a strict UTF-8 stdout refuses them)."""
    from trainbench.data.outputs import printable

    print(printable(line))


def reasons(redone: dict[str, str], shown: int = 3) -> str:
    """'train-00003-of-00008: content differs from the manifest's sha256, ...' for the first few shards."""
    named = [f"{name}: {reason}" for name, reason in sorted(redone.items())[:shown]]
    return "; ".join(named) + (f"; and {len(redone) - shown} more" if len(redone) > shown else "")
