"""errors.py: the helpers every one-line message is built with."""

from __future__ import annotations

import errno
from pathlib import Path

from trainbench.errors import os_reason, printable_line


def test_os_reason_is_the_systems_words_for_a_real_failure(tmp_path: Path) -> None:
    try:
        (tmp_path / "absent").read_text()
    except OSError as error:
        assert os_reason(error) == "No such file or directory"
    assert os_reason(OSError(errno.EACCES, "Permission denied", "x")) == "Permission denied"


def test_os_reason_falls_back_to_the_whole_error_without_a_reason() -> None:
    assert os_reason(OSError("the disk went away")) == "the disk went away"


def test_printable_line_escapes_control_characters() -> None:
    assert printable_line("a\nb\tc") == "a\\nb\\tc"
