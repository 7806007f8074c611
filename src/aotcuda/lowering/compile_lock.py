"""One process at a time compiles a given program: a file lock per program around AOTInductor's compile.

Why: AOTInductor writes a program's generated files (the wrapper and kernel sources, the model's
``<hash>.wrapper_metadata.json``, the shared library) into Inductor's cache folder under a name made from
the generated code, so two processes lowering the same program, or the same architecture with other
weights, write the same paths. torch takes a lock while it writes them (codecache.py, ``FileLock`` on the
wrapper's key), but copies them into the package after releasing it: a process packaging while another
rewrites the files (``open(meta_json, "w")`` truncates first) packaged an empty
``wrapper_metadata.json`` (seen on an H100, torch 2.11: four test processes lowering one program at once;
``aotcuda.load`` then refused the package as damaged), and a library being rewritten could be packaged
half-written or with the other process's weights. Torchrun-style launches, where each rank lowers the same
model at once, are the common case.

The lock is taken per program, not for every compile, so lowering different programs still runs in
parallel. Its key is what decides the generated code apart from the weights: the graph's code, each
placeholder's shape, stride and dtype, the dynamic ranges, the Inductor options and torch's version. Two
programs with different keys whose generated code is still the same (not met in practice: the code names
the graph's nodes and constants) are not serialized.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import warnings
from collections.abc import Iterator
from typing import Any

import filelock
import torch
from torch.export import ExportedProgram

from aotcuda import standard_descriptors
from aotcuda.errors import PackageError, clipped
from aotcuda.os_errors import os_error_advice


# How long a lower() waits for another process compiling the same program before it says so and stops: longer
# than any compile measured here (the 1.2B decoder on the H200: about 150 s; a CPU compile on 2 cores: minutes).
WAIT_S = 3600.0


def program_key(ep: ExportedProgram, configs: dict[str, Any]) -> str:
    """A hex digest of what decides the generated code of ``ep`` compiled with Inductor ``configs``, except the
    values of its weights (the module docstring)."""
    digest = hashlib.sha256()
    digest.update(torch.__version__.encode())
    digest.update(ep.graph_module.code.encode())
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            value = node.meta.get("val")
            layout = (tuple(value.shape), tuple(value.stride()), value.dtype, value.device.type) \
                if isinstance(value, torch.Tensor) else type(value).__name__
            digest.update(f"{node.name}:{layout};".encode())
    digest.update(repr(sorted((str(k), str(v)) for k, v in ep.range_constraints.items())).encode())
    digest.update(repr(sorted((str(k), _stable_repr(v)) for k, v in configs.items())).encode())
    return digest.hexdigest()[:32]


def _stable_repr(value) -> str:
    """An option's value as text that is the same in every process: a function or class by its qualified name,
    not by its address (a custom pass given as an Inductor option)."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return repr(value)


def lock_path(key: str) -> str:
    """The lock file of a program key, in a folder of Inductor's cache folder (checked by ``check_cache_folders``
    before the compile, as the files the lock guards are) that nobody else may enter (``LOCK_FOLDER``)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), LOCK_FOLDER, f"{key}.lock")


# The locks' folder, made 0700 and its files 0600. Why: a lock is taken with flock, which any open descriptor can take,
# one opened for reading too. The folder was "aotcuda-compile-locks", made 0755 (umask 022) in Inductor's cache folder,
# which torch makes 0755 too (/tmp/torchinductor_<user>), with 0644 files: another user could open a lock read-only and
# hold it (breakproc, 2026-12-07: uid 65534's `flock --shared LOCK sleep` kept lower() of that program waiting for
# WAIT_S, then a TimeoutError, for every program lowered before; the folder lists their names). A new name, so that a
# descriptor such a user opened in the old folder holds nothing.
LOCK_FOLDER = "aotcuda-locks"


@contextlib.contextmanager
def compiling_alone(ep: ExportedProgram, configs: dict[str, Any], wait_s: float | None = None) -> Iterator[None]:
    """Hold the program's lock for the block; wait while another process holds it (a log line says so).

    Raises:
        TimeoutError: another process held it for ``wait_s`` seconds (default ``WAIT_S``), naming the lock
            file and what to do.
    """
    path = lock_path(program_key(ep, configs))
    lock = filelock.FileLock(path, mode=0o600)
    wait_s = WAIT_S if wait_s is None else wait_s
    try:
        _made_and_taken(lock, path)
    except filelock.Timeout:
        # a warning, not a log line: the command line shows it ("warning: ..."), where a log.info left `aotcuda lower`
        # waiting up to WAIT_S without a word behind a stopped first one (the process breaker, 2026-12-06)
        holder = _holder(path)
        warnings.warn(f"aotcuda: another process{holder} is compiling the same program; waiting for it to end, up "
                      f"to {wait_s:.0f} s (its lock: {path}). Stop that process if it is stuck", stacklevel=3)
        try:
            lock.acquire(timeout=wait_s)
        except filelock.Timeout:
            raise TimeoutError(
                f"another process{holder} has been compiling the same program for {wait_s:.0f} s (it holds {path}); "
                "nothing was compiled. Wait for it and lower again, or stop it; a process that ended has let go "
                "of the lock (it is held by the OS, per open file)") from None
    try:
        _record_holder(path)
        yield
    finally:
        with contextlib.suppress(OSError):  # before the release: a later holder's own is never removed
            os.remove(f"{path}.pid")
        lock.release()


def _made_and_taken(lock: filelock.FileLock, path: str) -> None:
    """Make the lock's folder and file and take it at once (filelock.Timeout where another process holds it), or
    PackageError naming the folder, what the file system said and the fix. Why: with the inodes of Inductor's cache
    folder's file system used up (another process's files in a shared /tmp, bytes still free, so the room check
    passed), lower() ended after the export and passes in a raw ``OSError: [Errno 28] No space left on device:
    '.../aotcuda-compile-locks'`` (breakproc, 2026-12-07)."""
    folder = os.path.dirname(path)
    try:
        _private_folder(folder)
        lock.acquire(timeout=0)
    except filelock.Timeout:  # held by another process (a TimeoutError, which is an OSError): the caller waits
        raise
    except OSError as exc:
        advice = os_error_advice(exc, folder, elsewhere="set TORCHINDUCTOR_CACHE_DIR to a folder with room") or \
            "set TORCHINDUCTOR_CACHE_DIR to a folder of your own you can write (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor)"
        raise PackageError(f"will not compile: the compile lock {clipped(path, 200)!r} cannot be made in Inductor's "
                           f"cache folder ({exc.strerror or exc}); {advice}; nothing was compiled") from None


def _private_folder(folder: str) -> None:
    """Make ``folder`` (mode 0700) in Inductor's cache folder, or find it so: a folder of this user's that others may
    enter (a chmod) is closed again; anything else at its path (a link, another user's) is a PackageError."""
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise PackageError(f"will not compile: {clipped(folder, 200)!r}, where lower() keeps its compile locks, is not a "
                           "folder of this user's (a link, a file, or another user's); remove it, or set "
                           "TORCHINDUCTOR_CACHE_DIR to a folder of your own (e.g. mkdir -m 700 ~/.cache/aotcuda-inductor); "
                           "nothing was compiled")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)


def _record_holder(path: str) -> None:
    """Write this process's id beside the lock (``<lock>.pid``, renamed into place whole), for a process that waits to
    name it. Where it cannot be written the wait names no process."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w", opener=standard_descriptors.opener) as file:  # never fd 0-2: a daemon's stderr
            file.write(str(os.getpid()))
        os.replace(partial, f"{path}.pid")
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(partial)


def _holder(path: str) -> str:
    """" (pid N)" of the process that holds the lock at ``path``, as it wrote it (``_record_holder``; a few ASCII
    digits, read bounded); "" where it is not known."""
    try:
        with open(f"{path}.pid", "rb") as file:
            text = file.read(16)
    except OSError:
        return ""
    return f" (pid {text.decode()})" if text.isdigit() and len(text) <= 10 else ""
