"""Files aotcuda writes never take descriptor 0, 1 or 2.

A process started with its standard descriptors closed (a daemon's, ``2>&-``, a supervisor that closes them) gets
the lowest free number for each file it opens, so the first files aotcuda opened for writing took 0, 1 or 2: the
extraction of a package's library among them. Whatever the process, or a library in it, writes to "stdout" or
"stderr" in C (``printf``, ``std::cerr``, a log line of another thread) then goes into that file while it is open:
into the shared library that load then maps (break39, 2026-12-07). ``opener`` moves such a descriptor to a number
above 2 before anything is written, and empties the file again where it was opened to be written from its start.
This module imports nothing of aotcuda: the archive reader and the library folders share it.
"""

from __future__ import annotations

import fcntl
import os
import stat

FIRST_FREE = 3  # the first number no standard stream has
_TMPFILE = getattr(os, "O_TMPFILE", 0)  # an unnamed new file (Linux); it includes O_DIRECTORY's bit


def opener(path, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that never returns 0, 1 or 2, also as ``open(..., opener=opener)`` (mode 0o666 less the umask).

    Another thread's write to the standard stream that had that number, made between this open and the move,
    lands in the file and moves its offset (the file description is shared until the low number is closed): a
    regular file opened to be written whole (O_TRUNC, O_EXCL or O_TMPFILE) is emptied and rewound after the move,
    when nothing else holds it. Raises the OSErrors of ``os.open`` and ``fcntl`` as they come (the descriptor
    opened is closed then)."""
    descriptor = os.open(path, flags, mode)
    if descriptor >= FIRST_FREE:
        return descriptor
    try:
        # os.open makes its descriptors close-on-exec whatever the flags (PEP 446): the move keeps that
        inheritable = os.get_inheritable(descriptor)
        moved = fcntl.fcntl(descriptor, fcntl.F_DUPFD if inheritable else fcntl.F_DUPFD_CLOEXEC, FIRST_FREE)
    finally:
        os.close(descriptor)
    new = flags & (os.O_TRUNC | os.O_EXCL) or _TMPFILE and flags & _TMPFILE == _TMPFILE
    if new and flags & (os.O_WRONLY | os.O_RDWR):
        try:
            if stat.S_ISREG(os.fstat(moved).st_mode):  # /dev/null takes no truncate (EINVAL)
                os.ftruncate(moved, 0)
                os.lseek(moved, 0, os.SEEK_SET)
        except BaseException:
            os.close(moved)
            raise
    return moved


def fill_closed() -> None:
    """Put /dev/null on each of 0, 1 and 2 that is closed, as glibc does for a set-user-ID program, so that every file
    the process opens later (torch's and other libraries' too: Inductor's compile locks, the source and header files
    it writes, the package torch writes, a temporary file) gets a number above 2 (review39b: a lowering started with
    `2>&-` wrote 100 KB of a thread's stderr into its compile lock; fix40b: a program without standard streams that
    called ``aotcuda.lower`` had a thread's C output written into Inductor's precompiled header, and the lowering
    failed). The CLI calls it at each command's start; ``aotcuda.lower`` and ``aotcuda.load`` at their entry: a
    number that is closed is no stream of the program's, and what is written to it is lost either way.
    Python's ``sys.stdout`` and ``sys.stderr`` stay None where the process began without them.

    Safe beside other threads: /dev/null is opened where ``open`` puts it (the lowest free number) and kept only
    there, so a number another thread has just opened a file at is never replaced (a test-then-``dup2`` would).
    Where /dev/null cannot be opened (a chroot without /dev), nothing is filled."""
    while True:
        try:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free number
        except OSError:
            return
        if null >= FIRST_FREE:  # 0, 1 and 2 are all open now
            os.close(null)
            return
        os.set_inheritable(null, True)  # a standard stream, as a child expects it
