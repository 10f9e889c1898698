"""The one argparse parser class of the command line, for ``trainbench`` (cli/main.py) and the thin coreutil script
(cli/coreutil_cmd.py). It imports nothing of the project but errors.py, so any command module can use it."""

from __future__ import annotations

import argparse
from typing import NoReturn

from trainbench.errors import UsageError

PROGRAM = "trainbench"


class Parser(argparse.ArgumentParser):
    """argparse whose errors are UsageErrors: one line on stderr and exit 2, like every other bad input (argparse
    would print its usage block and exit itself)."""

    def error(self, message: str) -> NoReturn:
        # The error handlers print "trainbench: " before every UsageError: name what follows the program, the
        # subcommand ("throughput: ...", "data convert: ..."), or the thin script's own name ("coreutil: ...").
        words = self.prog.split(" ")
        name = " ".join(words[1:] if words[0] == PROGRAM else words)
        raise UsageError(f"{name}: {message}" if name else message)
