"""Errors that reach the user as one line on stderr and exit status 2, never as a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input the user can fix: printed as ``trainbench: <message>``, exit status 2."""


EXIT_USAGE = 2
