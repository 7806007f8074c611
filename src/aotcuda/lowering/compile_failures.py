"""The errors of a compile that failed for want of something the system gives: room, a file-size limit, open files.

Why: torch's own were `RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 128 vs 0` (a full
disk under the package), `InductorError: OSError: [Errno 28] No space left on device` (a full cache folder) and a
bare "C++ compile error" (``ulimit -f``), naming no folder and no fix (the process breaker, 2026-12-06).
"""

from __future__ import annotations

import os
import re

from aotcuda.errors import PackageError, clipped, one_line
from aotcuda.lowering.archive_writer import ArchiveWriteError
from aotcuda.os_errors import FULL, RESOURCES, chained, os_error_advice, os_error_in, write_failure_advice


def interrupt_behind(exc: Exception) -> KeyboardInterrupt | None:
    """The interrupt (Ctrl-C, SIGINT) that ``exc`` was raised while handling, with a note naming ``exc``; None where
    there is none. Why: torch's cleanup of an interrupted compile can fail in its turn, and its error replaced the
    interrupt: a SIGINT to `aotcuda lower`'s pid alone, while a compiler it had started still wrote into the
    temporary folder torch was removing, ended in `error: InductorError: OSError: [Errno 39] Directory not empty:
    '/tmp/tmp...'` and exit 1 where Ctrl-C ends in 130 (a new user's trial, nu39, 2026-12-07). What was asked was
    the interrupt; the failed cleanup is said beside it (the folder it names may be left)."""
    interrupt = chained(exc, "KeyboardInterrupt")
    if not isinstance(interrupt, KeyboardInterrupt):
        return None
    failed = os_error_in(exc) or exc  # the OSError torch's InductorError wraps names the folder
    interrupt.add_note(f"Inductor's cleanup after the interrupt failed: {type(failed).__name__}: "
                       f"{clipped(one_line(failed), 300)}")
    return interrupt


def compile_resource_failure(exc: Exception) -> PackageError | None:
    """The error of a compile that ran out of something the system gives (a full or read-only cache folder, too many
    open files): Inductor's own was `InductorError: OSError: [Errno 28] No space left on device`, naming no folder
    (the process breaker, 2026-12-06). A compile out of memory (torch's MemoryError, or the compiler's words) is named
    with its limit (``ulimit -v``) where one is set. A C++ compile error under a file-size limit (``ulimit -f``: the
    compiler's output cut, a bare "C++ compile error") gets a note that names the limit; other errors are left as
    they are."""
    import resource

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    error = os_error_in(exc)
    if error is not None and error.errno in RESOURCES:
        where = os.path.dirname(os.fsdecode(error.filename)) if isinstance(error.filename, (str, bytes)) \
            else cache_dir()
        advice = os_error_advice(error, where, elsewhere="set TORCHINDUCTOR_CACHE_DIR (or TMPDIR) to a folder with room")
        return PackageError(f"the compile failed: {error.strerror or error} (Inductor's cache folder is "
                            f"{clipped(cache_dir(), 200)!r}); {advice}, then lower again")
    compile_error = chained(exc, "CppCompileError")
    full = next((number for number in FULL if compile_error is not None and os.strerror(number) in str(compile_error)),
                None)
    if full is not None:
        # the compiler's own words: the assembler's "Fatal error: <cache>/....o: No space left on device", or gcc's
        # "error writing to /tmp/ccX.s: ..." (its own files go to TMPDIR): the folder of the file it names
        named = re.search(rf"(/[^\s:'\"]+): {re.escape(os.strerror(full))}", str(compile_error))
        where = os.path.dirname(named.group(1)) if named else cache_dir()
        advice = os_error_advice(OSError(full, os.strerror(full)), where,
                                 elsewhere="set TORCHINDUCTOR_CACHE_DIR (or TMPDIR) to a folder with room")
        return PackageError(f"the compile failed: the compiler says {os.strerror(full)} (Inductor's cache folder is "
                            f"{clipped(cache_dir(), 200)!r}); {advice}, then lower again")
    if chained(exc, "MemoryError") is not None or (compile_error is not None and any(
            words in str(compile_error) for words in _COMPILER_OUT_OF_MEMORY)):
        return PackageError(f"the compile ran out of memory ({_out_of_memory_cause(exc, compile_error)}); "
                            f"{_memory_advice()}, then lower again")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if compile_error is not None and limit != resource.RLIM_INFINITY:
        exc.add_note(f"This process's file-size limit (ulimit -f) is {limit} bytes: the compiler stops at a file "
                     "larger than that. Raise it (ulimit -f unlimited) and lower again.")
    return None


# What gcc, cc1plus and the assembler say when an allocation fails (under ``ulimit -v``, or with the memory used up)
_COMPILER_OUT_OF_MEMORY = ("virtual memory exhausted", "out of memory allocating", os.strerror(12))  # 12: ENOMEM


def _out_of_memory_cause(exc: Exception, compile_error: BaseException | None) -> str:
    """Who ran out: the C++ compiler, or torch in this process (a raw ``InductorError: MemoryError:`` with nothing
    after it, from ``bytearray(total_size)``, its copy of the weights, under ``ulimit -v`` 1 GB: the file-system
    breaker, 2026-12-06)."""
    if compile_error is not None and chained(exc, "MemoryError") is None:
        return "the C++ compiler says so"
    return "torch's compiler, in this process: a MemoryError"


def _memory_advice() -> str:
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        return (f"this process's address-space limit (ulimit -v) is {limit:,} bytes, which a compile (torch, its "
                "copies of the weights and the C++ compiler) needs more than: raise it (ulimit -v unlimited)")
    return ("free memory (other processes use it) or lower on a machine with more: the compile holds the program's "
            "weights in memory several times over")


def package_unwritten(building: str, exc: ArchiveWriteError) -> PackageError:
    """The error of a package torch's writer could not write: the folder it goes to (the private build folder's,
    ``_written_on_success``), torch's error, and the advice its errno calls for."""
    folder = os.path.dirname(os.path.dirname(building))
    return PackageError(f"could not write the package into {folder!r}: {clipped(one_line(exc), 300)}; "
                        f"{write_failure_advice(exc, folder)}, then lower again")


def check_room(ep, building: str, configs: dict | None = None) -> None:
    """PackageError before the compile where a folder it writes has less free space than the program's weights need
    there: the minutes of compile ended in a write that failed (the process breaker, 2026-12-06).

    The package's folder (the private build folder's, ``building`` being the package path in it) holds them once, in
    the package. Inductor's cache folder holds them twice: torch writes their object file, links the library that
    holds them, and removes the object after the link (codecache ``_compile_consts``; measured, torch 2.13: 4 MiB of
    weights, a 5.7 MB library). That folder was not checked: in a cache on a 2 MiB tmpfs the lowering of a
    Linear(1024, 1024) ended in a bare "C++ compile error" (the file-system breaker, 2026-12-06). Folders on one file
    system are checked for their sum. Weights sharing storage count once; the library's code and the metadata come
    on top, so a folder that passes may still fill (then ``package_unwritten``, ``compile_resource_failure``).
    ``configs``: the Inductor options of the compile, which may keep the weights out of the library's link
    (``_copies_in_cache``)."""
    import shutil

    import torch
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    storages = {}
    for value in (*ep.state_dict.values(), *ep.constants.values()):
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            storage = value.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    weights = sum(storages.values())
    if not weights:
        return
    folder, cache = os.path.dirname(os.path.dirname(building)), cache_dir()
    try:
        free, shared = shutil.disk_usage(folder).free, os.stat(folder).st_dev == os.stat(cache).st_dev
        cache_free = shutil.disk_usage(cache).free
    except OSError:  # not known: the write says what it finds
        return
    if weights > free:
        raise PackageError(f"will not compile: the package's folder {clipped(folder, 200)!r} has {free:,} bytes free, "
                           f"less than the program's weights ({weights:,} bytes), which the package holds; free space "
                           "there or write the package elsewhere (package_path; -o on the command line); nothing was "
                           "compiled")
    copies = _copies_in_cache(weights, configs or {})
    needed = copies * weights + (weights if shared else 0)
    if needed > cache_free:
        also = ", and the package's copy, on the same file system" if shared else ""
        held = ("twice: their object file and the library that holds them" if copies == 2 else
                "once: appended to the library, or in a file of their own")
        raise PackageError(f"will not compile: Inductor's cache folder {clipped(cache, 200)!r} has {cache_free:,} bytes "
                           f"free, less than the {needed:,} bytes the compile writes there (the program's weights, "
                           f"{weights:,} bytes, {held}{also}); free "
                           "space there or set TORCHINDUCTOR_CACHE_DIR to a folder with room (e.g. mkdir -m 700 "
                           "~/.cache/aotcuda-inductor); nothing was compiled")


def _copies_in_cache(weights: int, configs: dict) -> int:
    """How many copies of the weights Inductor's cache folder holds at once during the compile: two (an object file of
    them, linked into the library); one where torch keeps them out of the link: past 2 GB it appends them to the
    library after it (as ``aot_inductor.force_mmap_weights`` does at any size), and
    ``package_constants_on_disk_format='binary_blob'`` writes them to a file of their own (torch 2.13,
    ``determine_aoti_mmap_flags``)."""
    once = (weights > 2_000_000_000 or configs.get("aot_inductor.force_mmap_weights")
            or configs.get("aot_inductor.package_constants_on_disk_format") == "binary_blob")
    return 1 if once else 2
