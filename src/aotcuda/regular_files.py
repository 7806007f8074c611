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

import errno
import io
import os
import stat
from typing import BinaryIO, NamedTuple

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
    # The file object opens the descriptor itself (its opener), so that it owns it from the start: opened first and
    # handed over, a signal's KeyboardInterrupt right after the file object was made (Python runs a handler as a call
    # returns) dropped that object, which closed the descriptor, and the cleanup closed the number again: a file
    # another thread had opened in between under that number was closed, and the interrupt became "Bad file
    # descriptor" (break38, 2026-12-07).
    raw = _NonBlockingFile(path, "rb", opener=_open_nonblocking)
    handle = io.BufferedReader(raw)
    try:
        _check(path, os.fstat(raw.fileno()).st_mode)
    except BaseException:
        handle.close()
        raise
    return handle


def _open_nonblocking(path, flags: int) -> int:
    """FileIO's opener: its flags (read-only, close-on-exec) with O_NONBLOCK (opening a FIFO returns at once)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))


class _NonBlockingFile(io.FileIO):
    """A file opened with O_NONBLOCK whose reads never answer None. A regular file's reads do not block, but some
    files that say they are regular do: a kernel file (``/proc/kmsg``) or one of a FUSE file system answers
    EAGAIN where it has no data yet, which FileIO turns into ``None``, and each reader then failed on it (``aotcuda
    inspect /proc/kmsg``: a raw ``TypeError: 'NoneType' object is not subscriptable``). It is an OSError here,
    which every reader already turns into a message naming the file."""

    def read(self, size: int = -1) -> bytes:
        return _read_now(super().read(size))

    def readall(self) -> bytes:
        return _read_now(super().readall())

    def readinto(self, buffer) -> int:
        return _read_now(super().readinto(buffer))


def _read_now(result):
    if result is None:
        raise BlockingIOError(errno.EAGAIN, "it has no data to read yet and would wait for some (a file of the kernel "
                              "or of a FUSE file system, not a file on disk)")
    return result


class FileVersion(NamedTuple):
    """What an open file's status says of its bytes (``file_version``). A write into the file changes its size or
    its modification time, and always its change time (ctime), which no one can set back as ``cp -p``, ``rsync
    --inplace -t`` or ``os.utime`` set the modification time back. A change time that moved with the link count
    is not a write: a rename over the path unlinks the file opened (whose bytes stay as they were), and a hard
    link made to it changes nothing of them either; nor is one that moved with the file's name (``moved``: the
    path names another file now, or none), which a rename of the file itself moves (``mv model.pt2 model.bak``
    before a new one is renamed into its place); nor one that moved with its permissions or owner (``chmod``,
    ``chown``: a deploy script's ``chmod 644`` of the package a server is loading). Times have the file system's
    granularity (a clock tick, 1-10 ms, on Linux's local file systems; a second on some others): two writes of
    one size within one tick, the first before the file was opened, look alike; so do a write that sets the
    modification time back and a chmod made at once."""

    size: int
    mtime_ns: int
    ctime_ns: int
    links: int
    mode_and_owner: tuple[int, int, int]  # st_mode, st_uid, st_gid

    def changes_to(self, later: FileVersion, moved: bool = False) -> list[str]:
        """What ``later`` (the same file's status, taken later) says was written, in words; empty for nothing.
        ``moved``: the file was renamed meanwhile (``names_file``)."""
        said = []
        if later.size != self.size:
            said.append(f"its size went from {self.size:,} to {later.size:,} bytes")
        if later.mtime_ns != self.mtime_ns:
            said.append("its modification time changed")
        if later.ctime_ns != self.ctime_ns and later.links == self.links and not moved \
                and later.mode_and_owner == self.mode_and_owner:
            said.append("its status change time changed")
        return said


def file_version(descriptor: int) -> FileVersion:
    """The status of the file open as ``descriptor`` (``os.fstat``: the opened file, whatever the path names now)."""
    info = os.fstat(descriptor)
    return FileVersion(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_nlink,
                       (info.st_mode, info.st_uid, info.st_gid))


def names_file(path: str, descriptor: int) -> bool:
    """Whether ``path`` names the file open as ``descriptor`` (False where it names another file, or none)."""
    try:
        named = os.stat(path)
    except (OSError, ValueError):
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
