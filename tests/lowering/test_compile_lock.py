"""lower() compiles a program while no other process compiles the same one (lowering/compile_lock.py).

Found on an H100 (session 29): four test processes lowering one CUDA program at once, one package got an empty
``wrapper_metadata.json`` (torch copies the files it generated into the package after releasing its own lock,
while another process rewrites them), and ``aotcuda.load`` refused it as damaged. These tests need no compile:
the compile is replaced by a recorder that stops lower() once it has been reached.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest
import torch

import aotcuda
from aotcuda.lowering import compile_lock


class Affine(torch.nn.Module):
    def __init__(self, features: int = 4):
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x).relu()


class CompileReached(Exception):
    """Raised by the stand-in compile: lower() got past the lock."""


def _export(model, x):
    return torch.export.export(model, (x,))


def test_the_key_is_the_programs_structure_not_its_weights():
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    first = _export(Affine(), x)
    torch.manual_seed(1)
    other_weights = _export(Affine(), x)
    configs = {"max_autotune": False}
    key = compile_lock.program_key(first, configs)
    assert key == compile_lock.program_key(other_weights, configs)  # same generated code: one lock
    assert key != compile_lock.program_key(_export(Affine(), torch.randn(3, 4)), configs)  # other shapes
    assert key != compile_lock.program_key(_export(Affine(8), torch.randn(2, 8)), configs)
    assert key != compile_lock.program_key(first, {"max_autotune": True})  # other Inductor options
    assert key != compile_lock.program_key(_export(Affine().double(), x.double()), configs)  # other dtypes


def _hold(path: str, held, release, released) -> None:
    """Hold the lock at `path` until `release` is set (at most 120 s), recording the time it lets go."""
    import filelock

    with filelock.FileLock(path):
        held.set()
        release.wait(120)
        released.value = time.time()


def test_lower_waits_for_another_process_compiling_the_same_program(tmp_path, monkeypatch):
    """A process holding the program's lock (as a lower() of the same program in its compile does) keeps this
    lower() out of the compile until it lets go; a lower() of another program does not wait."""
    model, x = Affine(), torch.randn(2, 4)
    entered = []

    def stand_in_compile(ep, package_path, inductor_configs):
        entered.append((time.time(), compile_lock.program_key(ep, inductor_configs)))
        raise CompileReached

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", stand_in_compile)
    with pytest.raises(CompileReached):  # the key of the program as lower() compiles it (after the passes)
        aotcuda.lower(model, (x,), device="cpu", package_path=tmp_path / "first.pt2")
    key = entered.pop()[1]

    spawn = multiprocessing.get_context("spawn")
    held, release, released = spawn.Event(), spawn.Event(), spawn.Value("d", 0.0)
    holder = spawn.Process(target=_hold, args=(compile_lock.lock_path(key), held, release, released))
    holder.start()
    try:
        assert held.wait(60), "the holder never took the lock"
        with pytest.raises(CompileReached):  # another program: compiled while the holder still holds its lock
            aotcuda.lower(Affine(8), (torch.randn(2, 8),), device="cpu", package_path=tmp_path / "other.pt2")
        assert entered.pop()[1] != key and not released.value
        threading.Timer(2.0, release.set).start()  # lets go 2 s into the next lower()
        with pytest.raises(CompileReached):
            aotcuda.lower(model, (x,), device="cpu", package_path=tmp_path / "second.pt2")
        compiled_at, second_key = entered.pop()
        assert second_key == key
        assert released.value and compiled_at >= released.value, "compiled while the other process held the lock"
    finally:
        release.set()
        holder.join(30)
        if holder.is_alive():
            holder.kill()


def test_a_lock_held_past_the_wait_is_a_timeout_naming_it(tmp_path):
    """A process that holds the lock for good (stopped in a debugger, hung) is named, not waited for forever."""
    x = torch.randn(2, 4)
    ep, configs = _export(Affine(), x), {}
    path = compile_lock.lock_path(compile_lock.program_key(ep, configs))
    spawn = multiprocessing.get_context("spawn")
    held, release, released = spawn.Event(), spawn.Event(), spawn.Value("d", 0.0)
    holder = spawn.Process(target=_hold, args=(path, held, release, released))  # holds until killed
    holder.start()
    try:
        assert held.wait(60)
        started = time.time()
        with pytest.raises(TimeoutError, match=r"another process has been compiling the same program for 1 s "
                                               r"\(it holds .*aotcuda-locks.*\.lock\); nothing was compiled"):
            with compile_lock.compiling_alone(ep, configs, wait_s=1.0):
                pytest.fail("entered while another process held the lock")
        assert time.time() - started < 10
    finally:
        holder.kill()
        holder.join(30)
    with compile_lock.compiling_alone(ep, configs, wait_s=5.0):  # a holder that died let go
        assert os.path.exists(path)


def _hold_as_lower(path: str, held, release) -> None:
    """Hold the lock at `path` as a lower() in its compile does (its pid written beside it) until `release` is set."""
    import filelock

    with filelock.FileLock(path):
        compile_lock._record_holder(path)
        held.set()
        release.wait(120)
        os.remove(f"{path}.pid")


def test_a_wait_for_another_process_is_said_and_names_it(tmp_path):
    """The process breaker (2026-12-06): a second `aotcuda lower` of a program whose first lower() was stopped (SIGSTOP)
    while it held the lock waited up to WAIT_S (an hour) without a word: the wait was a log.info line, which the
    command line does not show, and named no process. It is a warning now (the CLI's `warning:` line), naming the
    holder's pid, as the timeout does."""
    ep, configs = _export(Affine(), torch.randn(2, 4)), {"a_key_of_this_test": True}
    path = compile_lock.lock_path(compile_lock.program_key(ep, configs))
    spawn = multiprocessing.get_context("spawn")
    held, release = spawn.Event(), spawn.Event()
    holder = spawn.Process(target=_hold_as_lower, args=(path, held, release))
    holder.start()
    try:
        assert held.wait(60)
        said = rf"another process \(pid {holder.pid}\) is compiling the same program; waiting for it to end, up to 1 s"
        with pytest.warns(UserWarning, match=said), \
                pytest.raises(TimeoutError, match=rf"another process \(pid {holder.pid}\) has been compiling"):
            with compile_lock.compiling_alone(ep, configs, wait_s=1.0):
                pytest.fail("entered while another process held the lock")
    finally:
        release.set()
        holder.join(30)
        if holder.is_alive():
            holder.kill()


def test_a_lock_that_cannot_be_made_is_named_with_the_fix(tmp_path, monkeypatch):
    """breakproc (2026-12-07): with the inodes of Inductor's cache folder's file system used up by another process (a
    20-inode tmpfs, 50 MiB free, so that the room check passed), lower() ended after the export and the passes in a
    raw 'OSError: [Errno 28] No space left on device: .../aotcuda-compile-locks'. Here what sits at the lock's path
    makes the open fail (no privileges needed): a raw IsADirectoryError on the code before; and a file where the
    locks' folder goes, a raw FileExistsError."""
    from aotcuda.errors import PackageError

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    ep = _export(Affine(), torch.randn(2, 4))
    lock = compile_lock.lock_path(compile_lock.program_key(ep, {}))
    os.makedirs(lock)  # a folder where the lock file goes
    with pytest.raises(PackageError, match=r"will not compile: the compile lock '.*/[0-9a-f]+\.lock' cannot be made in "
                                           r"Inductor's cache folder \(Is a directory\); .*nothing was compiled"):
        with compile_lock.compiling_alone(ep, {}):
            raise AssertionError("the block ran without its lock")
    os.rmdir(lock)
    os.rmdir(os.path.dirname(lock))
    with open(os.path.dirname(lock), "w") as planted:  # a file where the locks' folder goes
        planted.write("not a folder")
    with pytest.raises(PackageError, match=r"where lower\(\) keeps its compile locks, is not a folder of this user's"):
        with compile_lock.compiling_alone(ep, {}):
            raise AssertionError("the block ran without its lock")
    os.remove(os.path.dirname(lock))
    with compile_lock.compiling_alone(ep, {}):  # the file gone, the lock is made and taken
        assert os.path.exists(lock + ".pid")


def test_a_file_system_without_free_inodes_is_said_so_where_bytes_are_free(tmp_path, monkeypatch):
    """breakproc (2026-12-07): "free space in '/tmp' (50.0 MiB free)" was the advice where another process had used up
    the inodes: the user looked for space that was there. (Mounting a small tmpfs needs privileges: its statvfs
    answer stands in, as noexec_mount does.)"""
    import errno

    from aotcuda.os_errors import os_error_advice

    statvfs = os.statvfs

    def no_inode_left(path):
        answer = statvfs(path)
        return os.statvfs_result((*answer[:5], 20, 0, 0, *answer[8:]))  # f_files, f_ffree, f_favail

    full = OSError(errno.ENOSPC, "No space left on device")
    assert "but no inode free" not in os_error_advice(full, str(tmp_path))
    monkeypatch.setattr(os, "statvfs", no_inode_left)
    assert "free, but no inode free: no new file can be made there)" in os_error_advice(full, str(tmp_path))


def test_another_user_cannot_hold_a_programs_lock(tmp_path, monkeypatch):
    """breakproc (2026-12-07): a lock is an flock, which a descriptor opened for reading takes too, and the locks were
    0644 files in a 0755 folder of Inductor's cache folder, which torch makes 0755 (/tmp/torchinductor_<user>): uid 65534
    ran `flock --shared LOCK sleep 120` on the lock of a program lowered before, and the next lower() of it waited
    WAIT_S (an hour), then raised TimeoutError ('another process has been compiling the same program'). The locks'
    folder is 0700 now, its files 0600: nobody else can open them."""
    import stat
    import subprocess

    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)  # as torch makes its default cache folder
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    ep = _export(Affine(), torch.randn(2, 4))
    with compile_lock.compiling_alone(ep, {}):  # a first lowering of the program: its lock file stays
        pass
    lock = compile_lock.lock_path(compile_lock.program_key(ep, {}))
    folder = os.path.dirname(lock)
    if os.geteuid() == 0:  # taking another user's identity needs root; elsewhere the modes below keep them out
        # another user, started in the locks' folder (pytest's folders above it are 0700), takes the lock and sits on it
        holder = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "flock", "--shared",
                                   os.path.basename(lock), "sleep", "120"], cwd=folder, stderr=subprocess.PIPE)
        try:
            time.sleep(1.0)
            started = time.time()
            with compile_lock.compiling_alone(ep, {}, wait_s=3.0):  # before: TimeoutError after 3 s
                assert time.time() - started < 2.0
            assert holder.wait(10) != 0 and b"Permission denied" in holder.stderr.read()
        finally:
            holder.kill()
            holder.wait()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and stat.S_IMODE(os.stat(lock).st_mode) == 0o600
