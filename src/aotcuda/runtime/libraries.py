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
that folder made of hard links (no bytes copied), kept until the process that made it exits. Only that
process removes it (a forked child inherits the exit handler), and a pinned folder found missing (removed
by a temp cleaner, or by an older aotcuda's forked child) is restored from the load that finds it missing,
at its path, in a folder this process made again itself: a folder or link found there (another user may
make one once ours is gone) is never written into; new libraries are then pinned in a new folder, and a lost
one cannot be restored (PackageError: restart the process).

Why a lock: a process killed without its exit handlers (SIGKILL, an abort, the OOM killer) cannot remove its
folders. Each process's folder holds ``owner.lock``, locked while it lives, and each extracted package's
folder names that lock; the first load of the next process removes the folders whose lock nobody holds.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable

from aotcuda import standard_descriptors
from aotcuda.errors import PackageError, clipped
from aotcuda.os_errors import temporary_folder_advice

_LIBRARIES: dict[tuple[str, str], tuple[ctypes.CDLL, str]] = {}  # (digest, kind) -> (library, pinned .so)
_DIGESTS: dict[int, str] = {}  # id(library) -> the SHA-256 of its file (libraries are never released)
_LOCK = threading.Lock()


def _new_lock_in_a_child() -> None:  # a lock another thread of the parent held at the fork stays held in the child
    global _LOCK
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_a_child)
_root: tuple[int, str, int] | None = None  # (the pid that made it, the folder of the pinned copies, its lock)
ROOT_PREFIX, PACKAGE_PREFIX = "aotcuda_libraries_", "aotcuda-"  # in the temporary folder
OWNER_LOCK, OWNER_FILE = "owner.lock", ".aotcuda-owner"


class LibraryDigestMismatch(PackageError):
    """The library file's SHA-256 is not the one the caller expected (``opened``: the file's): nothing of it
    was opened, and its pinned copy is removed."""

    def __init__(self, opened: str):
        super().__init__(f"the model library's SHA-256 is {opened}, not the one expected")
        self.opened = opened


def open_shared(so_path: str, kind: str, open_library: Callable[[str], ctypes.CDLL],
                expected_sha256: object = None) -> ctypes.CDLL:
    """The library of ``so_path``, opened with ``open_library`` from a pinned copy, or the one an earlier call
    opened from a file with the same bytes and the same ``kind`` (a label that keeps libraries apart whose
    first run sets different process-wide state, e.g. AOTI's input checks).

    ``expected_sha256`` (a package signature's ``library_sha256``; None: any) is compared with the digest of
    the pinned copy BEFORE it is opened: dlopen runs the library's constructors, so a library that is not the
    one the signature was written for must be refused before, not after (review 6: a swapped .so ran its
    constructor, then the load was refused as if nothing had run, and its pinned folder stayed).

    Raises LibraryDigestMismatch (a PackageError) for another digest; PackageError when the pinned copy
    cannot be made or restored, or as ``open_library`` does.
    """
    made: list[str] = []  # the pin's folder, from the moment it exists: an interrupt after it left it behind
    keep = False
    try:
        pinned = _pin_library_folder(so_path, made)
        key = (file_digest(pinned), kind)
        if expected_sha256 is not None and expected_sha256 != key[0]:
            raise LibraryDigestMismatch(key[0])
        with _LOCK:
            found = _LIBRARIES.get(key)
            if found is None:
                library = open_library(pinned)
                _DIGESTS[id(library)] = key[0]  # kept for the life of the process, as the library
                _LIBRARIES[key] = (library, pinned)
                keep = True
                return library
            library, first_pin = found
            if not os.path.exists(first_pin):
                _restore(os.path.dirname(pinned), os.path.dirname(first_pin))
                keep = True  # moved into place
            return library
    finally:
        if not keep:
            remove_folders(made)


def digest_of(library) -> str | None:
    """The SHA-256 of the file a shared library was opened from (None for one ``open_shared`` did not open)."""
    return _DIGESTS.get(id(library))


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


def remove_in_creator(folder: str, creator_pid: int) -> None:
    """Remove ``folder`` if this is the process that made it (exit handlers and finalizers are inherited by
    a forked child, whose normal exit would otherwise remove its parent's folders), whole even when an interrupt
    arrives in the middle (``remove_folders``): a finalizer runs once, so a Ctrl-C inside ``Program.close()``'s
    removal left the rest of the extracted package for good (break38, 2026-12-07)."""
    if os.getpid() == creator_pid:
        remove_folders([folder])


def remove_pinned_folder() -> None:
    """Remove this process's folder of pinned copies now, for a process that ends right after without its exit
    handlers (a Ray Serve replica: Serve calls its ``__del__``, then kills the process, and every stop of `aotcuda
    serve` left the folder, as large as the package, until a later load swept it). Only once no program of this
    process runs: a later load makes the folder again, and restores a library's copy it finds missing."""
    with _LOCK:
        if _root is not None and _root[0] == os.getpid():
            shutil.rmtree(_root[1], ignore_errors=True)


def _pinned_root() -> str:
    """This process's folder of pinned copies: made at the first pin, removed at exit; made again where it
    was removed (its path stays the same: the libraries opened from it know their files by that path).

    The folder holds ``owner.lock``, locked by this process while it lives, so that a later process can tell
    the folder of one that died without its exit handlers (SIGKILL, an abort, the OOM killer) and remove it
    (``sweep_dead_folders``). A path found taken by what this process did not make (another user's folder, a
    symbolic link: planted after a temp cleaner removed ours) is never written into: a new folder is made."""
    global _root
    pid = os.getpid()
    if _root is None or _root[0] != pid:  # a forked child pins into a folder of its own
        _root = (pid, *_new_root(pid))
        sweep_dead_folders(os.path.dirname(_root[1]))
    elif not _is_private_folder(_root[1]):
        try:
            os.mkdir(_root[1], 0o700)  # removed (a temp cleaner): the same path, made by us, or nothing
            _root = (pid, _root[1], _lock_folder(_root[1]))
        except FileExistsError:  # someone else's now: the libraries opened from it cannot be restored there
            _root = (pid, *_new_root(pid))
    return _root[1]


def _new_root(pid: int) -> tuple[str, int]:
    """A new pinned root (path, its lock's descriptor), removed at exit. Made by ``new_private_folder``, and removed
    again if anything interrupts its making: an interrupt between mkdtemp's mkdir and the exit handler's registration
    left an empty root without its lock file, which no sweep removes (it may be another version's), for good (the
    file-system breaker, 2026-12-06)."""
    made: list[str] = []
    try:
        root = new_private_folder(tempfile.gettempdir(), ROOT_PREFIX, made)
        atexit.register(remove_in_creator, root, pid)
        return root, _lock_folder(root)
    except BaseException:
        remove_folders(made)
        raise


def _lock_folder(folder: str) -> int:
    """Lock ``folder``/owner.lock for as long as this process lives (the descriptor is kept; a forked child
    shares the lock). Made under another name and renamed, so that no sweep ever sees it unlocked. Opened for
    reading only (flock needs no more), above the standard descriptors' numbers: in a process started with them
    closed (a daemon's) the lock took the number 2, and every line C++ wrote on std::cerr was written into it, for
    the life of the process."""
    fresh = os.path.join(folder, f"{OWNER_LOCK}.{os.getpid()}")
    descriptor = standard_descriptors.opener(fresh, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    os.rename(fresh, os.path.join(folder, OWNER_LOCK))
    return descriptor


def owner_lock() -> str:
    """The lock file of this process's folder (made if needed): written into each extracted package's folder
    (``mark_owned``), so that a later process removes that folder once this process is gone."""
    with _LOCK:
        return os.path.join(_pinned_root(), OWNER_LOCK)


def mark_owned(folder: str) -> None:
    """Record in ``folder`` (a fresh temporary folder of this process) which process owns it."""
    fresh = os.path.join(folder, f"{OWNER_FILE}.new")
    # the path's bytes (a TMPDIR that is not UTF-8 has no text form to write); never as descriptor 0-2
    with open(fresh, "wb", opener=standard_descriptors.opener) as file:
        file.write(os.fsencode(owner_lock()))
    os.rename(fresh, os.path.join(folder, OWNER_FILE))


def _is_private_folder(path: str) -> bool:
    """Whether ``path`` is a folder (not a link) of this user that nobody else may write into."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def sweep_dead_folders(temp_dir: str) -> list[str]:
    """Remove the folders aotcuda processes of this user left in ``temp_dir`` when they died without their
    exit handlers: a pinned-library folder whose ``owner.lock`` nobody holds, and an extracted package whose
    owner file names such a lock. Folders without those files (another version's, one being made, another
    user's) are left alone. Returns the folders removed."""
    removed = []
    try:
        entries = sorted(os.scandir(temp_dir), key=lambda entry: entry.name.startswith(ROOT_PREFIX))  # roots last
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith((ROOT_PREFIX, PACKAGE_PREFIX)) or not _is_private_folder(entry.path):
            continue
        gone = (_owner_gone(os.path.join(entry.path, OWNER_LOCK)) if entry.name.startswith(ROOT_PREFIX)
                else marked_owner_gone(entry.path, temp_dir) or _abandoned_unmarked(entry.path))
        if gone:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


# How long an extraction folder may stay without its owner file before a later sweep takes it for abandoned: mark_owned
# writes it right after the folder is made (microseconds; the longest wait is a loaded machine's scheduling).
UNMARKED_GRACE_S = 600.0


def new_private_folder(parent: str, prefix: str, made: list[str]) -> str:
    """A new folder of mode 0700 in ``parent`` (``prefix`` and random letters, as tempfile.mkdtemp names it), its path
    added to ``made`` BEFORE it is made, so that the caller's cleanup of ``made`` covers it whatever comes after: an
    interrupt inside mkdtemp (after its mkdir, in its abspath) or before its result was kept left the folder for good
    (the process breaker, 2026-12-06: a signal's KeyboardInterrupt 0.05-30 ms into load left empty extraction
    folders and pins)."""
    import secrets

    for _ in range(100):
        folder = os.path.join(parent, f"{prefix}{secrets.token_hex(6)}")
        made.append(folder)
        try:
            os.mkdir(folder, 0o700)
            return folder
        except FileExistsError:  # a name taken by chance: not ours to remove
            made.remove(folder)
    raise FileExistsError(f"no new folder name was free in {parent!r} after 100 tries")


def remove_folders(folders: list[str]) -> None:
    """Remove each of ``folders`` (a failed load's cleanup), whole even when an interrupt arrives in the middle: the
    interrupt is raised again once all are gone. Why: a signal's KeyboardInterrupt inside the cleanup's own
    ``rmtree`` ended it half-way, and an extraction folder whose owner file had gone first stayed for good (no sweep
    knows it as ours); a pin, until the process's exit (the process breaker's open item, 2026-12-06). Each retry
    starts where the last stopped (what is gone stays gone), and a cleanup interrupted ``_CLEANUP_TRIES`` times
    gives up, for a caller who insists."""
    interrupted: BaseException | None = None
    for folder in folders:
        for _ in range(_CLEANUP_TRIES):
            try:
                shutil.rmtree(folder, ignore_errors=True)
                break
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, or what a signal's handler raised
                interrupted = interrupted or _the_interrupt(exc)
    if interrupted is not None:
        raise interrupted


_CLEANUP_TRIES = 20


def _the_interrupt(exc: BaseException) -> BaseException:
    """The interrupt behind ``exc``: rmtree (ignore_errors) raises nothing of its own but what its ``finally`` raises
    while an interrupt passes, its second ``os.close`` of a directory's descriptor, where the handler ran right after
    the first returned (Python's shutil, 3.11-3.13): the caller's Ctrl-C came out of ``close()`` as a raw ``OSError:
    [Errno 9] Bad file descriptor`` (break38, 2026-12-07)."""
    context = exc.__context__
    # Whatever the handler raised: KeyboardInterrupt, or an Exception of its own (a SIGALRM timeout's TimeoutError)
    if isinstance(exc, OSError) and exc.errno == errno.EBADF and isinstance(context, BaseException):
        return context
    return exc


def _abandoned_unmarked(folder: str) -> bool:
    """Whether ``folder`` (a private ``aotcuda-*`` folder) is one an interrupt left between its making and its owner
    file (the process breaker, 2026-12-06: a signal's KeyboardInterrupt 0.05-30 ms into load left empty ones, which no
    sweep removed): it holds nothing but a half-written owner file, and has for UNMARKED_GRACE_S."""
    import time

    try:
        left = os.listdir(folder)
        changed = os.lstat(folder).st_mtime
    except OSError:
        return False
    return set(left) <= {f"{OWNER_FILE}.new"} and time.time() - changed > UNMARKED_GRACE_S


def marked_owner_gone(folder: str, temp_dir: str | None = None) -> bool:
    """Whether ``folder`` (marked by ``mark_owned``) belongs to a process of this user that is gone: its owner file
    names the lock of a pinned root in ``temp_dir`` (default: this process's temporary folder) that nobody holds.
    A folder without that file, or naming a lock elsewhere (another TMPDIR, another host's), is not known gone."""
    temp_dir = temp_dir or tempfile.gettempdir()
    if not _is_private_folder(folder):
        return False
    try:
        with open(os.path.join(folder, OWNER_FILE), "rb") as file:
            lock = os.fsdecode(file.read(4096))
    except OSError:
        return False
    if os.path.dirname(os.path.dirname(lock)) != temp_dir or not os.path.basename(
            os.path.dirname(lock)).startswith(ROOT_PREFIX) or os.path.basename(lock) != OWNER_LOCK:
        return False
    return _owner_gone(lock)


def _owner_gone(lock: str) -> bool:
    """Whether the owner lock file exists and no process holds it. Only a regular file of this user in a
    private folder of this user counts: a folder re-made at a removed root's path by someone else, with a FIFO
    named like the lock, made every later load of this user block in ``open`` (hence O_NONBLOCK too)."""
    if not _is_private_folder(os.path.dirname(lock)):
        return False
    try:
        descriptor = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def _pin_library_folder(so_path: str, made: list[str]) -> str:
    """Link the .so's folder into a folder that lives as long as the process; return the .so's path
    there (the folder is added to ``made`` as soon as it exists, for the caller to remove on an error). Files that
    cannot be hard-linked (another file system) are copied."""
    try:
        with _LOCK:
            target = new_private_folder(_pinned_root(), "tmp", made)
        shutil.copytree(os.path.dirname(so_path), target, copy_function=_link_or_copy, dirs_exist_ok=True)
    except OSError as exc:  # the advice of its errno: "has room" was said to too many open files too
        raise PackageError(f"cannot keep a copy of the model library {clipped(so_path, 200)} for this process "
                           f"({exc.strerror or exc}); {temporary_folder_advice(exc, tempfile.gettempdir())}") from exc
    return os.path.join(target, os.path.basename(so_path))


def _restore(source_folder: str, lost_folder: str) -> None:
    """Put a fresh pin of the same bytes where a library's pinned folder was. Called under the lock. Only into
    a folder of this process's own making (``_pinned_root``): never into one another user planted there."""
    try:
        if not _is_private_folder(os.path.dirname(lost_folder)):
            raise OSError(f"{os.path.dirname(lost_folder)} is not a private folder of this process any more")
        shutil.rmtree(lost_folder, ignore_errors=True)  # a part left behind
        os.rename(source_folder, lost_folder)
    except OSError as exc:
        raise PackageError(f"the folder {lost_folder}, which this process's copy of the model library was "
                           f"opened from, was removed and cannot be made again ({exc}); restart the process") from exc


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # a copy, never written through descriptor 0-2 (standard_descriptors)
        with open(source, "rb") as read, open(target, "wb", opener=standard_descriptors.opener) as written:
            shutil.copyfileobj(read, written)
        shutil.copystat(source, target)
