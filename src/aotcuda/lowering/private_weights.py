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
"""

from __future__ import annotations

import os
import re
import stat
import zipfile

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
        shared = bool(os.stat(root).st_mode & stat.S_IWGRP)  # a team's cache: its members reuse these folders
    except (OSError, zipfile.BadZipFile):  # the check step names a package it cannot read
        return []
    return [folder for folder in folders if make_private(folder, keep_group=shared)]


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
