"""Write tests/file_seconds.json (seconds per test file, the order conftest runs the files in under xdist) from the
log of a run with ``--durations=0``: ``python tests/file_seconds.py LOG``."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+tests/([^:\s]+)::")


def file_seconds(log: str) -> dict[str, float]:
    seconds: Counter[str] = Counter()
    for line in log.splitlines():
        if found := LINE.match(line):
            seconds[found.group(2)] += float(found.group(1))
    return {name: round(total, 1) for name, total in seconds.most_common()}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/file_seconds.py LOG (a pytest log with --durations=0)", file=sys.stderr)
        return 2
    measured = file_seconds(Path(argv[0]).read_text(errors="replace"))
    if not measured:
        print(f"{argv[0]}: no --durations=0 lines", file=sys.stderr)
        return 2
    Path(__file__).with_name("file_seconds.json").write_text(json.dumps(measured, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
