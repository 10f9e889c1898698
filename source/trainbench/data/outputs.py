"""What the data commands write: one writer per output folder, file names shown safely (files are replaced
atomically by ``trainbench.results.files.write_text_atomic``).

- ``exclusive_folder``: an ``fcntl.flock`` on a lock file in the output folder, held for the whole run, so a second
  conversion into the same folder is refused with one line instead of racing the first (the kernel drops the lock
  when its holder dies, however it dies, so a killed run never blocks the next one).
- ``printable``: file names are bytes on Linux; one that is not UTF-8 arrives as a str with surrogate escapes,
  which cannot be written to a UTF-8 file or terminal. Its bad bytes are shown as ``\\xNN``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from trainbench.errors import UsageError, os_reason

LOCK_FILE = ".trainbench.lock"


def printable(text: str) -> str:
    """``text`` with the bytes of a non-UTF-8 file name as ``\\xNN`` (the name itself where it is UTF-8)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def outside_inputs(output: Path, inputs: Iterable[Path]) -> None:
    """UsageError when the output folder is an input folder or inside one that is scanned for input (text folders,
    ImageNet's train/ and val/; COCO reads only the images its annotations name): its shards would be read as
    input by the next run (and that run refused), so it is refused before anything is read or written."""
    try:
        resolved = output.resolve()
    except (OSError, RuntimeError):  # a link loop on the way: the write names it, in its own line
        return
    for source in inputs:
        try:
            folder = source.resolve()
        except (OSError, RuntimeError):  # a link loop: the input's scan names it
            continue
        if folder.is_dir() and (resolved == folder or folder in resolved.parents):
            raise UsageError(f"--output {printable(str(output))} is inside the input folder "
                             f"{printable(str(source))}: its shards would become input; choose an --output outside it")


@contextlib.contextmanager
def exclusive_folder(folder: Path, command: str) -> Iterator[None]:
    """Hold ``folder``'s lock while the block runs; UsageError when another process holds it."""
    path = folder / LOCK_FILE
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise UsageError(f"{path}: cannot create the lock file ({os_reason(error)})") from None
    try:
        if _lock(descriptor):
            with contextlib.suppress(OSError):  # the holder's pid is for the refusal message only (a full disk)
                os.ftruncate(descriptor, 0)
                os.write(descriptor, f"{os.getpid()}\n".encode())
        else:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
            raise UsageError(f"{folder}: another {command} (process {holder or 'unknown'}) is writing into this "
                             "folder; wait for it to end, or choose another --output")
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _lock(descriptor: int) -> bool:
    """False when another process holds the lock; True when taken (or when the file system has no locks)."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # no lock support (some network file systems): go on unguarded rather than refuse to work
        pass
    return True
