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

import itertools
import os

from aotcuda.errors import PackageError, clipped, one_line
from aotcuda.lowering.compiler_variables import check_compiler_variables, variables_on_failed_line
from aotcuda.lowering.private_weights import make_default_cache_private
from aotcuda.shared_folders import (
    entries_others_may_write,
    mounted_noexec,
    say_if_tmpdir_passed_over,
    temporary_folder,
    temporary_folder_problem,
    umask_lets_others_write,
    unsafe_folder,
)
from aotcuda.switches import flag


def import_inductor() -> None:
    """Import torch._inductor, or raise PackageError naming Inductor's cache folder where its import cannot make it.

    Why: torch makes the folder as it imports its compiler (torch/_dynamo/package.py, module level: ``cache_dir()``,
    an ``os.makedirs``), before check_cache_folders can look at it; every import of aotcuda.lowering (``lower``, the
    CLI's ``--device``, ``aotcuda inspect``) imports it. A file at the default path (``/tmp/torchinductor_<user>``,
    which another user may put there) or a TORCHINDUCTOR_CACHE_DIR naming one made each of them end in a raw
    FileExistsError traceback (the breaker, 2026-12-05). Once failed, the import cannot be tried again in this
    process (torch's registries keep what the first attempt registered: an AssertionError), so the error stays.
    torch's number variables are checked first (SwitchError, nothing imported: fixed, the next try imports it);
    one torch reads that the check does not know fails the import with a ValueError, named here from its line."""
    global _import_failure
    if _import_failure is not None:
        raise PackageError(f"{_import_failure} (torch cannot import its compiler a second time in one process: start "
                           "it again once that is fixed)")
    check_compiler_variables()  # before the import, which reads them: fixed, the next try imports it
    try:
        import torch._inductor  # noqa: F401 - imported for its side effect, here where its failure is named
    except OSError as exc:
        folder = exc.filename or os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "?"
        _import_failure = _cannot_be_made(os.fsdecode(folder), exc, "torch's compiler cannot be imported")
        raise _import_failure from None
    except ValueError as exc:  # a number variable torch reads that TORCH_NUMBERS does not know (another torch)
        _import_failure = PackageError(f"torch's compiler cannot be imported: {type(exc).__name__}: "
                                       f"{clipped(one_line(exc), 200)}{variables_on_failed_line(exc)}")
        raise _import_failure from None


_import_failure: PackageError | None = None


def _cannot_be_made(folder: str, exc: OSError, what: str) -> PackageError:
    return PackageError(f"{what}: Inductor's cache folder {folder!r} cannot be made ({exc.strerror or exc}); set "
                        "TORCHINDUCTOR_CACHE_DIR to a folder of your own (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor)"
                        "; nothing was compiled")


def check_cache_folders(device_type: str = "cpu") -> None:
    """PackageError when a folder Inductor (or Triton, through TRITON_CACHE_DIR) compiles in can be written by
    another user, naming the folder, what is wrong with it and the fix; Inductor's own folder is made here,
    as Inductor makes it, so that what is checked is what it uses. For a CPU lowering (``device_type``), also where
    Inductor's folder is on a file system mounted noexec. Torch's default folder is then made 0700: the compile
    leaves the weights there (``private_weights``)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    say_if_tmpdir_passed_over()  # Inductor's default folder is under the temporary folder Python chose
    try:
        inductor = cache_dir()
    except OSError as exc:  # a file, FIFO or link to one at the path: torch's makedirs raised FileExistsError
        folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
        raise _cannot_be_made(folder, exc, "will not compile") from None
    if device_type == "cpu" and mounted_noexec(inductor):
        # Inductor's check of the CPU's vector instructions builds a library there and loads it: it fails, and every CPU
        # kernel was compiled without them (AOTI_CPU_ISA INVALID_VEC_ISA: slower, without a word)
        raise PackageError(f"will not compile: Inductor's cache folder {inductor!r} is on a file system mounted noexec, "
                           "where the library Inductor builds and loads to probe this CPU's vector instructions cannot "
                           "be opened: the CPU kernels would be compiled without them. Set "
                           "TORCHINDUCTOR_CACHE_DIR to a folder on a file system that allows running code (e.g. mkdir -m "
                           "700 ~/.cache/aotcuda-inductor), or TMPDIR, under which it is made; nothing was compiled")
    folders = [("Inductor's cache folder", "TORCHINDUCTOR_CACHE_DIR", inductor)]
    folders += [(what, "TMPDIR", folder) for what, folder in _default_folders(inductor)]
    if os.environ.get("TRITON_CACHE_DIR"):
        folders.append(("Triton's cache folder", "TRITON_CACHE_DIR", os.environ["TRITON_CACHE_DIR"]))
    if flag("AOTCUDA_TRUST_SHARED_FOLDERS"):  # the user vouches for everyone who may write there
        make_default_cache_private(inductor)  # ... not for who may read the weights there (private_weights.py)
        return
    mask = umask_lets_others_write()
    if mask is not None:
        raise PackageError(f"will not compile: this process's umask is {mask:03o}, so the sources and libraries Inductor "
                           f"writes in its cache folder {inductor!r} would be writable by other users, who could put "
                           "code there that the compile builds into the package (or loads). Run with umask 022 (or 077); "
                           "nothing was compiled. Where only users you trust can write there, set "
                           "AOTCUDA_TRUST_SHARED_FOLDERS=1")
    # each folder and those above it first, then what each holds: a folder of its own is the more precise refusal
    problems = itertools.chain(((what, variable, folder, unsafe_folder(folder)) for what, variable, folder in folders),
                               ((what, variable, folder, _unsafe_inside(folder)) for what, variable, folder in folders))
    for what, variable, folder, problem in problems:  # lazily: the walks only where every folder passed
        if problem and variable == "TMPDIR":
            raise PackageError(
                f"will not compile: {what} {folder!r} {problem}, so another user can put code there that the compile "
                "would build into the package (torch keeps its precompiled headers, and caches it reads back, in the "
                "temporary folder's torchinductor_<user> whatever TORCHINDUCTOR_CACHE_DIR says). Start the process with "
                "TMPDIR set to a folder of your own (e.g. mkdir -m 700 ~/tmp), or remove that folder if it is not yours; "
                "nothing was compiled. Where only users you trust can write there, set AOTCUDA_TRUST_SHARED_FOLDERS=1")
        if problem:
            raise PackageError(
                f"will not compile: {what} {folder!r} {problem}, so another user can put code there that the "
                "compile would build into the package (Inductor compiles the source it finds at a source's "
                f"path). Set {variable} to a folder of your own (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor), "
                "or remove that folder if it is not yours; nothing was compiled. Where only users you trust can "
                "write there, set AOTCUDA_TRUST_SHARED_FOLDERS=1")
    make_default_cache_private(inductor)  # the weights the compile links there are no other user's to read


def _unsafe_inside(folder: str) -> str | None:
    """Why another user could write what ``folder`` holds (``entries_others_may_write``), or None."""
    inside = entries_others_may_write(folder) if os.path.isdir(folder) else None
    if inside is None:
        return None
    count, first, why = inside
    return (f"holds {count} entr{'y' if count == 1 else 'ies'} another user owns or may write (e.g. {first!r}, {why}; a "
            "process run with umask 000 leaves such files: chmod -R go-w it, or remove them)")


def _default_folders(inductor: str) -> list[tuple[str, str]]:
    """torch's folders under the default cache folder (``$TMPDIR/torchinductor_<user>``) that TORCHINDUCTOR_CACHE_DIR
    does not move, made here as torch makes them (so that nobody else makes them first, after the check), where they
    lie outside ``inductor``, the cache folder checked already.

    Why: the precompiled headers (codecache ``_HEADER_DIR``, fixed as torch imports its compiler: a header's source and
    its ``.gch`` at a path of its hash, the same for every user of one torch, kept as found by ``write``, and compiled
    into every wrapper) and the on-disk caches torch unpickles (``runtime/caching``: pad_mm's ``should_pad``) live
    there. The breaker (2026-12-06): with a private TORCHINDUCTOR_CACHE_DIR, the header another user planted in a 0777
    ``/tmp/torchinductor_root/precompiled_headers`` was compiled into the package and its constructor ran at load."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    folders = [("torch's default cache folder", default_cache_dir())]
    try:
        from torch._inductor import codecache
    except ImportError:  # a torch without it: the default folder's check stands
        codecache = None
    # read where it exists (torch 2.13, measured; not checked here on other versions): it was fixed at torch's import,
    # under the TMPDIR of that moment, which may differ from default_cache_dir()'s now
    headers = getattr(codecache, "_HEADER_DIR", None)
    if isinstance(headers, str):
        folders.append(("torch's precompiled-header folder", headers))
    kept = []
    for what, folder in folders:
        if _within(folder, inductor):
            continue
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise PackageError(f"will not compile: {what} {folder!r} cannot be made ({exc.strerror or exc}); start the "
                               "process with TMPDIR set to a folder of your own (e.g. mkdir -m 700 ~/tmp), or remove "
                               "what is at that path if it is not yours; nothing was compiled") from None
        kept.append((what, folder))
    return kept


def _within(folder: str, parent: str) -> bool:
    folder, parent = os.path.realpath(folder), os.path.realpath(parent)
    return folder == parent or folder.startswith(parent.rstrip(os.sep) + os.sep)


def check_temporary_folder(what: str) -> None:
    """PackageError when the temporary folder (TMPDIR) is one where another user could rename a folder made in it
    away and put their own at its path (writable by others and not sticky, or in such a folder): ``what`` (the
    package lower() writes when no package_path is given, the demo's) would be written into, and later loaded from,
    their folder, whose package they choose. AOTCUDA_TRUST_SHARED_FOLDERS=1 takes it, as for extraction."""
    temp = temporary_folder()
    problem = temporary_folder_problem(temp)
    if problem:
        raise PackageError(f"will not write {what} into the temporary folder {temp!r}: it {problem}, so another user "
                           "could replace the folder it is written in, and the package loaded from there; nothing was "
                           "compiled. Pass package_path (-o on the command line) to a folder of your own, or point TMPDIR "
                           "to one (e.g. mkdir -m 700 ~/tmp); where only users you trust can write there, set "
                           "AOTCUDA_TRUST_SHARED_FOLDERS=1")
