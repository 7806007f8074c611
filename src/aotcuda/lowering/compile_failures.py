"""The errors of a compile that failed for want of something the system gives: room, a file-size limit, open files.

Why: torch's own were `RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 128 vs 0` (a full
disk under the package), `InductorError: OSError: [Errno 28] No space left on device` (a full cache folder) and a
bare "C++ compile error" (``ulimit -f``), naming no folder and no fix (the process breaker, 2026-12-06).
"""

from __future__ import annotations

import os

from aotcuda.errors import PackageError, clipped, one_line
from aotcuda.lowering.archive_writer import ArchiveWriteError
from aotcuda.os_errors import RESOURCES, chained, os_error_advice, os_error_in, write_failure_advice


def compile_resource_failure(exc: Exception) -> PackageError | None:
    """The error of a compile that ran out of something the system gives (a full or read-only cache folder, too many
    open files): Inductor's own was `InductorError: OSError: [Errno 28] No space left on device`, naming no folder
    (the process breaker, 2026-12-06). A C++ compile error under a file-size limit (``ulimit -f``: the compiler's
    output cut, a bare "C++ compile error") gets a note that names the limit; other errors are left as they are."""
    import resource

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    error = os_error_in(exc)
    if error is not None and error.errno in RESOURCES:
        where = os.path.dirname(os.fsdecode(error.filename)) if isinstance(error.filename, (str, bytes)) \
            else cache_dir()
        advice = os_error_advice(error, where, elsewhere="set TORCHINDUCTOR_CACHE_DIR (or TMPDIR) to a folder with room")
        return PackageError(f"the compile failed: {error.strerror or error} (Inductor's cache folder is "
                            f"{clipped(cache_dir(), 200)!r}); {advice}, then lower again")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if chained(exc, "CppCompileError") is not None and limit != resource.RLIM_INFINITY:
        exc.add_note(f"This process's file-size limit (ulimit -f) is {limit} bytes: the compiler stops at a file "
                     "larger than that. Raise it (ulimit -f unlimited) and lower again.")
    return None


def package_unwritten(building: str, exc: ArchiveWriteError) -> PackageError:
    """The error of a package torch's writer could not write: the folder it goes to (the private build folder's,
    ``_written_on_success``), torch's error, and the advice its errno calls for."""
    folder = os.path.dirname(os.path.dirname(building))
    return PackageError(f"could not write the package into {folder!r}: {clipped(one_line(exc), 300)}; "
                        f"{write_failure_advice(exc, folder)}, then lower again")


def check_room(ep, building: str) -> None:
    """PackageError before the compile where the package's folder (the private build folder's, ``building`` being the
    package path in it) has less free space than the program's weights, which the package holds: the minutes of compile
    ended in a write that failed (the process breaker, 2026-12-06). Weights sharing storage count once; the library
    and metadata come on top, so a folder that passes may still fill (then ``package_unwritten``)."""
    import shutil

    import torch

    folder = os.path.dirname(os.path.dirname(building))
    storages = {}
    for value in (*ep.state_dict.values(), *ep.constants.values()):
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            storage = value.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    weights = sum(storages.values())
    try:
        free = shutil.disk_usage(folder).free
    except OSError:  # not known: the write says what it finds
        return
    if weights > free:
        raise PackageError(f"will not compile: the package's folder {clipped(folder, 200)!r} has {free:,} bytes free, "
                           f"less than the program's weights ({weights:,} bytes), which the package holds; free space "
                           "there or write the package elsewhere (package_path; -o on the command line); nothing was "
                           "compiled")
