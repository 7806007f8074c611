"""Advice chosen by the errno (os_errors.py). The process breaker (2026-12-06): "Too many open files" got "Free space
in the temporary folder" or "check the path and its permissions"; a name too long got the free-space advice and a
message of 4 KB; a full Inductor cache gave `InductorError: OSError: [Errno 28]` naming no folder; `ulimit -f` while
compiling a bare "C++ compile error"."""

import errno
import os
import resource

import pytest

from aotcuda.errors import PackageError
from aotcuda.os_errors import cannot_read, os_error_advice


def _error(number, filename=None):
    return OSError(number, os.strerror(number), filename)


def test_each_errno_gets_its_own_advice(tmp_path):
    assert "ulimit -n" in os_error_advice(_error(errno.EMFILE), str(tmp_path))
    assert "system has too many files open" in os_error_advice(_error(errno.ENFILE), str(tmp_path))
    assert "too long" in os_error_advice(_error(errno.ENAMETOOLONG), str(tmp_path))
    assert "ulimit -f" in os_error_advice(_error(errno.EFBIG), str(tmp_path))
    assert "read-only" in os_error_advice(_error(errno.EROFS), str(tmp_path))
    assert "no file locks" in os_error_advice(_error(errno.ENOLCK), str(tmp_path))
    full = os_error_advice(_error(errno.ENOSPC), str(tmp_path))
    assert f"free space in '{tmp_path}' (" in full and " free)" in full
    read = cannot_read("/x/" + "n" * 4000, _error(errno.EMFILE))
    assert "Too many open files" in read and "ulimit -n" in read and "permissions" not in read and len(read) < 500
    assert "permissions" in cannot_read("/x", _error(errno.EACCES))


def test_an_extraction_folder_that_cannot_be_made_gets_the_errnos_advice(monkeypatch):
    from aotcuda.runtime import package

    for number, says in ((errno.EMFILE, "ulimit -n"), (errno.ENAMETOOLONG, "too long"),
                         (errno.ENOSPC, "point TMPDIR to a folder with room")):
        def refused(*args, number=number, **kwargs):
            raise _error(number)

        monkeypatch.setattr(package, "new_private_folder", refused)
        with pytest.raises(PackageError) as raised:
            package._extraction_folder("m.pt2", [])
        assert says in str(raised.value), str(raised.value)
        if number != errno.ENOSPC:
            assert "Free space" not in str(raised.value) and "free space" not in str(raised.value)
    monkeypatch.undo()
    # a temporary folder that takes no file locks (flock: ENOLCK, NFS without its lock service) got the advice for a
    # full one (a "not fixed" entry of 2026-12-06, evening)
    monkeypatch.setattr(package, "mark_owned", lambda folder: (_ for _ in ()).throw(_error(errno.ENOLCK)))
    with pytest.raises(PackageError, match=r"\(No locks available\); nothing was loaded: '.*' is on a file system "
                                           r"that takes no file locks .*: use a local folder"):
        package._extraction_folder("m.pt2", made := [])
    for folder in made:  # open_package removes it on the error
        os.rmdir(folder)


def test_a_compile_out_of_room_names_the_folder_and_a_file_size_limit_is_noted(monkeypatch, tmp_path):
    from torch._inductor.exc import CppCompileError, InductorError

    from aotcuda.lowering.compile_failures import compile_resource_failure

    try:
        raise _error(errno.ENOSPC, str(tmp_path / "ab" / "cabc.cpp"))
    except OSError as inner:
        wrapped = InductorError(inner, None)
    named = compile_resource_failure(wrapped)
    assert isinstance(named, PackageError), named
    assert f"the compile failed: No space left on device (Inductor's cache folder is" in str(named)
    assert f"free space in '{tmp_path / 'ab'}'" in str(named)

    # the compiler's own words, in a bare "C++ compile error" (a cache folder on a full tmpfs: the file-system breaker)
    full = CppCompileError(["g++", "x.cpp"], f"/tmp/cc.s: Assembler messages:\n/tmp/cc.s: Fatal error: "
                                             f"{tmp_path / 'cd' / 'w.wrapper.o'}: No space left on device\n")
    named = compile_resource_failure(InductorError(full, None))
    assert isinstance(named, PackageError), named
    assert "the compile failed: the compiler says No space left on device (Inductor's cache folder is" in str(named)
    assert f"free space in '{tmp_path / 'cd'}'" in str(named) and "TORCHINDUCTOR_CACHE_DIR" in str(named), str(named)

    compile_error = CppCompileError(["g++", "x.cpp"], "File size limit exceeded")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (65536, resource.RLIM_INFINITY))
    assert compile_resource_failure(compile_error) is None  # the error stays torch's, with a note
    assert any("ulimit -f" in note and "65536" in note for note in compile_error.__notes__)


def test_a_pin_that_cannot_be_made_gets_the_errnos_advice(monkeypatch, tmp_path):
    """load's pinned copy of a model library said "check the temporary folder (TMPDIR) is writable and has room" to
    every OSError, too many open files included."""
    import shutil

    from aotcuda.runtime import libraries

    def refused(*args, **kwargs):
        raise _error(errno.EMFILE)

    monkeypatch.setattr(libraries.shutil, "copytree", refused)
    with pytest.raises(PackageError, match=r"cannot keep a copy of the model library .* \(Too many open files\); this "
                                           r"process has too many files open: raise its limit \(ulimit -n\)"):
        libraries._pin_library_folder(str(tmp_path / "m.so"), made := [])
    monkeypatch.undo()
    for folder in made:  # open_shared removes it on the error
        shutil.rmtree(folder)


def test_a_compile_out_of_memory_is_named_with_its_limit(monkeypatch):
    """Under `ulimit -v` 1 GB, `aotcuda lower` of a Linear(1024, 1024) ended in `error: InductorError: MemoryError:`
    and nothing after it (torch's `bytearray` of the weights, in this process); the compiler's own allocation failure
    is a bare "C++ compile error" (the file-system breaker, 2026-12-06). Both are named now, with the limit."""
    from torch._inductor.exc import CppCompileError, InductorError

    from aotcuda.lowering.compile_failures import compile_resource_failure

    limits = {resource.RLIMIT_AS: (1_024_000_000, resource.RLIM_INFINITY)}
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits.get(which, (resource.RLIM_INFINITY,) * 2))
    try:
        bytearray(1 << 62)
    except MemoryError as inner:
        named = compile_resource_failure(InductorError(inner, None))
    assert isinstance(named, PackageError), named
    assert str(named).startswith("the compile ran out of memory (torch's compiler, in this process: a MemoryError); "
                                 "this process's address-space limit (ulimit -v) is 1,024,000,000 bytes"), str(named)
    assert "ulimit -v unlimited" in str(named)
    compiler = CppCompileError(["g++", "x.cpp"], "cc1plus: out of memory allocating 65536 bytes after a total of 0")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    named = compile_resource_failure(InductorError(compiler, None))
    assert isinstance(named, PackageError) and "(the C++ compiler says so); free memory" in str(named), named
