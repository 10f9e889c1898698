"""Process pools for the data commands: one task per shard (or per class), results as they complete.

Work is spread over processes, not threads: decoding, hashing and checksums hold the GIL. Workers are forked
(no interpreter start, no re-import) unless TensorFlow is loaded in this process, whose threads do not survive a
fork. With one worker everything runs in this process, so a traceback-free error path stays the same.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.context import BaseContext
from multiprocessing.sharedctypes import Synchronized
from typing import Any, TypeVar

Task = TypeVar("Task")
Result = TypeVar("Result")


def default_workers() -> int:
    """The cores this process may run on (a container's CPU set, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def context() -> BaseContext:
    forkable = "fork" in multiprocessing.get_all_start_methods() and "tensorflow" not in sys.modules
    return multiprocessing.get_context("fork" if forkable else "spawn")


def counter() -> Synchronized:  # type: ignore[type-arg]
    """A count shared with the workers, for the progress bar."""
    return context().Value("q", 0)


def run_parallel(function: Callable[[Task], Result], tasks: Sequence[Task], workers: int,
                 initializer: Callable[..., None] | None = None, initargs: tuple[Any, ...] = ()) -> Iterator[Result]:
    """``function`` over ``tasks`` on ``workers`` processes, each set up by ``initializer(*initargs)``.

    Results come in completion order; a task's exception is raised here, and the pool is ended when the caller
    stops iterating (an error, Ctrl-C), so no worker outlives the command.
    """
    if workers <= 1 or len(tasks) <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield from map(function, tasks)
        return
    with context().Pool(min(workers, len(tasks)), initializer, initargs) as pool:
        yield from pool.imap_unordered(function, tasks, chunksize=1)
