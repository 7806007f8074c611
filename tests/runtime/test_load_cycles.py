"""load/close cycles stay flat (issue 12, item 9): before, every load mapped its own copy of the model
library, which close() never unloaded (+58 MiB RSS and 205 deleted .so files still mapped over 200
cycles). glibc cannot unload these libraries (see aotcuda.runtime.libraries), so a load reuses the
library of an earlier load of the same .so; each load still gets its own model container.

CI runs 40 cycles; the full soak: ``AOTCUDA_LOAD_CYCLES=200 python -m pytest -s tests/runtime/test_load_cycles.py``.
"""

import gc
import os
import re
import subprocess
import sys
import textwrap
import time
import zipfile

import psutil
import pytest
import torch

import aotcuda
from aotcuda.errors import PackageError
from aotcuda.runtime.libraries import loaded_libraries
from interrupted_unlink import interrupt_after_an_unlink
from posix_acls import access_acl

CYCLES = int(os.environ.get("AOTCUDA_LOAD_CYCLES", "40"))


def _mapped_model_libraries() -> int:
    """Distinct AOTI model libraries (``*.wrapper.so``) mapped into this process."""
    with open("/proc/self/maps") as maps:
        return len({line.split(None, 5)[-1].strip() for line in maps if ".wrapper.so" in line})


def _cycle(path, x):
    program = aotcuda.load(path)
    out = program(x)
    program.close()
    return out


def test_load_close_cycles_are_flat(twice_pt2):
    x = torch.randn(8, 4)
    for _ in range(3):  # warm-up: the first load maps the library, allocator arenas settle
        _cycle(twice_pt2, x)
    gc.collect()
    libraries, mapped = loaded_libraries(), _mapped_model_libraries()
    rss = psutil.Process().memory_info().rss
    for _ in range(CYCLES):
        out = _cycle(twice_pt2, x)
        torch.testing.assert_close(out[0], x * 2)
    gc.collect()
    grown = (psutil.Process().memory_info().rss - rss) / 2**20
    print(f"\n{CYCLES} load/close cycles: RSS {rss / 2**20:.1f} MiB -> +{grown:.2f} MiB; model libraries "
          f"held {libraries} -> {loaded_libraries()}, mapped {mapped} -> {_mapped_model_libraries()}")
    assert loaded_libraries() == libraries
    assert _mapped_model_libraries() == mapped
    assert grown < 4 + CYCLES * 0.01, f"RSS grew {grown:.1f} MiB over {CYCLES} cycles"


def test_loads_of_one_package_each_get_their_own_container(twice_pt2):
    first, second = aotcuda.load(twice_pt2), aotcuda.load(twice_pt2)
    try:
        assert first._container._lib is second._container._lib
        first.close()  # the other container keeps working on the shared library
        x = torch.randn(5, 4)
        torch.testing.assert_close(second(x)[1], x + 1)
    finally:
        first.close()
        second.close()


class _Weighted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


def test_a_package_whose_weights_its_library_maps_loads_again_after_the_first_load_closed(tmp_path):
    """Weights over 2 GB (a 1B-parameter decoder: benchmarks/decode.py) are appended to the .so, which maps
    them from its own file at each container's creation. The library is shared by every load of the .so;
    when the load that first opened it had closed and removed its folder, the next load failed with
    "Shared library file cannot be opened". force_mmap_weights gives a small model that layout."""
    torch.manual_seed(0)
    model = _Weighted().eval()
    path = aotcuda.lower(model, (torch.randn(3, 16),), device="cpu", package_path=tmp_path / "weighted.pt2",
                         inductor_configs={"aot_inductor.force_mmap_weights": True}).package_path
    for _ in range(3):  # the first load opens the library and closes; each later load reuses it
        x = torch.randn(3, 16)
        program = aotcuda.load(path)
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-6)
        program.close()
        assert not os.path.exists(program._package.model_dir)  # each load's own folder still goes


def test_libraries_are_shared_by_the_bytes_of_the_file_opened(tmp_path):
    """Sharing keys on the file dlopened, not on a name or an archive's claim: the same bytes under two paths
    share one library, other bytes (also at the same path, rewritten) get their own."""
    from aotcuda.runtime.libraries import open_shared

    opened = []

    def fake_open(path):  # stands for dlopen: records what it opened and which bytes that file held
        opened.append(open(path, "rb").read())
        return object()

    for folder, data in (("a", b"model one"), ("b", b"model one"), ("c", b"model two")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.wrapper.so").write_bytes(data)
    one = open_shared(str(tmp_path / "a" / "m.wrapper.so"), "test", fake_open)
    assert open_shared(str(tmp_path / "b" / "m.wrapper.so"), "test", fake_open) is one
    assert open_shared(str(tmp_path / "c" / "m.wrapper.so"), "test", fake_open) is not one
    (tmp_path / "a" / "m.wrapper.so").unlink()  # same path, other bytes (a new file, as an extraction makes)
    (tmp_path / "a" / "m.wrapper.so").write_bytes(b"model three")
    assert open_shared(str(tmp_path / "a" / "m.wrapper.so"), "test", fake_open) is not one
    assert opened == [b"model one", b"model two", b"model three"]


FORK_THEN_LOAD = textwrap.dedent("""
    import os, shutil, sys, torch, aotcuda
    signed, unsigned = sys.argv[1:]

    def mapped_libraries():               # the model libraries' files, as the process mapped them
        with open("/proc/self/maps") as maps:
            return sorted({line.split(None, 5)[-1].strip().removesuffix(" (deleted)")
                           for line in maps if ".wrapper.so" in line})

    first = aotcuda.load(signed)          # pins its library into this process's folder
    child = os.fork()
    if child == 0:
        sys.exit(0)                       # the child's normal exit runs the exit handlers it inherited
    assert os.waitpid(child, 0)[1] == 0
    x = torch.randn(5, 4)
    assert os.path.exists(first._package.model_dir), "the child removed the parent's extracted package"
    pinned = mapped_libraries()
    assert all(os.path.exists(p) for p in pinned), "the child removed the parent's pinned libraries"
    torch.testing.assert_close(aotcuda.load(unsigned)(x)[1], x + 1)  # a new library: pinned again
    shutil.rmtree(os.path.dirname(os.path.dirname(pinned[0])))      # a temp cleaner removes the folder
    torch.testing.assert_close(aotcuda.load(signed)(x)[1], x + 1)
    assert all(os.path.exists(p) for p in pinned), "a pinned library lost with its folder was not restored"
    torch.testing.assert_close(aotcuda.load(unsigned)(x)[0], x * 2)
    print("ok")
""")


def test_a_forked_child_exiting_leaves_the_parent_able_to_load(twice_pt2, twice_unsigned_pt2):
    """A forked child inherits the exit handlers; its normal exit removed the parent's pinned library folder
    (and extracted packages), and every later load in the parent raised a raw FileNotFoundError."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", FORK_THEN_LOAD, twice_pt2, twice_unsigned_pt2],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-3000:]


# A child forked while other threads of its parent were inside a call, or inside a load: those threads do not live
# on in the child, but their call's entry in the gate and the lock a load held did: the child's close() (and its
# exit, where the Program's finalizer closes it) waited for the call for ever, and its load for the lock; and a
# call that was inside the model container's run holds its one model there, so the child's next call of that
# Program waited for ever (AOTInductorModelContainer::get_available_model; measured with a 0.1 s run). The child
# refuses that Program's calls, naming the fix, and loads it again (the breaker, 2026-12-05). The parent's threads
# are held by hooks (in Python, before the container's run), so the fork meets them every time.
FORK_WHILE_OTHER_THREADS_WORK = textwrap.dedent("""
    import os, sys, threading, time, torch, aotcuda
    import aotcuda.runtime.container as libraries  # its open_model_library runs under the library lock
    package, unsigned = sys.argv[1:]
    program = aotcuda.load(package)
    real_run, real_open = program._container.run, libraries.open_model_library
    inside, release = threading.Event(), threading.Event()

    def held(real):
        def wait_inside(*args, **kwargs):
            inside.set()
            release.wait(30)
            return real(*args, **kwargs)
        return wait_inside

    for where in ("call", "load"):
        inside.clear(); release.clear()
        if where == "call":
            program._container.run = held(real_run)
            worker = threading.Thread(target=lambda: program(torch.randn(5, 4)))
        else:  # a library not opened yet: the load holds the library lock while it opens it
            libraries.open_model_library = held(real_open)
            worker = threading.Thread(target=lambda: aotcuda.load(unsigned).close())
        worker.start()
        inside.wait(30)
        pid = os.fork()
        if pid == 0:
            program._container.run, libraries.open_model_library = real_run, real_open
            x = torch.randn(5, 4)
            child = aotcuda.load(package)
            ok = torch.allclose(child(x)[0], x * 2)
            try:  # a call in flight may hold the container's one model here for ever: refused, not waited for
                answer = program(x)
                ok = ok and where == "load" and torch.allclose(answer[0], x * 2)
            except aotcuda.RuntimeCallError as exc:
                ok = ok and where == "call" and "forked while another thread of its parent was inside a call" in str(exc)
            child.close()
            program.close()
            os._exit(0 if ok else 3)
        release.set()
        worker.join(30)
        program._container.run, libraries.open_model_library = real_run, real_open
        deadline = time.time() + 60  # a hang's wait: a loaded machine's child may take tens of seconds to load
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print(where, "child exited", os.waitstatus_to_exitcode(status), flush=True)
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print(where, "child hung", flush=True)
""")


def test_a_child_forked_while_other_threads_call_or_load_closes_and_loads(twice_pt2, twice_unsigned_pt2):
    # the unsigned package gets a library of its own kind, which the child script's process has not opened yet
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_OTHER_THREADS_WORK, twice_pt2, twice_unsigned_pt2],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.stdout.split("\n")[:2] == ["call child exited 0", "load child exited 0"], done.stdout + done.stderr[-3000:]


# A child forked while another thread of its parent had std::cerr muted (AOTCUDA_FOREIGN_WRITES, a run in flight) or
# fd 2 on /dev/null (the probe run of an unsigned package's load): that thread never ends its run in the child, so
# std::cerr stayed muted there for good (its entry also kept every later run from unmuting), and fd 2 stayed on
# /dev/null: the child's errors went nowhere (the breaker, 2026-12-05). The parent's thread is held by a hook.
FORK_WHILE_STDERR_IS_HELD = textwrap.dedent("""
    import os, sys, threading, torch, aotcuda
    from aotcuda.errors import RuntimeCallError
    from aotcuda.runtime.aoti_checks import latch_aoti_input_checks
    from runtime_programs import cerr_muted
    program = aotcuda.load(sys.argv[1])
    lib = program._container._lib
    real_run, inside, release = lib.AOTInductorModelContainerRun, threading.Event(), threading.Event()

    def held(*args):  # the model's run, held until released
        inside.set()
        release.wait(30)
        return real_run(*args)

    class HeldProbe:  # a container whose probe run is held there, then refuses the probe as AOTI's checks do
        num_inputs = num_outputs = 1

        def run(self, handles, outputs):
            inside.set()
            release.wait(30)
            raise RuntimeCallError("refused")

    for where in ("muted run", "probe"):
        inside.clear(); release.clear()
        if where == "muted run":
            lib.AOTInductorModelContainerRun = held
            worker = threading.Thread(target=lambda: program(torch.randn(5, 4)))
        else:
            worker = threading.Thread(target=latch_aoti_input_checks, args=(HeldProbe(), "cpu", "held.pt2"))
        worker.start()
        inside.wait(30)
        pid = os.fork()
        if pid == 0:
            lib.AOTInductorModelContainerRun = real_run
            at_fork = cerr_muted()
            aotcuda.load(sys.argv[1])(torch.randn(5, 4))
            print(where, "child: std::cerr muted at the fork", at_fork, "after a call", cerr_muted(), flush=True)
            os.write(2, f"{where} child's stderr\\n".encode())
            os._exit(0)
        os.waitpid(pid, 0)
        release.set()
        worker.join(30)
        lib.AOTInductorModelContainerRun = real_run
""")


def test_a_child_forked_while_another_thread_mutes_std_cerr_or_discards_fd_2_has_them_back(twice_pt2):
    """main: the muted run's child had std::cerr muted at the fork and after a call, the probe's child wrote its stderr
    to /dev/null."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AOTCUDA_FOREIGN_WRITES": "1"}
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_STDERR_IS_HELD, twice_pt2],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "muted run child: std::cerr muted at the fork False after a call False" in done.stdout, done.stdout
    assert "muted run child's stderr" in done.stderr and "probe child's stderr" in done.stderr, done.stderr[-3000:]


PLANTED_ROOT = textwrap.dedent("""
    import os, shutil, sys, torch, aotcuda
    signed, unsigned, how, elsewhere = sys.argv[1:]

    def mapped_libraries():
        with open("/proc/self/maps") as maps:
            return sorted({line.split(None, 5)[-1].strip().removesuffix(" (deleted)")
                           for line in maps if ".wrapper.so" in line})

    first = aotcuda.load(signed)
    root = os.path.dirname(os.path.dirname(mapped_libraries()[0]))
    shutil.rmtree(root)                       # a temp cleaner removes this process's folder...
    if how == "folder":                       # ...and another user makes one at its path, open to all
        os.mkdir(root)
        os.chmod(root, 0o777)
        if os.geteuid() == 0:
            os.chown(root, 65534, 65534)
    else:                                     # ...or a link to a folder of theirs
        os.symlink(elsewhere, root)
    x = torch.randn(5, 4)
    torch.testing.assert_close(aotcuda.load(unsigned)(x)[1], x + 1)  # a new library, pinned elsewhere
    planted = root if how == "folder" else elsewhere
    assert os.listdir(planted) == [], f"aotcuda wrote into the planted folder: {os.listdir(planted)}"
    try:                                      # the first library's pin cannot be restored there: refused
        aotcuda.load(signed)
        print("loaded")
    except aotcuda.PackageError as exc:
        print("refused:", exc)
    assert os.listdir(planted) == [], f"aotcuda wrote into the planted folder: {os.listdir(planted)}"
    torch.testing.assert_close(first(x)[1], x + 1)
    print("ok")
""")


@pytest.mark.parametrize("how", ["folder", "symlink"])
def test_a_folder_planted_where_the_pinned_folder_was_is_never_written_into(twice_pt2, twice_unsigned_pt2,
                                                                            tmp_path, how):
    """After a temp cleaner removed the process's pinned folder, aotcuda made it again at the same path with
    os.makedirs(exist_ok=True): a folder another user had made there in between (or a symbolic link to theirs)
    was taken as its own, and the next library was copied into it and dlopened from it, where its owner could
    swap the file first. Now a path this process did not make is never written into."""
    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", PLANTED_ROOT, twice_pt2, twice_unsigned_pt2, how, str(elsewhere)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-3000:]
    assert "refused:" in done.stdout and "restart the process" in done.stdout, done.stdout


KILLED = textwrap.dedent("""
    import os, signal, sys, torch, aotcuda
    program = aotcuda.load(sys.argv[1])
    program(torch.randn(3, 4))
    os.kill(os.getpid(), signal.SIGKILL)      # no exit handler, no finalizer runs
""")


@pytest.mark.parametrize("temp_name", ["temp", os.fsdecode(b"t\xff\nemp")])
def test_the_folders_of_a_process_that_died_are_removed_by_the_next_load(twice_pt2, tmp_path, temp_name):
    """A process killed (SIGKILL, an abort, the OOM killer: a Ray replica that dies) left its extracted
    package and its pinned libraries in the temporary folder, the size of the package each time (this CI
    machine had gathered 118 such folders, 400 MB). Now the next process's first load removes them: each
    such folder names a lock its owner held while it lived.

    Also in a temporary folder whose name is not UTF-8 (and holds a newline): every load there raised a raw
    UnicodeEncodeError (review 12, the file-system breaker: the owner mark was written as text, and the
    container's kernel folder passed to C with str.encode); the mark is the path's bytes now."""
    temp = tmp_path / temp_name
    temp.mkdir()
    (temp / "aotcuda-not-ours").mkdir()   # another folder of the name (a lowering's output): left alone
    (temp / "aotcuda-not-ours" / "model.pt2").write_bytes(b"x")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(temp)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", KILLED, twice_pt2], capture_output=True, text=True,
                              timeout=300, env=env)
        assert done.returncode == -9, done.stderr[-3000:]
    left = sorted(os.listdir(temp))  # the second process removed the first's folders, then was killed itself
    assert len([n for n in left if n.startswith("aotcuda_libraries_")]) == 1, left
    assert len([n for n in left if n.startswith("aotcuda-") and n != "aotcuda-not-ours"]) == 1, left
    done = subprocess.run([sys.executable, "-c", "import sys, aotcuda; aotcuda.load(sys.argv[1]).close()", twice_pt2],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(os.listdir(temp)) == ["aotcuda-not-ours"], os.listdir(temp)


_WITHOUT_STANDARD_STREAMS = r"""
import os, sys
import torch
import aotcuda
from aotcuda.errors import RuntimeCallError
from aotcuda.runtime.libraries import owner_lock

with aotcuda.load(sys.argv[1]) as program:  # an unsigned package: AOTInductor's checks print each refusal on std::cerr
    for _ in range(20):
        try:
            program(torch.randn(3, 4, dtype=torch.float64))
        except RuntimeCallError:
            pass
said = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
standard = sorted({os.path.realpath(f"/proc/self/fd/{fd}") for fd in (0, 1, 2) if fd != said
                   and os.path.exists(f"/proc/self/fd/{fd}")})  # what holds them after the load


def holds_the_lock(fd):
    try:
        return os.path.samefile(owner_lock(), f"/proc/self/fd/{fd}")
    except OSError:  # listdir's own descriptor, closed by now
        return False


numbers = [int(fd) for fd in os.listdir("/proc/self/fd") if holds_the_lock(fd)]
os.write(said, f"{numbers} {os.stat(owner_lock()).st_size} {standard} {os.get_inheritable(numbers[0])}".encode())
"""


def test_the_owner_lock_takes_no_lines_of_a_process_started_without_standard_streams(twice_unsigned_pt2, tmp_path):
    """A process started with file descriptors 0, 1 and 2 closed (a daemon's, `<&- >&- 2>&-`): the pinned root's
    owner.lock, opened at the first load and kept for the process's life, took the number 2, opened for writing, so
    every line C++ wrote on std::cerr went into it: AOTInductor's refusal of each bad call of an unsigned package (79
    bytes a call, 79 KB for 1,000; a service's bad requests, in the temporary folder, for the life of the process).
    The lock is opened for reading only, above 2 (aotcuda.standard_descriptors): nothing is written through it."""
    said = tmp_path / "said"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)}
    env.pop("AOTI_RUNTIME_CHECK_INPUTS", None)
    done = subprocess.run(["sh", "-c", 'exec "$@" <&- >&- 2>&-', "sh", sys.executable, "-c", _WITHOUT_STANDARD_STREAMS,
                           twice_unsigned_pt2, str(said)], env=env, timeout=300)
    assert done.returncode == 0 and said.exists(), f"the child ended with code {done.returncode}"
    numbers, size, standard, inheritable = said.read_text().rsplit(" ", 3)
    assert min(eval(numbers)) > 2 and size == "0", said.read_text()  # the lock above 2 (was: at 2), and empty
    assert eval(standard) in ([], [os.devnull]), said.read_text()  # no file of aotcuda's: /dev/null (load fills 0-2)
    assert inheritable == "False", said.read_text()  # close-on-exec kept by the move (review39b: an exec'd child held it)


_C_OUTPUT_INTO_THE_LIBRARY = """
import os, shutil, sys, zipfile
from aotcuda.runtime.archive import copy_entry
from aotcuda.runtime.libraries import _link_or_copy

folder, payload = sys.argv[1], os.urandom(3 << 20)
with zipfile.ZipFile(os.path.join(folder, "p.zip"), "w") as package:
    package.writestr("lib.so", payload)


class CStdout:  # another thread's C output (printf), written while the entry is copied
    def update(self, chunk):
        try:
            os.write(1, b"JUNK")
        except OSError:  # no stdout: as C's write fails
            pass


with zipfile.ZipFile(os.path.join(folder, "p.zip")) as package:
    os.close(1)  # a process without stdout: the next file opened takes the number 1
    copy_entry(package, package.getinfo("lib.so"), os.path.join(folder, "lib.so"), hasher=CStdout())
exact = open(os.path.join(folder, "lib.so"), "rb").read() == payload
def no_link(source, target):  # the library folder's copy where no hard link can be made
    raise OSError("no hard links here")


os.link = no_link
copy = shutil.copyfileobj


def copy_beside_c_output(*args):
    try:
        os.write(2, b"JUNK")  # std::cerr, while the copy is open
    except OSError:
        pass
    return copy(*args)


shutil.copyfileobj = copy_beside_c_output
os.close(2)
_link_or_copy(os.path.join(folder, "lib.so"), os.path.join(folder, "copy.so"))
copied = open(os.path.join(folder, "copy.so"), "rb").read() == payload
os._exit(0 if exact and copied else 10 + 2 * (not exact) + (not copied))
"""


def test_a_file_aotcuda_writes_never_takes_a_standard_descriptor(tmp_path):
    """break39 (2026-12-07): in a process without stdout or stderr (a daemon's), the extraction of a package's
    library took descriptor 1 or 2, so C output of the process (another thread's printf, std::cerr) written while it
    was open went into the library load then maps: 4 bytes of 'JUNK' in the extracted file here, and in the copy
    of the library folder. Files aotcuda writes are moved above 2 before anything is written
    (aotcuda.standard_descriptors)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _C_OUTPUT_INTO_THE_LIBRARY, str(tmp_path)], env=env, timeout=120,
                          capture_output=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # 12: the extracted file, 11: the copy


_FILLED = """
import os
from aotcuda import standard_descriptors
standard_descriptors.fill_closed()
fd = os.open(os.devnull, os.O_RDONLY)
filled = [os.path.realpath(f"/proc/self/fd/{n}") for n in (0, 2)]
os.write(1, f"{fd} {filled} {os.get_inheritable(0)}".encode())
"""


def test_a_command_puts_dev_null_on_a_closed_stdin_or_stderr(tmp_path):
    """review39b: `aotcuda lower ... 2>&-` held its compile lock (filelock's, Inductor's) at fd 2, and a thread's
    stderr lines went into it (100 KB in a 21 s lowering). The CLI fills a closed 0 or 2 with /dev/null first, as
    glibc does for set-user-ID programs: every file a command opens, torch's too, gets a number above 2."""
    done = subprocess.run(["sh", "-c", 'exec "$@" <&- 2>&-', "sh", sys.executable, "-c", _FILLED],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout == "3 ['/dev/null', '/dev/null'] True", (done.returncode, done.stdout)


def libc_copied_where_no_utf8_names_it(tmp_path, name: str) -> str:
    """The path of a copy of the C library, as ``name`` in a folder whose name is not UTF-8 (and holds a newline):
    a real shared library that is no model, opened from where dlerror()'s text cannot be decoded."""
    import shutil

    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6")
                 if os.path.exists(p)), None)
    if libc is None:
        pytest.fail("no libc found to copy; name one for this platform")
    folder = tmp_path / os.fsdecode(b"t\xff\nemp")
    folder.mkdir()
    shutil.copy(libc, folder / name)
    return str(folder / name)


def test_a_function_a_library_in_a_folder_not_named_in_utf8_lacks_reads_as_absent(tmp_path):
    """The test above failed on the H200 (torch 2.11, 2026-12-05): its package's library lacks a function of the
    C ABI that torch 2.13's has, and asking ctypes for a missing symbol builds the AttributeError from
    dlerror()'s text, which names the path: a path that is not UTF-8 raised UnicodeDecodeError from hasattr
    and the load failed. container.exports answers False there (any library shows it: libc here)."""
    import ctypes

    from aotcuda.runtime.container import exports

    lib = ctypes.CDLL(libc_copied_where_no_utf8_names_it(tmp_path, "libc_copy.so"))
    with pytest.raises(UnicodeDecodeError):   # what hasattr passed on: the case is real here
        getattr(lib, "aotcuda_no_such_function")
    assert exports(lib, "strlen") and not exports(lib, "aotcuda_no_such_function")


def test_a_library_that_cannot_be_opened_in_a_folder_not_named_in_utf8_is_a_package_error(tmp_path):
    """dlopen's failure is raised by ctypes from dlerror()'s text, which names the path: where the path is not UTF-8
    (a TMPDIR named so), building the OSError raised UnicodeDecodeError instead, which passed open_model_library
    raw (a load of a package built by another torch failed with "'utf-8' codec can't decode byte 0xff")."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.libloader import open_model_library

    folder = tmp_path / os.fsdecode(b"t\xff\nemp")
    folder.mkdir()
    (folder / "model.wrapper.so").write_text("not a library, a text as long as an ELF header or longer\n" * 2)
    with pytest.raises(PackageError, match=r"cannot open the model library .*: invalid ELF header'"):
        open_model_library(str(folder / "model.wrapper.so"))


def test_a_library_that_is_no_model_in_a_folder_not_named_in_utf8_is_named_printably(tmp_path):
    """The refusal of a library that lacks the C ABI named its path as it was: a folder name that is not UTF-8 put
    a lone surrogate in the message (print(error) raised UnicodeEncodeError), and a newline in it split the line."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.container import open_library

    with pytest.raises(PackageError, match="is not an AOTInductor model") as refused:
        open_library(libc_copied_where_no_utf8_names_it(tmp_path, "model.wrapper.so"))
    str(refused.value).encode("utf-8")  # printable as it is
    assert "\n" not in str(refused.value)


def test_the_sweep_opens_only_a_lock_file_of_ours_and_never_blocks(tmp_path):
    """A leftover package folder names its owner's lock; once a temp cleaner removed that root, anyone could
    make a folder of the name with a FIFO named owner.lock there, and the sweep's open blocked every later
    load of this user for good. Now only a regular file of this user in a private folder of this user counts
    (opened without blocking): such a leftover is left alone, and the sweep returns at once."""
    from aotcuda.runtime.libraries import OWNER_FILE, OWNER_LOCK, ROOT_PREFIX, sweep_dead_folders

    temp = tmp_path / "temp"
    temp.mkdir()
    leftover = temp / "aotcuda-leftover"
    leftover.mkdir(mode=0o700)
    root = temp / f"{ROOT_PREFIX}gone"
    (leftover / OWNER_FILE).write_text(str(root / OWNER_LOCK))
    root.mkdir()
    os.chmod(root, 0o777)  # re-made by someone else: writable by all
    os.mkfifo(root / OWNER_LOCK)
    sweep = "import sys; from aotcuda.runtime.libraries import sweep_dead_folders as s; print(s(sys.argv[1]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", sweep, str(temp)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]
    os.chmod(root, 0o700)  # a private folder of ours, but the lock is a FIFO, not a file: still not opened
    assert sweep_dead_folders(str(temp)) == [] and leftover.exists()


class SinCos(torch.nn.Module):
    def forward(self, x):
        return (x * 2).sin() + x.cos()


# How Inductor writes a parallel region: as it does by default (torch 2.13 on: with no count, where the count is
# the machine's cores), and with the count of threads fixed in the pragma (torch 2.11's default; any torch where
# config.cpp.threads is set). A fixed count overrides the thread count torch sets (at least 2: a team of one
# never waits).
PRAGMAS = {"default": ({}, b"#pragma omp parallel"),
           "fixed count": ({"cpp.threads": max(2, os.cpu_count() or 2)}, b"#pragma omp parallel num_threads(")}


@pytest.fixture(scope="module", params=sorted(PRAGMAS))
def parallel_pt2(request, tmp_path_factory):
    """A program large enough that Inductor splits its kernel over OpenMP threads (#pragma omp parallel), in
    each way Inductor writes the pragma."""
    from runtime_programs import build_package

    configs, pragma = PRAGMAS[request.param]
    path = build_package(SinCos(), (torch.randn(2048, 1024),), tmp_path_factory.mktemp("parallel") / "p.pt2",
                         inductor_configs=configs)
    with zipfile.ZipFile(path) as archive:
        assert any(pragma in archive.read(n) for n in archive.namelist() if n.endswith(".cpp"))
    return path


CALL_IN_A_FORKED_CHILD = textwrap.dedent("""
    import os, sys, time, torch, aotcuda
    from test_load_cycles import SinCos
    program = aotcuda.load(sys.argv[1])
    x = torch.randn(2048, 1024)
    program(x)                            # the parent's OpenMP threads start
    child = os.fork()
    if child == 0:                        # multiprocessing's default start on Linux, a preforked server
        got = program(x)
        os._exit(0 if torch.allclose(got, SinCos()(x), atol=1e-5) else 3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            print("child exit", os.waitstatus_to_exitcode(status))
            break
        time.sleep(0.2)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        print("child hung")
""")


def test_a_forked_child_calls_a_program_its_parent_ran(parallel_pt2):
    """A child forked after its parent had run a CPU program waited for good in its first OpenMP parallel
    region (GNU OpenMP has no fork handler: the child inherits the pool's state, not its threads; eager torch
    hangs alike). Now such a child runs OpenMP with one thread, and its call returns the right result, also
    where the pragma fixes a count of threads (torch 2.11's code: the child hung on the H200 machine while
    torch.set_num_threads(1) was the whole fix)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    done = subprocess.run([sys.executable, "-c", CALL_IN_A_FORKED_CHILD, parallel_pt2], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0 and "child exit 0" in done.stdout, done.stdout + done.stderr[-3000:]


def test_a_temporary_folder_others_can_write_without_the_sticky_bit_is_refused(twice_pt2, tmp_path, monkeypatch):
    """Review 12 (the file-system breaker): load extracts a package into a new 0700 folder of the temporary folder
    and opens the model library from its files (an unsigned package's library is compared with no digest); in a
    temporary folder others may write into without the sticky bit, another user can rename that folder away and put
    one of theirs, with their library, in its place between the extraction and the open. Such a folder, or one owned
    by another user, is refused before anything is extracted; /tmp's kind (sticky) is fine."""
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    temp.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(PackageError, match=r"will not extract '.*twice.pt2' into the temporary folder '.*temp': it is "
                                           r"writable by other users and not sticky \(mode 0o777\), so another user "
                                           r"could replace the model library.*Point TMPDIR to a folder of your own"):
        aotcuda.load(twice_pt2)
    assert os.listdir(temp) == []
    temp.chmod(0o1777)  # as /tmp: each user's entries stay their own
    program = aotcuda.load(twice_pt2)
    x = torch.randn(3, 4)
    assert torch.equal(program(x)[1], x + 1)
    program.close()


def test_a_temporary_folder_an_acl_lets_another_user_write_into_is_refused(twice_pt2, tmp_path, monkeypatch):
    """Found by breakproc (2026-12-07): the mode's group write bit of a folder whose group is the user's private group
    is taken for the user alone (umask 002), but with a POSIX ACL that bit is the ACL's mask, and a named entry
    (``setfacl -m u:65534:rwx``) lets another user write there: such a temporary folder (mode 0775, root's) passed as
    this user's alone, and load extracted into it, where uid 65534 (who wrote into it, below) could rename the
    extraction folder away and put theirs, with their library, in its place. Now refused, as a 0777 one is."""
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    temp.chmod(0o755)
    os.setxattr(temp, "system.posix_acl_access", access_acl(user=65534))
    assert temp.stat().st_mode & 0o777 == 0o775
    if os.geteuid() == 0:  # the ACL does let that user in: they make a folder there (started in it: pytest's folders
        # above are 0700)
        subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "mkdir", "theirs"], cwd=temp,
                       check=True)
        assert (temp / "theirs").stat().st_uid == 65534
        (temp / "theirs").rmdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(PackageError, match=r"will not extract '.*twice.pt2' into the temporary folder '.*temp': it is "
                                           r"writable by (uid 65534 through a POSIX ACL|other users)"):
        aotcuda.load(twice_pt2)
    assert os.listdir(temp) == []
    os.removexattr(temp, "system.posix_acl_access")  # the ACL gone, mode 0755: the user's alone
    temp.chmod(0o755)
    program = aotcuda.load(twice_pt2)
    x = torch.randn(3, 4)
    assert torch.equal(program(x)[1], x + 1)
    program.close()


def test_a_shared_temporary_folder_the_user_vouches_for_is_used(twice_pt2, tmp_path, monkeypatch):
    """A Kubernetes emptyDir is 0777 without the sticky bit, and may be the only writable place: with
    AOTCUDA_TRUST_SHARED_FOLDERS=1 (the user trusts everyone who can write there) load extracts there."""
    import tempfile

    temp = tmp_path / "emptydir"
    temp.mkdir()
    temp.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
    program = aotcuda.load(twice_pt2)
    assert torch.equal(program(torch.ones(2, 4))[1], torch.full((2, 4), 2.0))
    program.close()


def test_a_temporary_folder_mounted_noexec_is_named_as_such(twice_pt2, tmp_path, monkeypatch, noexec_mount):
    """Found by the breaker (2026-12-06, evening): with TMPDIR on a file system mounted noexec (a hardened /tmp, a
    container's noexec tmpfs), load extracted the package and then said `cannot open the model library ...: failed
    to map segment from shared object. The package may be corrupt, or built by another torch version or for another
    machine; lower the model again with this torch`: advice that cannot help. Now it is refused before anything is
    extracted, naming the mount and the fix. (Here the mount flag is the statvfs answer for the folder: mounting needs
    privileges; a real noexec tmpfs gave the same refusal.)"""
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    noexec_mount(temp)
    with pytest.raises(PackageError, match=r"will not extract '.*twice.pt2' into the temporary folder '.*temp': its file "
                                           r"system is mounted noexec, where no model library can be opened.*Point "
                                           r"TMPDIR to a folder on a file system that allows running code"):
        aotcuda.load(twice_pt2)
    assert os.listdir(temp) == []
    noexec_mount(None)
    with aotcuda.load(twice_pt2) as program:
        x = torch.randn(3, 4)
        assert torch.equal(program(x)[1], x + 1)


def test_an_interrupt_just_after_a_folder_is_made_leaves_none(twice_pt2, tmp_path, monkeypatch):
    """The process breaker (2026-12-06): a signal's KeyboardInterrupt 0.05-30 ms into aotcuda.load left empty
    `aotcuda-*` extraction folders in the temporary folder (made by mkdtemp before open_package's cleanup covered
    them, with no owner file, so no sweep removed them) and `tmp*` pins in the pinned-library root, one per
    interrupt. The interrupt is made to come right after each folder's mkdir, the window it hit (mkdtemp's abspath,
    or before its result was kept): each folder is removed now. A ZipFile interrupted before its __init__ set
    `_writing` printed "Exception ignored in ZipFile.__del__ ... no attribute '_writing'"; no longer."""
    from aotcuda.runtime import libraries
    from aotcuda.runtime.libraries import PACKAGE_PREFIX, ROOT_PREFIX

    import tempfile

    aotcuda.load(twice_pt2).close()  # the pinned root of this process, made before the interrupts
    root = libraries._pinned_root()
    temp = tmp_path / "temp"  # the extractions' own, not the one other processes share
    temp.mkdir(mode=0o700)
    temp = str(temp)
    monkeypatch.setattr(tempfile, "tempdir", temp)
    made = os.mkdir

    for inside in (temp, root):  # the extraction folder, then the pin
        def interrupted_after(path, mode=0o777, *, dir_fd=None, inside=inside):
            made(path, mode, dir_fd=dir_fd)
            name = os.path.basename(path)
            if os.path.dirname(os.path.abspath(path)) == inside and not name.startswith(ROOT_PREFIX) and \
                    (inside == root or name.startswith(PACKAGE_PREFIX)):
                raise KeyboardInterrupt

        before = set(os.listdir(temp)), set(os.listdir(root))
        monkeypatch.setattr(os, "mkdir", interrupted_after)
        with pytest.raises(KeyboardInterrupt):
            aotcuda.load(twice_pt2)
        monkeypatch.setattr(os, "mkdir", made)
        assert (set(os.listdir(temp)), set(os.listdir(root))) == before

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    real_lock = zipfile.threading.RLock

    def interrupted_lock(*args):  # ZipFile.__init__ takes its lock after its fp, before `_writing`
        if sys._getframe(1).f_code is zipfile.ZipFile.__init__.__code__:
            raise KeyboardInterrupt
        return real_lock(*args)

    monkeypatch.setattr(zipfile.threading, "RLock", interrupted_lock)
    with pytest.raises(KeyboardInterrupt):
        aotcuda.load(twice_pt2)
    monkeypatch.setattr(zipfile.threading, "RLock", real_lock)
    gc.collect()
    assert [str(u.exc_value) for u in unraisable] == []


def test_an_interrupt_inside_a_failed_loads_cleanup_leaves_no_folder(twice_pt2, tmp_path, monkeypatch):
    """A second interrupt that arrives inside a failed load's own cleanup (its ``rmtree``) ended the cleanup half-way:
    the extraction folder stayed, its owner file gone first, so no sweep knew it as ours; a pin stayed until the
    process's exit (the process breaker's open item, 2026-12-06: one stray pin in four fuzz runs). Here the load is
    interrupted once the folder is filled (the extraction, then the pin), and again after the cleanup's first
    unlink: each folder is removed whole, and the interrupt still reaches the caller; the next load works."""
    from aotcuda.runtime import libraries, package

    import tempfile

    aotcuda.load(twice_pt2).close()  # the pinned root of this process, made before the interrupts
    root = libraries._pinned_root()
    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    armed, _ = interrupt_after_an_unlink(monkeypatch)

    def interrupt(*args, **kwargs):  # the first interrupt: the load fails with its folder filled
        armed.append(True)
        raise KeyboardInterrupt

    for module, step in ((package, "_describe_model"), (libraries, "file_digest")):
        before = set(os.listdir(temp)), set(os.listdir(root))
        with monkeypatch.context() as patched:
            patched.setattr(module, step, interrupt)
            with pytest.raises(KeyboardInterrupt):
                aotcuda.load(twice_pt2)
        assert not armed, f"{step}: the cleanup's unlink was not interrupted"
        gc.collect()
        assert (set(os.listdir(temp)), set(os.listdir(root))) == before, step
    with aotcuda.load(twice_pt2) as program:
        assert torch.equal(program(torch.ones(2, 4))[1], torch.full((2, 4), 2.0))


def test_an_interrupt_as_the_pinned_root_is_made_leaves_none(tmp_path, monkeypatch):
    """The pinned root (made at a process's first pin, and a forked child's) came from mkdtemp, its exit handler
    registered after: an interrupt between them left an empty `aotcuda_libraries_*` folder without its lock file, which
    no sweep removes, for good (the file-system breaker, 2026-12-06). Interrupted right after its mkdir, and again as
    its lock is made: nothing is left, and the next call makes a root that works."""
    from aotcuda.runtime import libraries
    from aotcuda.runtime.libraries import ROOT_PREFIX

    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(libraries, "_root", None)  # this process's own root stays as it is, locked
    made, lock = os.mkdir, libraries._lock_folder

    def interrupted_after(path, mode=0o777, *, dir_fd=None):
        made(path, mode, dir_fd=dir_fd)
        if os.path.basename(path).startswith(ROOT_PREFIX):
            raise KeyboardInterrupt

    def interrupted_lock(folder):
        raise KeyboardInterrupt

    for module, name, step in ((os, "mkdir", interrupted_after), (libraries, "_lock_folder", interrupted_lock)):
        with monkeypatch.context() as patched:
            patched.setattr(module, name, step)
            with pytest.raises(KeyboardInterrupt):
                libraries._pinned_root()
        assert os.listdir(temp) == [], name
    root = libraries._pinned_root()
    assert os.listdir(temp) == [os.path.basename(root)] and os.path.exists(os.path.join(root, "owner.lock"))
    libraries.remove_in_creator(root, os.getpid())
    os.close(libraries._root[2])


def test_an_empty_extraction_folder_without_its_owner_file_is_swept_once_old(tmp_path):
    """What an interrupt inside the folder's making may still leave (an empty `aotcuda-*` folder: its owner file not
    yet written) is removed by a later sweep once it has stayed so UNMARKED_GRACE_S; a fresh one, being made, is not."""
    from aotcuda.runtime.libraries import PACKAGE_PREFIX, UNMARKED_GRACE_S, sweep_dead_folders

    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    old, fresh, full = (temp / f"{PACKAGE_PREFIX}{name}" for name in ("old", "fresh", "full"))
    for folder in (old, fresh, full):
        folder.mkdir(mode=0o700)
    (full / "model.so").write_bytes(b"")  # another version's extraction, without an owner file: left alone
    for folder in (old, full):
        os.utime(folder, (0, time.time() - UNMARKED_GRACE_S - 60))
    assert sweep_dead_folders(str(temp)) == [str(old)]
    assert fresh.exists() and full.exists()


def test_a_relative_tmpdir_python_took_is_not_said_passed_over_after_a_chdir(tmp_path, monkeypatch):
    """Found by break-new 35 (2026-12-07): tempfile makes a relative TMPDIR absolute against the working directory of
    its first call and caches it; after a chdir the same value named a missing folder, and every later load or lower()
    warned "TMPDIR='scratch' does not exist, so Python's tempfile uses '/…/a/scratch' instead": the folder it named. A
    relative TMPDIR Python did pass over is still said."""
    import tempfile
    import warnings

    from aotcuda import shared_folders

    first, then = tmp_path / "a", tmp_path / "b"
    (first / "scratch").mkdir(parents=True, mode=0o700)
    then.mkdir()
    monkeypatch.setattr(shared_folders, "_PASSED_OVER_SAID", set())
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", "scratch")
    monkeypatch.chdir(first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert shared_folders.temporary_folder() == str(first / "scratch")
        monkeypatch.chdir(then)
        assert shared_folders.temporary_folder() == str(first / "scratch")  # Python's choice, kept
    monkeypatch.setenv("TMPDIR", "../b/missing")
    with pytest.warns(UserWarning, match=r"TMPDIR='\.\./b/missing' does not exist, so Python's tempfile uses "):
        shared_folders.say_if_tmpdir_passed_over()


def test_no_writable_temporary_folder_is_a_package_error_naming_tmpdir(tmp_path, monkeypatch):
    """Found by break-new 35 (2026-12-07): where Python's tempfile finds no folder it can write a file in (a read-only
    root file system, TMPDIR naming no folder), load and lower() ended in tempfile's raw FileNotFoundError. Now a
    PackageError says so, with tempfile's list, and the fix; the passed-over warning does not fail first."""
    import tempfile

    from aotcuda import shared_folders
    from aotcuda.errors import PackageError

    missing = str(tmp_path / "missing")
    monkeypatch.setattr(shared_folders, "_PASSED_OVER_SAID", set())
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(tempfile, "_candidate_tempdir_list", lambda: [missing, str(tmp_path / "also_missing")])
    monkeypatch.setenv("TMPDIR", missing)
    with pytest.raises(PackageError, match=r"no temporary folder can be written \(Python's tempfile: No usable "
                                           r"temporary directory found in .*missing.*\); set TMPDIR to a folder of "
                                           r"your own"):
        shared_folders.temporary_folder()


def test_a_tmpdir_python_passed_over_is_said_once(twice_pt2, tmp_path, monkeypatch):
    """Found by the file-system breaker (2026-12-06): a TMPDIR naming a missing folder, a file or a folder this user
    cannot write was passed over by Python's tempfile for /tmp without a word, and load extracted there (a user who set
    TMPDIR to keep packages off a shared or small disk was not told). Now load warns, once for each value, naming the
    value, why and where the files went; a usable TMPDIR is not mentioned."""
    import tempfile
    import warnings

    from aotcuda import shared_folders

    used = tmp_path / "used"
    used.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(used))  # what Python chose, as gettempdir() caches it
    monkeypatch.setattr(shared_folders, "_PASSED_OVER_SAID", set())
    a_file = tmp_path / "a_file"
    a_file.write_bytes(b"")
    x = torch.randn(3, 4)
    for wanted, reason in ((tmp_path / "missing", "does not exist"), (a_file, "is not a folder")):
        monkeypatch.setenv("TMPDIR", str(wanted))
        with pytest.warns(UserWarning, match=rf"TMPDIR='{re.escape(str(wanted))}' {reason}, so Python's tempfile "
                                             rf"uses '{re.escape(str(used))}' instead"):
            with aotcuda.load(twice_pt2) as program:
                assert torch.equal(program(x)[1], x + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once for each value
            aotcuda.load(twice_pt2).close()
    monkeypatch.setenv("TMPDIR", str(used))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aotcuda.load(twice_pt2).close()


def test_an_interrupt_inside_close_leaves_no_folder(twice_pt2, tmp_path, monkeypatch):
    """An interrupt (Ctrl-C) that arrived inside ``close()``'s removal of the extracted package (its ``rmtree``) ended
    it half-way, and the finalizer that removes the folder had run, so nothing tried again: the folder stayed with
    what was left of the package, its owner file gone first, so that no sweep of a later process knew it as ours
    (break38, 2026-12-07). The removal goes on past the interrupt now (as a failed load's cleanup does, the test
    above), and the interrupt still reaches the caller."""
    import tempfile

    aotcuda.load(twice_pt2).close()  # the pinned root of this process, made before the interrupt
    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = set(os.listdir(temp))
    program = aotcuda.load(twice_pt2)
    assert set(os.listdir(temp)) != before  # its extraction folder
    armed, unlink = interrupt_after_an_unlink(monkeypatch)
    armed.append(True)
    with pytest.raises(KeyboardInterrupt):
        program.close()
    monkeypatch.setattr(os, "unlink", unlink)
    assert not armed, "close's removal was not interrupted"
    assert set(os.listdir(temp)) == before, "the extracted package was left in the temporary folder"
    with aotcuda.load(twice_pt2) as again:
        assert torch.equal(again(torch.ones(2, 4))[1], torch.full((2, 4), 2.0))


def test_an_interrupt_after_rmtree_closes_a_folder_reaches_the_caller_as_itself(tmp_path, monkeypatch):
    """Python's rmtree closes a folder's descriptor, then marks it closed; an interrupt whose handler ran between the two
    (as the close returned) made its ``finally`` close the number again, and the caller of ``close()`` got a raw
    ``OSError: [Errno 9] Bad file descriptor`` for its Ctrl-C (break38, 2026-12-07: 3 of 3,600 interrupted load/close
    cycles). The folder is still removed whole, and the interrupt is what reaches the caller."""
    from aotcuda.runtime.libraries import remove_folders

    class Alarm(Exception):  # what a SIGALRM handler of the caller's raises: an Exception, not an interrupt (review)
        pass

    for raised in (KeyboardInterrupt, Alarm):
        folder = tmp_path / f"aotcuda-{raised.__name__}"
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "wrapper.so").write_bytes(b"so")
        close, armed = os.close, [True]

        def closed_then_interrupted(descriptor, close=close, armed=armed, raised=raised):  # closed, then it raises
            close(descriptor)
            if armed:
                armed.clear()
                raise raised

        monkeypatch.setattr(os, "close", closed_then_interrupted)
        with pytest.raises(raised):
            remove_folders([str(folder)])
        monkeypatch.undo()
        assert not armed and not folder.exists()
