"""tests/file_seconds.py: the per-file seconds that order the files under xdist, longest first."""

from __future__ import annotations

import json

from tests.conftest import FILE_SECONDS, REPO
from tests.file_seconds import file_seconds


def test_durations_lines_sum_per_file_longest_first() -> None:
    log = "\n".join([
        "============================= slowest durations =============================",
        "12.50s call     tests/test_b.py::test_one[x-1]",
        "3.00s setup    tests/test_a.py::test_two",
        "0.25s teardown tests/test_b.py::test_one[x-1]",
        "9.00s call     tests/test_a.py::TestClass::test_three",
        "(4600 durations < 0.005s hidden.  Use -vv to show these durations.)",
    ])
    measured = file_seconds(log)
    assert measured == {"test_b.py": 12.8, "test_a.py": 12.0} and list(measured) == ["test_b.py", "test_a.py"]


def test_every_file_named_in_the_measured_order_exists() -> None:
    """A renamed or removed file left in file_seconds.json would only cost order, but it shows the table is stale."""
    measured = json.loads(FILE_SECONDS.read_text())
    assert measured and all((REPO / "tests" / name).is_file() for name in measured), \
        sorted(name for name in measured if not (REPO / "tests" / name).is_file())
