"""Case tables for the study commands (campaign, model, report, timeline, variability, the launcher's bounds).

Each module here holds one command's (or one area's) table: ``build(world)`` makes the inputs its cases point at,
inside ``world`` (a folder of its own per module, made once per test session), and ``CASES``, a list of
``StudyCase``. ``tests/test_study_commands.py`` runs every case in-process through the CLI's own ``main`` and checks
the promise the case names. "{w}" in a case's argv and fragments stands for the module's world folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StudyCase:
    """One input for one command and what must come of it.

    ``exit`` 2: a refusal, exactly one stderr line starting ``trainbench:`` that holds every ``named`` fragment, no
    traceback, and no file in the world created, changed or removed. Any other ``exit``: the command ran; ``named``
    fragments must then be in stdout + stderr, ``absent`` ones must not, and no traceback or Python warning may leak
    to stderr. ``writes``: the command may create files (never change or remove existing ones) although it refused
    or succeeded; ``False`` for a refusal means nothing at all is written.
    """

    name: str
    argv: tuple[str, ...]
    named: tuple[str, ...] = ()
    exit: int = 2
    absent: tuple[str, ...] = ()
    writes: bool = False
    kind: str = ""  # the class of failure it holds: silent-wrong, overwrite, resources, traceback, ...
    env: dict[str, str] = field(default_factory=dict)  # environment variables set while it runs
    slow: bool = False  # it starts a worker or takes 2 s or more: left out of ``make test-fast``
