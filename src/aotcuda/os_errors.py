"""What to do about an operating system's error, chosen by its errno: one helper for every message that names one.

Why: each place that met an OSError gave its own advice whatever the errno said: "Too many open files" got "Free
space in the temporary folder" or "check the path and its permissions", a 4 KB name got the free-space advice, a
file-size limit (``ulimit -f``) a bare "C++ compile error" (the process breaker, 2026-12-06). This module imports
neither torch nor the rest of aotcuda but errors.py.
"""

from __future__ import annotations

import errno
import os
import shutil

from aotcuda.errors import clipped

_ADVICE = {
    errno.ENOSPC: "free space in {where} or {elsewhere}",
    errno.EDQUOT: "free space in {where} (your disk quota is used up) or {elsewhere}",
    errno.EFBIG: "the file-size limit of this process (ulimit -f) is below what it writes: raise it (ulimit -f "
                 "unlimited) and start again",
    errno.EMFILE: "this process has too many files open: raise its limit (ulimit -n) and start again, or close "
                  "files it holds",
    errno.ENFILE: "the system has too many files open: close some (other processes) or raise fs.file-max",
    errno.ENAMETOOLONG: "a name in the path is too long for the file system: use a shorter path",
    errno.EROFS: "{where} is on a read-only file system: {elsewhere}",
    errno.ENOLCK: "{where} is on a file system that takes no file locks (NFS without its lock service): use a "
                  "local folder",
    errno.EISDIR: "a folder is at that path: name a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.EACCES: "check {where} and its permissions",
    errno.EPERM: "check {where} and its permissions",
}
FULL = (errno.ENOSPC, errno.EDQUOT)


def os_error_advice(exc: BaseException, where: str | None = None,
                    elsewhere: str = "use a folder with room") -> str | None:
    """The advice for OSError ``exc`` (or an error whose cause is one) by its errno, naming the folder or file
    ``where`` (a path, shown clipped) and, for a full or read-only one, the way ``elsewhere`` (``point TMPDIR to a
    folder with room``); None for an errno without advice of its own."""
    number = os_errno(exc)
    advice = _ADVICE.get(number)
    if advice is None:
        return None
    shown = repr(clipped(where, 200)) if where else "the folder written to"
    if number in FULL and where:
        room = free_space(where)
        shown += f" ({room})" if room else ""
    return advice.format(where=shown, elsewhere=elsewhere)


def temporary_folder_advice(exc: BaseException, temp: str) -> str:
    """The advice for a write into the temporary folder ``temp`` that failed with ``exc`` (load's extraction and its
    pinned library copy, run --inputs' private copy): by its errno, a full or read-only folder's way out being another
    TMPDIR; for an errno without advice of its own, the same way out."""
    return os_error_advice(exc, temp, elsewhere="point TMPDIR to a folder with room") or \
        "point TMPDIR to a folder you can write, with room"


def write_failure_advice(exc: BaseException, folder: str) -> str:
    """The advice for a write into ``folder`` that failed with ``exc``: by its errno where it has one; else (torch's C++
    writers say only "iostream error") what a write may have met: the folder's room, and this process's file-size
    limit where one is set."""
    advice = os_error_advice(exc, folder)
    if advice is not None:
        return advice
    import resource

    advice = f"free space in {clipped(folder, 200)!r} ({free_space(folder) or 'unknown free space'}) or use a folder with room"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        advice += f"; or raise this process's file-size limit (ulimit -f; it is {limit} bytes)"
    return advice


def os_errno(exc: BaseException | None) -> int | None:
    """The errno of ``exc`` or of the first OSError among its causes and contexts; None where there is none."""
    found = os_error_in(exc)
    return None if found is None else found.errno


def os_error_in(exc: BaseException | None) -> OSError | None:
    """``exc`` or the first OSError with an errno among its causes and contexts (torch's InductorError keeps the error
    it wraps as inner_exception); None where there is none."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc
        exc, seen = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__, seen + 1
    return None


# What the system ran out of (room, open files, a writable disk): an error of these is the failure itself, where a
# permission or a lock error met on the way may be one a library handled (a __context__) before it failed otherwise
RESOURCES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EROFS)


def cannot_read(path: str, exc: OSError) -> str:
    """"'PATH' cannot be read (error); advice", the path clipped (a name of 4 KB made a message of 4 KB) and the
    advice by the errno (too many open files is no matter of permissions)."""
    advice = os_error_advice(exc, path) or "check the path and its permissions"
    return f"{clipped(path, 200)!r} cannot be read ({exc.strerror or exc}); {advice}"


def chained(exc: BaseException | None, name: str) -> BaseException | None:
    """The first error in ``exc``'s chain (itself, inner_exception, causes and contexts) whose class is ``name``."""
    seen = 0
    while exc is not None and seen < 20:
        if type(exc).__name__ == name:
            return exc
        exc, seen = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__, seen + 1
    return None


def bytes_shown(count: int) -> str:
    """``count`` bytes as a message shows them: exact, a readable unit beside. Why: sizes said in GiB with two decimals
    read "extracts to 0.00 GiB, but the temporary folder ... has 0.00 GiB free" for a 1.6 MB package and a 1 MiB
    tmpfs, which left the user nothing to compare (the file-system breaker, 2026-12-06)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count:,} bytes ({count / size:.1f} {unit})"
    return f"{count:,} bytes"


def size_and_limit_shown(size: int, limit: int) -> tuple[str, str]:
    """``size`` and the ``limit`` it is over, as a refusal shows them side by side: in bytes under a limit of 1 MiB; in
    MiB from there (a whole limit without decimals: "8 MiB"), except where one decimal would read as equal or reversed
    ("is 1.5 MiB, more than the 1.5 MiB", "is 1.5 MiB, more than the 2 MiB" for a limit of 1.5 MiB, fix39): then exact
    bytes, with a unit beside (``bytes_shown``)."""
    if limit < 1 << 20:
        return f"{size} bytes", f"{limit} bytes"
    size_mib, limit_mib = round(size / (1 << 20), 1), round(limit / (1 << 20), 1)
    if size_mib <= limit_mib:
        return bytes_shown(size), bytes_shown(limit)
    return f"{size_mib:,.1f} MiB", f"{limit >> 20:,} MiB" if limit % (1 << 20) == 0 else f"{limit_mib:,.1f} MiB"


def free_space(path: str) -> str | None:
    """The room left on the file system of ``path`` (or of the nearest folder above it that exists), as text: "1.5 GiB
    free", and where no file can be made there (no inode left), that too."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        free = shutil.disk_usage(path).free
        inodes = os.statvfs(path)
    except OSError:
        return None
    # where another process used up the file system's inodes, bytes are free and no file can be made: "free space in
    # '/tmp' (50.0 MiB free)" sent the user to look for space that was there (breakproc, 2026-12-07). A file system
    # without an inode count (btrfs) says 0 files in all.
    no_files = ", but no inode free: no new file can be made there" if inodes.f_files and not inodes.f_favail else ""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if free >= size:
            return f"{free / size:.1f} {unit} free{no_files}"
    return f"{free} bytes free{no_files}"
