"""Opening a file that must be a regular file, so that nothing another process puts at its path can stall us.

A path checked (``os.path.isfile``) and then opened again by name may name something else by the time it is
opened: another process can rename a FIFO over it (``open`` then waits for a writer for ever) or a link to a
device (``/dev/zero``: read until memory runs out). So the file is opened once, with ``O_NONBLOCK`` (opening a
FIFO returns at once; the flag does nothing to a regular file's reads), checked on the open descriptor, and
every later read goes through that descriptor: what was checked is what is read. The path is also checked
before it is opened, since opening some devices acts (a tape rewinds, a terminal becomes the controlling one).
This module imports neither torch nor the rest of aotcuda: the package format and the CLI's inputs share it.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class NotARegularFileError(OSError):
    """The path names something other than a regular file; ``kind`` says what ("a FIFO (named pipe)",
    "a directory", ...)."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path, self.kind = path, kind


def _check(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotARegularFileError(path, next((name for test, name in _KINDS if test(mode)), "not a regular file"))


def open_regular(path: str) -> BinaryIO:
    """``path`` opened for binary reading, checked to be a regular file before the open and on the descriptor.

    Raises NotARegularFileError (an OSError) for a FIFO, device, socket or directory, FileNotFoundError and
    the other OSErrors of ``os.stat`` / ``os.open`` as they come."""
    _check(path, os.stat(path).st_mode)
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    handle = os.fdopen(descriptor, "rb")
    try:
        _check(path, os.fstat(descriptor).st_mode)
    except BaseException:
        handle.close()
        raise
    return handle
