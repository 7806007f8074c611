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

from aotcuda.errors import PackageError
from aotcuda.shared_folders import unsafe_folder
from aotcuda.switches import flag


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
    if flag("AOTCUDA_TRUST_SHARED_FOLDERS"):  # the user vouches for everyone who may write there
        return
    for what, variable, folder in folders:
        problem = unsafe_folder(folder)
        if problem:
            raise PackageError(
                f"will not compile: {what} {folder!r} {problem}, so another user can put code there that the "
                "compile would build into the package (Inductor compiles the source it finds at a source's "
                f"path). Set {variable} to a folder of your own (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor), "
                "or remove that folder if it is not yours; nothing was compiled. Where only users you trust can "
                "write there, set AOTCUDA_TRUST_SHARED_FOLDERS=1")
