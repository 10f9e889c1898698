"""Shared by the profiler stand-ins: record the call, split a profiler's own options from the wrapped command.

Environment: STANDIN_RECORD (a folder): each call appends its argv as one JSON line to <folder>/<tool>.jsonl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def record(tool: str, argv: list[str]) -> None:
    folder = os.environ.get("STANDIN_RECORD")
    if folder:
        with open(Path(folder) / f"{tool}.jsonl", "a", encoding="utf-8") as calls:
            calls.write(json.dumps(argv) + "\n")


def split_command(argv: list[str], takes_value: set[str]) -> tuple[dict[str, str], list[str]]:
    """(options, command): ``--name value`` and ``--name=value`` options (flags map to ""), then from the first
    word that is not an option on, the program the profiler runs."""
    options: dict[str, str] = {}
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        name, has_value, value = argv[position].partition("=")
        if not has_value and name in takes_value:
            position += 1
            value = argv[position]
        options[name] = value
        position += 1
    return options, argv[position:]


def run_wrapped(command: list[str]) -> subprocess.Popen[bytes]:
    """Start the profiled program with this process's stdout and stderr (the worker's log), as profilers do."""
    if not command:
        print("standin: no application to profile", file=sys.stderr)
        raise SystemExit(1)
    return subprocess.Popen(command)


def window_of(command: list[str]) -> list[int]:
    """The iterations the worker profiles, from the config file the sweep gave it (``... worker CONFIG RESULT``)."""
    config = json.loads(Path(command[-2]).read_text())
    window = config["profile"]
    return list(range(window["start_iteration"], window["start_iteration"] + window["iterations"]))
