"""A lowering's weights kept from other users in Inductor's cache folder.

Why: AOTInductor links a program's weights into the library it builds in Inductor's cache folder (the
``<hash>.wrapper.so`` of a folder of the program's files; past 2 GB a blob beside it) and leaves them there once the
package is written. torch makes its default cache folder (``/tmp/torchinductor_<user>``) with ``os.makedirs`` under the
process's umask, and every folder and file in it alike: 0755 folders and a 0755 library under the usual umask 022,
so any local user could copy the weights of every model lowered from the library's data (fixopen, 2026-12-07: a
Linear's weights, 1234.5678 in every element, read back from ``<cache>/c<hash>/c<hash>.wrapper.so`` by a scan of the
cache for their bytes; nothing else in it held them).

So torch's default folder is made 0700 before each compile (``cache_folders.check_cache_folders``, once the folder is
known to be this user's): nothing in it is reachable by others while the compile writes, and this user's later
compiles read it as before (Inductor's cache is per user). A folder the user chose (``TORCHINDUCTOR_CACHE_DIR``) keeps
its mode; there the folder of the program's own files loses other users' access once the compile is done
(``make_program_files_private``), and its group's too unless the chosen folder is one its group may write (a team's
shared cache, where another member lowering the same model writes into the same ``c<hash>`` folder: review,
2026-12-07, the second member's compile failed with PermissionError where that folder had been made 0700); a
setgid bit stays. Make such a folder 0700 yourself to keep the weights private while the compile runs too.

A compile that fails or is interrupted after the library is linked (a full disk while the package is written, Ctrl-C)
leaves it there as well, with no package to name its folder (review39a: 0755, the weights readable by every local
user). So the compile runs inside ``program_files_kept_private``: on any outcome but success, every folder of a
program's files that the compile made or changed in the cache is made private by the same rule
(``make_folders_written_since_private``).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
import zipfile
from collections.abc import Iterator
from typing import NamedTuple

# Where an AOTInductor package keeps the files its compile wrote in Inductor's cache (the library, sources, blobs).
_AOTI_FILES = "/data/aotinductor/"


def make_private(folder: str, keep_group: bool = False) -> bool:
    """Take others' access to ``folder`` away, and its group's unless ``keep_group``, where it is a folder of this
    user's (not a link) that grants some; its setuid, setgid and sticky bits stay. True when it changed the mode.
    Best effort: a folder it cannot open or change is left as it is."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        status = os.fstat(descriptor)
        taken = 0o007 if keep_group else 0o077
        if status.st_uid != os.geteuid() or not status.st_mode & taken:
            return False
        os.fchmod(descriptor, stat.S_IMODE(status.st_mode) & ~taken)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def make_default_cache_private(inductor: str) -> None:
    """Make Inductor's cache folder 0700 where it is torch's default (``$TMPDIR/torchinductor_<user>``), not one the
    user chose."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    if os.path.realpath(inductor) == os.path.realpath(default_cache_dir()):
        make_private(inductor)


def make_program_files_private(package_path: str) -> list[str]:
    """Take other users' access away from each folder of Inductor's cache that holds a file the package at
    ``package_path`` was built from (its library, with the weights in it), and its group's unless the cache folder
    itself is one its group may write (a shared cache: see the module docstring); returns the folders it changed.

    The folder is the one the package's kernel sources name (``program_folders``); only where they name none that
    passes (a torch that writes no such line, a damaged package) is every folder of the cache looked into."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    try:
        root = cache_dir()
        folders = program_folders(package_path, root)
        if folders is None:
            names = _file_names(package_path)
            folders = [entry.path for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False)
                       and any(os.path.lexists(os.path.join(entry.path, name)) for name in names)]
        shared = _a_teams_cache(root)
    except (OSError, zipfile.BadZipFile):  # the check step names a package it cannot read
        return []
    return [folder for folder in folders if make_private(folder, keep_group=shared)]


def _a_teams_cache(root: str) -> bool:
    """Whether Inductor's cache folder ``root`` is one its group may write: a team's shared cache, whose members reuse
    its folders, so that the folders made private there keep their group's access."""
    return bool(os.stat(root).st_mode & stat.S_IWGRP)


@contextlib.contextmanager
def program_files_kept_private(package_path: str) -> Iterator[None]:
    """Around the compile that writes the package at ``package_path``: once it succeeds, the folder of the program's
    files in Inductor's cache is made private (``make_program_files_private``, found from the package); where it
    raises, KeyboardInterrupt included, there is no package to find it from, so every program's folder of the cache
    that the compile made or changed is (``make_folders_written_since_private``). A failure of that step never takes
    the place of the compile's own error: it is added to it as a note."""
    before = _cache_before_the_compile()
    try:
        yield
    except BaseException as exc:
        try:
            if before is not None:
                make_folders_written_since_private(before)
        except Exception as failure:  # noqa: BLE001 - any error here is told beside the compile's, never instead
            exc.add_note(f"The folders this compile wrote in Inductor's cache folder {before.root!r} were not made "
                         f"private ({type(failure).__name__}: {failure}): the library there holds the program's "
                         f"weights; take other users' access to them away yourself (chmod go-rwx "
                         f"{os.path.join(before.root, 'c*')}; o-rwx alone in a team's shared cache).")
        raise
    make_program_files_private(package_path)


class CacheBefore(NamedTuple):
    """Inductor's cache folder as a compile found it."""
    root: str
    names: frozenset[str]  # its entries' names
    since_ns: int  # when the compile began (the clock's time, less _CLOCK_SLACK_NS)


# How far a file system's times may lag the clock: the kernel stamps them from a clock a tick behind (up to 10 ms),
# and some file systems keep whole or even seconds (FAT: 2 s). A folder of this user's changed that long before the
# compile is made private too, which costs its owner nothing.
_CLOCK_SLACK_NS = 3_000_000_000


def _cache_before_the_compile() -> CacheBefore | None:
    """Inductor's cache folder now, or None where it cannot be made (the compile then writes nothing there). Its names
    only, read without a look at any entry (0.4 ms for 400 folders), since this runs before every compile."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    since_ns = time.time_ns() - _CLOCK_SLACK_NS
    try:
        root = cache_dir()
    except OSError:
        return None
    try:
        with os.scandir(root) as entries:
            names = frozenset(entry.name for entry in entries)
    except OSError:
        names = frozenset()  # every folder found later counts as the compile's
    return CacheBefore(root, names, since_ns)


def make_folders_written_since_private(before: CacheBefore) -> list[str]:
    """Make private, by ``make_private``'s rule (this user's folders only, no link followed; a team's cache keeps its
    group's access), each folder of a program's files (one holding a wrapper source) in Inductor's cache that was not
    there ``before`` or was written into since (its modification time, read without following a link); returns those
    it changed. A new name counts whatever the clock says, so a clock set back, or a file server's ahead, misses none of
    the folders the compile made.

    Only a program's folder, as after a success: torch writes its wrapper source there first, before the kernels, the
    weights and the library (codecache.py ``AotCodeCompiler.compile``), while the cache's other folders (``locks``,
    kernel folders such as ``3g``) are shared by every compile, another user's too in a cache trusted with
    AOTCUDA_TRUST_SHARED_FOLDERS, whose compiles a 0700 ``locks`` folder would stop."""
    shared = _a_teams_cache(before.root)
    changed = []
    with os.scandir(before.root) as entries:
        for entry in entries:
            if entry.name in before.names and not _changed_since(entry, before.since_ns):
                continue
            if (entry.is_dir(follow_symlinks=False) and _holds_a_wrapper_source(entry.path)
                    and make_private(entry.path, keep_group=shared)):
                changed.append(entry.path)
    return changed


def _holds_a_wrapper_source(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(entry.name.endswith(_WRAPPER) for entry in entries)
    except OSError:
        return False


def _changed_since(entry: os.DirEntry, since_ns: int) -> bool:
    try:
        status = entry.stat(follow_symlinks=False)
    except OSError:  # gone since the listing
        return False
    return status.st_mtime_ns >= since_ns  # a folder's changes when an entry is made, renamed or removed in it


def program_folders(package_path: str, root: str) -> list[str] | None:
    """The folders of Inductor's cache folder ``root`` the package's files were compiled in, from the line torch opens
    each ``<hash>.kernel.cpp`` with (``// Triton kernels are embedded as comments in <folder>/<hash>.wrapper.cpp``,
    torch 2.6 on: AOTInductor's folder is the hash of the graph's code, which no file name of the package gives), so
    that the cache's other folders are not looked into (fix39: 6 ms for 409 folders after every compile). None where
    any such line is missing, or names anything but a plain entry of ``root`` holding that wrapper source: the caller
    then looks into every folder. A name taken from the package is never joined to ``root`` unchecked, so no ``..``,
    ``/`` or absolute path there reaches a folder outside it (and ``make_private`` follows no link)."""
    with zipfile.ZipFile(package_path) as package:
        kernels = [info for info in package.infolist()
                   if _AOTI_FILES in info.filename and info.filename.endswith(".kernel.cpp")]
        lines = []
        for info in kernels:
            with package.open(info) as source:
                lines.append(source.readline(_MAX_NOTE))
    folders: set[str] = set()
    for line in lines:
        folder = _folder_named(line, root)
        if folder is None:
            return None
        folders.add(folder)
    return sorted(folders) or None


# The first line of each kernel source AOTInductor writes, naming its wrapper source in the program's folder.
_WRAPPER_NOTE = b"// Triton kernels are embedded as comments in "
_MAX_NOTE = 4096
_WRAPPER = ".wrapper.cpp"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")  # torch's folder and file hashes: "c" and base32


def _folder_named(line: bytes, root: str) -> str | None:
    """The folder of ``root`` that ``line`` names as holding the wrapper source, if it is a plain entry of ``root``
    (no link: lstat) that holds that source; else None."""
    if not line.startswith(_WRAPPER_NOTE) or not line.endswith(b"\n"):
        return None
    try:
        wrapper = line[len(_WRAPPER_NOTE):-1].decode()
    except UnicodeDecodeError:
        return None
    folder, wrapper_name = os.path.split(wrapper)
    name = os.path.basename(folder)
    if (not _PLAIN_NAME.fullmatch(name) or os.path.join(root, name) != folder
            or not wrapper_name.endswith(_WRAPPER) or not _PLAIN_NAME.fullmatch(wrapper_name[:-len(_WRAPPER)])):
        return None
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode) or not os.path.lexists(os.path.join(folder, wrapper_name)):
            return None
    except OSError:
        return None
    return folder


def _file_names(package_path: str) -> set[str]:
    """The names of the files the package holds from its compile (``data/aotinductor/``), without their folders."""
    with zipfile.ZipFile(package_path) as package:
        return {name.rsplit("/", 1)[-1] for name in package.namelist() if _AOTI_FILES in name} - {"", ".", ".."}
