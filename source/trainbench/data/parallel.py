"""Process pools for the data commands: one task per shard (or per class), results as they complete.

Work is spread over processes, not threads: decoding, hashing and checksums hold the GIL. Workers are forked
(no interpreter start, no re-import) unless TensorFlow is loaded in this process, whose threads do not survive a
fork. With one worker everything runs in this process, so a traceback-free error path stays the same.

``concurrent.futures.ProcessPoolExecutor``, not ``multiprocessing.Pool``: when a worker dies (the out-of-memory
killer's SIGKILL) the executor fails its tasks at once, where ``Pool`` replaces the worker and waits forever for
the lost task. Workers ignore Ctrl-C (the terminal sends SIGINT to the whole process group): the parent alone
reports it and then ends them, so no worker prints a traceback, and none outlives the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from typing import Any, TypeVar

from trainbench.errors import UsageError, os_reason

Task = TypeVar("Task")
Result = TypeVar("Result")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkerDied(UsageError):
    """A worker process ended without finishing its task (killed, or crashed); the message says how it ended."""


def default_workers() -> int:
    """The cores this process may run on (a container's CPU set, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def context(preload: tuple[str, ...] | None = None) -> BaseContext:
    """Fork, unless this process has loaded TensorFlow: forked children of it hang (its threads' locks are copied
    held). Then spawn; or, given the modules the children import (``preload``), a fork server: a fresh interpreter
    that never loads TensorFlow imports them once and forks the children, where spawned ones would each import them
    again (torch: seconds). Its children's parent is the server, so the pools here, whose workers check their parent,
    spawn. One server per process: the first caller's ``preload`` is the one it keeps."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and "tensorflow" not in sys.modules:
        return multiprocessing.get_context("fork")
    if preload is None or "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(["__main__", *preload])
    return server


def counter() -> Synchronized:
    """A count shared with the workers, for the progress bar."""
    try:
        return context().Value("q", 0)
    except OSError as error:  # its memory is a file in /dev/shm (or the temporary folder), which can be full
        raise UsageError(f"/dev/shm: cannot share memory with the worker processes ({os_reason(error)}); "
                         "is it (or the temporary folder) full?") from None


def run_parallel(function: Callable[[Task], Result], tasks: Sequence[Task], workers: int,
                 initializer: Callable[..., None] | None = None, initargs: tuple[Any, ...] = ()) -> Iterator[Result]:
    """``function`` over ``tasks`` on ``workers`` processes, each set up by ``initializer(*initargs)``.

    Results come in completion order; a task's exception is raised here, a dead worker is ``WorkerDied``. When the
    caller stops iterating early (an error, Ctrl-C) the workers are ended at once, their tasks abandoned.
    """
    if workers <= 1 or len(tasks) <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield from map(function, tasks)
        return
    earlier = set(multiprocessing.active_children())
    executor = ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context(), initializer=_start_worker,
                                   initargs=(initializer, initargs, os.getpid()))
    pool: set[BaseProcess] = set()
    finished = broken = False
    try:
        futures: list[Future[Result]] = [executor.submit(function, task) for task in tasks]
        pool = set(multiprocessing.active_children()) - earlier  # every worker is started by the first submits
        for future in as_completed(futures):
            yield future.result()
        finished = True
    except BrokenProcessPool:
        broken = True
    finally:
        _stop(executor, pool, finished)
    if broken:  # read the exit codes only now: the executor's own thread may have reaped the dead worker
        raise WorkerDied(_how_it_died(pool))


def _stop(executor: ProcessPoolExecutor, pool: set[BaseProcess], finished: bool) -> None:
    if not finished:  # the workers' tasks are abandoned: end them now rather than wait for their shards
        for process in pool:
            with contextlib.suppress(OSError):
                process.terminate()  # SIGTERM: a forked worker has the default disposition (cli/main.py)
    executor.shutdown(wait=True, cancel_futures=True)
    for process in pool:
        process.join()


def _how_it_died(pool: set[BaseProcess]) -> str:
    """The first unexpected end among the workers (the executor ends the others with SIGTERM afterwards)."""
    codes = [process.exitcode for process in pool if process.exitcode not in (None, 0, -signal.SIGTERM)]
    if not codes:
        return "a worker process ended unexpectedly"
    code = codes[0]
    if code < 0:
        name = signal.Signals(-code).name
        hint = " (out of memory? the kernel's OOM killer sends it; see dmesg)" if -code == signal.SIGKILL else ""
        return f"a worker process was killed by {name}{hint}"
    return f"a worker process exited with status {code}"


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple[Any, ...], parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to report; it ends the workers
    _die_with_parent(parent)
    if initializer is not None:
        initializer(*initargs)


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (even by SIGKILL): an orphaned worker would wait for tasks forever."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
