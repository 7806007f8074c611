"""A program without standard streams that uses aotcuda as a library (aotcuda.standard_descriptors).

The CLI's own case and the files a load writes are in tests/runtime/test_load_cycles.py."""

import os
import subprocess
import sys

_LOWERED_WITHOUT_STANDARD_STREAMS = """
import os, sys, threading
said, stop = sys.argv[1], threading.Event()


def c_output():  # another thread's C output (printf, std::cerr, a native library's log line), all along
    while not stop.is_set():
        for number in (1, 2):
            try:
                os.write(number, b"JUNK")
            except OSError:  # closed: as C's write fails
                pass
        stop.wait(0.0005)


threading.Thread(target=c_output, daemon=True).start()
import torch
import aotcuda


class Sine(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) * 2


try:
    lowered = aotcuda.lower(Sine(), (torch.randn(3, 4),), device="cpu",
                            package_path=os.path.join(os.environ["TMPDIR"], "sine.pt2"))
    x = torch.randn(3, 4)
    with aotcuda.load(lowered.package_path) as program:
        torch.testing.assert_close(program(x), Sine()(x))
    result = "ran as eager"
except Exception as error:
    result = f"{type(error).__name__}: {str(error)[-600:]}"
stop.set()
with open(said, "w") as file:
    file.write(result)
"""


def test_a_program_started_without_standard_streams_lowers_and_loads(tmp_path):
    """fix40b: ``aotcuda.lower`` called in a process started with 0, 1 and 2 closed (a daemon's, ``<&- >&- 2>&-``),
    with a thread writing C output to 1 and 2: the files torch and Inductor opened took those numbers, so the output
    went into Inductor's compile locks, the temporary files of its atomic writes and its precompiled header
    (``JUNK`` as the header's first line: g++ refused it, the lowering failed, and the header stayed in the shared
    cache for the next lowering). ``lower`` and ``load`` put /dev/null on a closed 0-2 first."""
    said = tmp_path / "said"
    work = tmp_path / "work"  # the cache folders, the temporary files (the precompiled headers' too) and the package
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(work),
           "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor")}
    done = subprocess.run(["sh", "-c", 'exec "$@" <&- >&- 2>&-', "sh", sys.executable, "-c",
                           _LOWERED_WITHOUT_STANDARD_STREAMS, str(said)], env=env, timeout=600)
    assert done.returncode == 0 and said.exists(), f"the child ended with code {done.returncode}"
    assert said.read_text() == "ran as eager", said.read_text()
    written = [str(path.relative_to(work)) for path in work.rglob("*")
               if path.is_file() and not path.is_symlink() and b"JUNK" in path.read_bytes()]
    assert written == [], written  # no file of torch's, Inductor's or aotcuda's took a thread's output


_ANOTHER_THREAD_OPENS_FIRST = """
import os, sys
from aotcuda import standard_descriptors

os.close(2)
real_open, theirs = os.open, []


def open_after_another_thread(path, *args):  # another thread's open lands between the check and /dev/null's
    if not theirs:
        theirs.append(real_open(sys.argv[1], os.O_RDONLY))
    return real_open(path, *args)


os.open = open_after_another_thread
standard_descriptors.fill_closed()
os.write(1, f"{theirs} {os.path.realpath('/proc/self/fd/2')}".encode())
"""


def test_filling_a_closed_descriptor_never_replaces_another_threads_file(tmp_path):
    """A library fills 0-2 in a process that may have other threads: checking that 2 is closed and then putting
    /dev/null on it with dup2 replaced the file another thread had opened at 2 in between (its reads then read
    /dev/null). /dev/null is kept only where open put it."""
    (tmp_path / "theirs").write_text("another thread's file")
    done = subprocess.run([sys.executable, "-c", _ANOTHER_THREAD_OPENS_FIRST, str(tmp_path / "theirs")],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout == f"[2] {tmp_path / 'theirs'}", (done.returncode, done.stdout)  # was: [2] /dev/null
