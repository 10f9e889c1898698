"""Errors that reach the user as one line on stderr and exit status 2, never as a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input the user can fix: printed as ``trainbench: <message>``, exit status 2."""


EXIT_USAGE = 2


def printable_line(text: str) -> str:
    """``text`` on one line whatever it quotes (a file name with a newline in it): control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def os_reason(error: OSError) -> str:
    """Why the system refused a file operation, in its own words ("No such file or directory"); the whole error
    when it carries no reason (an OSError raised by hand)."""
    return error.strerror or str(error)
