"""Inductor's cache folders, checked before lower() compiles: whoever can write into them writes the package.

Why: Inductor writes each generated C++ source to a file named by its hash in its cache folder and compiles
what it finds at that path (torch/_inductor/codecache.py ``write``: a file already there is used as it is,
never compared with the source it stands for), and the library it builds goes into the package. The default
folder's name is predictable (``/tmp/torchinductor_<user>``) and made with ``os.makedirs(exist_ok=True)``,
which takes a folder someone else made: another local user can make it first (after a reboot cleared /tmp),
with mode 0777, or as a link to a folder of theirs. Measured (torch 2.13, review 12): with the cache in a 0777
folder of uid 65534, that user replaced the model's wrapper source between two lowerings of one model; the
second package's library held their constructor, which ran at ``aotcuda.load``.

So each cache folder must be writable by this user (or root) alone: the folder itself, every folder above it
(one writable by others must be sticky, as /tmp is, so that nobody renames ours away), and every symbolic
link on the way (a link is owned by whoever may replace it).
"""

from __future__ import annotations

import os
import stat

from aotcuda.errors import PackageError


def check_cache_folders() -> None:
    """PackageError when a folder Inductor (or Triton, through TRITON_CACHE_DIR) compiles in can be written by
    another user, naming the folder, what is wrong with it and the fix; Inductor's own folder is made here,
    as Inductor makes it, so that what is checked is what it uses."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    try:
        inductor = cache_dir()
    except OSError as exc:  # a file, FIFO or link to one at the path: torch's makedirs raised FileExistsError
        folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
        raise PackageError(f"will not compile: Inductor's cache folder {folder!r} cannot be made "
                           f"({exc.strerror or exc}); set TORCHINDUCTOR_CACHE_DIR to a folder of your own (e.g. "
                           "mkdir -m 700 ~/.cache/aotcuda-inductor); nothing was compiled") from None
    folders = [("Inductor's cache folder", "TORCHINDUCTOR_CACHE_DIR", inductor)]
    if os.environ.get("TRITON_CACHE_DIR"):
        folders.append(("Triton's cache folder", "TRITON_CACHE_DIR", os.environ["TRITON_CACHE_DIR"]))
    for what, variable, folder in folders:
        problem = unsafe_folder(folder)
        if problem:
            raise PackageError(
                f"will not compile: {what} {folder!r} {problem}, so another user can put code there that the "
                "compile would build into the package (Inductor compiles the source it finds at a source's "
                f"path). Set {variable} to a folder of your own (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor), "
                "or remove that folder if it is not yours; nothing was compiled")


def unsafe_folder(folder: str) -> str | None:
    """Why a user other than this one (or root) could write into ``folder`` or replace it, or None. A folder
    that does not exist yet is judged by the nearest folder above it that does."""
    trusted = {os.geteuid(), 0}
    path = os.path.abspath(folder)
    for link in _links_on_the_way(path):
        owner = os.lstat(link).st_uid
        if owner not in trusted:
            return f"goes through the symbolic link {link!r} of uid {owner}"
    real = os.path.realpath(path)
    below = []
    while not os.path.lexists(real) and os.path.dirname(real) != real:
        below.append(real)
        real = os.path.dirname(real)
    checked = real if not below else None  # the folder itself, when it exists
    if checked and not os.path.isdir(checked):
        return "is not a folder"
    while True:
        info = os.stat(real)
        shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if info.st_uid not in trusted:
            return f"is owned by uid {info.st_uid}" if real == checked else \
                f"lies in {real!r}, owned by uid {info.st_uid}"
        if shared and real == checked:
            return f"is writable by other users (mode {stat.S_IMODE(info.st_mode):#o})"
        if shared and not info.st_mode & stat.S_ISVTX:
            return f"lies in {real!r}, which other users may write into and which is not sticky (mode " \
                   f"{stat.S_IMODE(info.st_mode):#o}), so they can rename it away and put their own in its place"
        if os.path.dirname(real) == real:
            return None
        real = os.path.dirname(real)


def _links_on_the_way(path: str) -> list[str]:
    """The symbolic links met while resolving ``path`` (absolute), each as the path it was met at."""
    links, done, todo, seen = [], os.sep, path.split(os.sep)[1:], 0
    while todo and seen < 40:  # the kernel's own bound on links in a path
        name = todo.pop(0)
        if name in ("", "."):
            continue
        current = os.path.dirname(done) if name == ".." else os.path.join(done, name)
        if name != ".." and os.path.islink(current):
            links.append(current)
            seen += 1
            target = os.readlink(current)
            base = os.sep if os.path.isabs(target) else done
            todo = [part for part in os.path.join(base, target).split(os.sep)[1:]] + todo
            done = os.sep
            continue
        done = current
    return links
