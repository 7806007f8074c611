"""Loaded model libraries: one per distinct .so for the life of the process, each opened from a pinned copy.

Why shared: glibc cannot unload these libraries. They define C++ "unique" symbols (STB_GNU_UNIQUE: inline
statics of libstdc++ headers, e.g. std::piecewise_construct), which mark the library NODELETE, and the AOTI
runtime's thread_local last-error string registers a thread-exit destructor that pins it while the loading
thread lives. Measured: after dlclose every one stays mapped. So a load reuses the library an earlier load of
the same .so made (each load still gets its own model container, with its own weights and kernels); 200
load/close cycles of one package then map one library, not 200.

Why keyed on the file opened: a library is shared with every later load whose .so has the same SHA-256, so
the digest is computed from the very file that is dlopened (the pinned copy), never from what an archive
claims: a package cannot get another package's library, nor plant its own under another's name.

Why pinned: a shared library must keep the files it was opened from: the generated code finds them by its
own path (dladdr). A package whose weights exceed 2 GB (or lowered with aot_inductor.force_mmap_weights) has
them appended to the .so and maps them from that file at each container's creation; CPU Triton kernels are
looked up next to it. The folder of the load that first opened the library is removed when that program
closes, while later loads of the same .so keep using the library: so the library is opened from a copy of
that folder made of hard links (no bytes copied), kept until the process exits.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable

_LIBRARIES: dict[tuple[str, str], ctypes.CDLL] = {}  # (digest of the file opened, kind) -> library
_LOCK = threading.Lock()


def open_shared(so_path: str, kind: str, open_library: Callable[[str], ctypes.CDLL]) -> ctypes.CDLL:
    """The library of ``so_path``, opened with ``open_library`` from a pinned copy, or the one an earlier call
    opened from a file with the same bytes and the same ``kind`` (a label that keeps libraries apart whose
    first run sets different process-wide state, e.g. AOTI's input checks).

    Raises as ``open_library`` does.
    """
    pinned = _pin_library_folder(so_path)
    keep = False
    try:
        key = (file_digest(pinned), kind)
        with _LOCK:
            if key not in _LIBRARIES:
                _LIBRARIES[key] = open_library(pinned)
                keep = True
            return _LIBRARIES[key]
    finally:
        if not keep:
            shutil.rmtree(os.path.dirname(pinned), ignore_errors=True)


def file_digest(path: str) -> str:
    """The SHA-256 of a file's bytes."""
    hasher = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


def loaded_libraries() -> int:
    """How many model libraries this process holds (for tests and leak checks)."""
    return len(_LIBRARIES)


@functools.cache
def _pinned_root() -> str:
    """The folder that holds the pinned copies, made at the first pin and removed at exit."""
    root = tempfile.mkdtemp(prefix="aotcuda_libraries_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _pin_library_folder(so_path: str) -> str:
    """Link the .so's folder into a folder that lives as long as the process; return the .so's path
    there. Files that cannot be hard-linked (another file system) are copied."""
    with _LOCK:
        target = tempfile.mkdtemp(dir=_pinned_root())
    shutil.copytree(os.path.dirname(so_path), target, copy_function=_link_or_copy, dirs_exist_ok=True)
    return os.path.join(target, os.path.basename(so_path))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
