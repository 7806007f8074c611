"""A package without aotcuda's signature never runs unchecked (issue 12, item 10).

Its inputs can be checked only by the checks in AOTInductor's generated code, which
AOTI_RUNTIME_CHECK_INPUTS=0 turns off; with that in the environment the package ran a float64 input as
float32 bytes and read a (2, 2) input past its end. Now load refuses, naming the variable and the fix.
"""

import os
import textwrap

import pytest
import torch

import aotcuda
from aotcuda.errors import OutputError, PackageError, RuntimeCallError


@pytest.mark.parametrize("value", ["0", "00", "0 please"])
def test_unsigned_package_is_refused_when_aoti_checks_are_off(twice_unsigned_pt2, monkeypatch, value):
    monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", value)
    with pytest.raises(PackageError, match=r"no aotcuda signature.*AOTI_RUNTIME_CHECK_INPUTS=.*turns them off.*"
                                           r"Unset AOTI_RUNTIME_CHECK_INPUTS.*write_signature"):
        aotcuda.load(twice_unsigned_pt2)


def test_signed_package_runs_checked_whatever_the_variable(twice_pt2, monkeypatch):
    monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", "0")
    with aotcuda.load(twice_pt2) as program:  # aotcuda checks these inputs itself
        with pytest.raises(aotcuda.InputError, match="float64"):
            program(torch.randn(3, 4, dtype=torch.float64))


@pytest.mark.parametrize("value", [None, "1", ""])
def test_unsigned_package_with_checks_on_rejects_wrong_inputs(twice_unsigned_pt2, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("AOTI_RUNTIME_CHECK_INPUTS", raising=False)
    else:
        monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", value)
    with aotcuda.load(twice_unsigned_pt2) as program:
        with pytest.raises(RuntimeCallError, match="unmatched|expected|printed the cause on stderr"):
            program(torch.randn(3, 4, dtype=torch.float64))
        with pytest.raises(RuntimeCallError, match="unmatched|expected|printed the cause on stderr"):
            program(torch.randn(2, 2))
        x = torch.randn(6, 4)
        torch.testing.assert_close(program(x)[1], x + 1)


def test_aotis_refusal_of_an_input_names_the_input_it_numbers(twice_unsigned_pt2):
    """A new user's call of a package torch wrote got `AOTIRuntimeError 1: input_handles[0]: unmatched dtype, expected:
    6(at::kFloat), but got: 7` alone: which input, and whose words, went unsaid."""
    with aotcuda.load(twice_unsigned_pt2) as program:
        with pytest.raises(RuntimeCallError, match=r"input_handles\[0\]") as raised:
            program(torch.randn(3, 4, dtype=torch.float64))
    label = program.input_names[0]
    assert raised.value.__notes__ == [
        f"input_handles[0] is input #0 ({label!r}): the package has no aotcuda signature (aotcuda.lower did not write "
        "it), so AOTInductor's own check in its code refused the call, in its terms; aotcuda.lower writes packages "
        "whose checks name the input and the fix"]


# ---- the variable is scoped to load(): children and later packages do not inherit it ---------------------

_FRESH_PROCESS = r"""
import os, subprocess, sys
import torch
import aotcuda
from aotcuda.errors import RuntimeCallError

before = dict(os.environ)
with aotcuda.load(sys.argv[1]) as program:  # the first run of this library happens in load(), checks on
    assert dict(os.environ) == before, "load() left the environment changed"
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('AOTI_RUNTIME_CHECK_INPUTS'))"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "None", child.stdout
    for wrong in (torch.randn(3, 4, dtype=torch.float64), torch.randn(2, 2)):
        try:
            program(wrong)
        except RuntimeCallError:
            pass
        else:
            raise AssertionError(f"an unchecked run of {wrong.dtype} {tuple(wrong.shape)}")
    x = torch.randn(6, 4)
    torch.testing.assert_close(program(x)[1], x + 1)
print("ok")
"""


def test_unsigned_load_in_a_fresh_process_restores_the_environment_and_still_checks(twice_unsigned_pt2):
    """In a process where no library has run yet (the generated code reads the variable at its library's
    first run): after load() the environment is as before, a subprocess does not see the variable, and
    the package still refuses wrong inputs and runs right ones."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "AOTI_RUNTIME_CHECK_INPUTS"}
    done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, twice_unsigned_pt2], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


@pytest.mark.parametrize("value", [None, "1"])
def test_unsigned_load_leaves_the_variable_as_it_was(twice_unsigned_pt2, monkeypatch, value):
    import os

    if value is None:
        monkeypatch.delenv("AOTI_RUNTIME_CHECK_INPUTS", raising=False)
    else:
        monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", value)
    before = dict(os.environ)
    with aotcuda.load(twice_unsigned_pt2) as program:
        assert dict(os.environ) == before
        with pytest.raises(RuntimeCallError, match="unmatched|expected|printed the cause on stderr"):
            program(torch.randn(3, 4, dtype=torch.float64))
    assert dict(os.environ) == before


# The end of the child scripts below: `program`, loaded, refuses a float64 input through AOTInductor's own checks (they
# were latched on) and runs a float32 one as eager.
_CHECKED_AND_RUNS = r"""
try:
    program(torch.randn(3, 4, dtype=torch.float64))
except RuntimeCallError:
    pass
else:
    raise AssertionError("a float64 input ran unchecked")
x = torch.randn(6, 4)
torch.testing.assert_close(program(x)[1], x + 1)
print("ok")
"""


_TWO_THREADS = r"""
import sys, threading
import torch
import aotcuda
import aotcuda.runtime.program as program_module
from aotcuda.errors import RuntimeCallError
from aotcuda.runtime.aoti_checks import aoti_input_checks

first_run = program_module.latch_aoti_input_checks
other_in, this_in, other_out = threading.Event(), threading.Event(), threading.Event()


def latch_after_the_other_load_left(container, device, path):  # this load's first run, once the other has left
    this_in.set()
    other_out.wait(10)
    first_run(container, device, path)


def other_load():  # another thread's unsigned load: in its block before this one, out of it before this one's run
    with aoti_input_checks("other.pt2"):
        other_in.set()
        this_in.wait(2)  # held until this load is in its own block (or 2 s: where blocks take turns, it never is)
    other_out.set()


program_module.latch_aoti_input_checks = latch_after_the_other_load_left
other = threading.Thread(target=other_load)
other.start()
other_in.wait(10)
program = aotcuda.load(sys.argv[1])
other.join()
""" + _CHECKED_AND_RUNS


def test_an_unsigned_load_beside_another_threads_keeps_its_checks(twice_unsigned_pt2):
    """AOTI_RUNTIME_CHECK_INPUTS is process-wide, and each unsigned load set it around its library's first run and
    removed it after: where another thread's load entered first and left before this one's first run, this library
    read it unset and latched its checks off for good: load raised "AOTInductor's input checks did not reject a
    probe input" (its probe had run unchecked), and so did every later load of the package in the process (the breaker,
    2026-12-06, evening). Now the blocks take turns. In a child process: the library's first run must be the race's."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "AOTI_RUNTIME_CHECK_INPUTS"}
    done = subprocess.run([sys.executable, "-c", _TWO_THREADS, twice_unsigned_pt2], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-3000:]


_FIRST_CALL_BESIDE_A_LOAD = r"""
import sys, threading, time
import torch
import aotcuda
from aotcuda.errors import PackageError
from aotcuda.runtime.aoti_checks import aoti_input_checks, latch_aoti_input_checks
from aotcuda.runtime.container import ModelContainer

program = aotcuda.load(sys.argv[1])  # signed: its library has not run yet in this process
calling, other_in = threading.Event(), threading.Event()
run = ModelContainer.run


def run_told(self, *args, **kwargs):
    calling.set()
    return run(self, *args, **kwargs)


def other_load():  # another thread's unsigned load, in its block while this thread's first call runs
    with aoti_input_checks("other.pt2"):
        other_in.set()
        calling.wait(10)
        time.sleep(0.5)


ModelContainer.run = run_told
other = threading.Thread(target=other_load)
other.start()
other_in.wait(10)
x = torch.randn(3, 4)
torch.testing.assert_close(program(x)[1], x + 1)
other.join()
ModelContainer.run = run
try:  # a probe that AOTInductor's checks refuse at their first comparison: refused only where they are on
    latch_aoti_input_checks(program._container, "cpu", program.package_path)
except PackageError:
    print("ok")
else:
    print("the library latched AOTInductor's checks on")
"""


def test_a_signed_packages_first_call_beside_an_unsigned_load_keeps_the_callers_setting(twice_pt2):
    """A signed package's library keeps the caller's AOTI_RUNTIME_CHECK_INPUTS (docs/reliability.md: AOTInductor's
    checks refuse a size of 1 of a Dim(min=1), which aotcuda's take). Its first run reads the variable once, for good;
    where that run came on one thread while an unsigned load on another held the variable set, the library latched the
    checks on (the breaker, 2026-12-06, evening). Now a container's first run waits for such a load's moment to end.
    In a child process: the library's first run must be the race's."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "AOTI_RUNTIME_CHECK_INPUTS"}
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL_BESIDE_A_LOAD, twice_pt2], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-3000:]


def test_a_containers_first_run_reaches_a_wrapper_of_its_run_once(twice_pt2):
    """The first run takes ENVIRONMENT_LOCK and ran again through ``self.run``, the instance's attribute: a wrapper set
    there (test_leaks.py's ledger of the handles each run writes, a profiler) saw that one run twice, and the CUDA leak
    tests counted two output handles that no run had written (main of the breaker's fix: 2 calls)."""
    with aotcuda.load(twice_pt2) as program:
        container, calls = program._container, []
        real_run = container.run
        container.run = lambda *args, **kwargs: calls.append(1) or real_run(*args, **kwargs)
        assert container._first_run  # a first run still to come
        x = torch.randn(3, 4)
        torch.testing.assert_close(program(x)[0], x * 2)
        assert len(calls) == 1


def test_a_buffer_refused_after_the_run_says_the_program_ran_and_hands_back_its_results(stateful_pt2, tmp_path):
    """A package without a signature has its caller buffers' shapes checked after the run (they are known only from
    it). An unsigned Stateful package refused a (3, 4) buffer for its (2, 4) output with no word that it had run: its
    step counter had moved and its cache input was written, the results were dropped, and the call made again gave
    the second step's (breakcall, 2026-12-07). The error now says that it ran and carries the results, which are
    eager's for that call."""
    import zipfile

    from runtime_programs import Stateful, stateful_inputs

    unsigned = tmp_path / "stateful_unsigned.pt2"
    with zipfile.ZipFile(stateful_pt2) as source, zipfile.ZipFile(unsigned, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                target.writestr(info, source.read(info))
    torch.manual_seed(0)
    eager = Stateful()  # the state the package was lowered with: zeros
    x, cache, idx = stateful_inputs()
    eager_cache = cache.clone()
    expected = eager(x, eager_cache, idx)
    wrong = [torch.empty(3, 4), torch.empty(()), torch.empty(4), torch.empty(()), torch.empty(8, 6)]
    with aotcuda.load(str(unsigned)) as program:
        with pytest.raises(OutputError, match=r"output buffer #0 \(output0\) has shape \(3, 4\), but this call's output "
                                              r"has shape \(2, 4\).*The program has run .*this error's \.results") as caught:
            program.execute([x, cache, idx], outputs=wrong)
        assert len(caught.value.results) == 5
        for got, want in zip(caught.value.results, expected):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cache, eager_cache, rtol=1e-5, atol=1e-6)  # written, as eager writes it
        following = program(x, cache.clone(), idx)  # the next call is the second step, as in eager
        for got, want in zip(following, eager(x, cache.clone(), idx)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# A package that does not say which inputs its program writes (an unsigned one, or an older aotcuda's signature without
# "mutated") had every copied input (a negation view resolved, a bool mask checked) copied back after the run, its own
# values into its own memory: read-only memory (a NumPy memory map) ended the process with SIGSEGV, where eager only
# reads it (breakcall, 2026-12-07). Only a copy the run changed is copied back now.
READ_ONLY_INPUT = textwrap.dedent("""
    import sys, warnings
    import numpy as np, torch
    from runtime_programs import Twice
    import aotcuda

    warnings.simplefilter("ignore")  # torch.from_numpy's "non-writable array" warning: the point of the case
    np.save(sys.argv[2], np.random.randn(6, 4).astype(np.float32))
    x = torch._neg_view(torch.from_numpy(np.load(sys.argv[2], mmap_mode="r")))  # read-only memory, under a view
    with aotcuda.load(sys.argv[1]) as program:
        got = program(x)
    right = all(torch.allclose(g, w) for g, w in zip(got, Twice()(x)))
    print("ran", "right" if right else "WRONG", flush=True)
""")


def test_an_input_in_read_only_memory_the_program_only_reads_is_never_written(twice_unsigned_pt2, tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", READ_ONLY_INPUT, twice_unsigned_pt2, str(tmp_path / "x.npy")],
                          capture_output=True, text=True, timeout=300, cwd=os.path.dirname(__file__))
    assert done.returncode == 0 and done.stdout.strip() == "ran right", \
        f"the child ended with code {done.returncode}: {done.stdout[-500:]}{done.stderr[-1500:]}"


def test_a_written_input_of_a_package_that_does_not_say_is_still_copied_back(stateful_pt2, tmp_path):
    """The other side of the case above: a copy the run wrote (the cache under a negation view) is copied back, bit for
    bit as eager writes it, the sign of a zero included (-0.0 + 0.0 is +0.0)."""
    import zipfile

    from runtime_programs import Stateful, stateful_inputs

    unsigned = tmp_path / "stateful_unsigned.pt2"
    with zipfile.ZipFile(stateful_pt2) as source, zipfile.ZipFile(unsigned, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                target.writestr(info, source.read(info))
    x, cache, idx = stateful_inputs()
    x[0] = 0.0
    cache[0] = 0.0  # under the negation view: -0.0, which the write makes +0.0
    ours, theirs = torch._neg_view(cache.clone()), torch._neg_view(cache.clone())
    with aotcuda.load(str(unsigned)) as program:
        got = program(x, ours, idx)
    want = Stateful()(x, theirs, idx)
    assert torch.equal(ours, theirs) and torch.equal(torch.signbit(ours), torch.signbit(theirs))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


_WITHOUT_STDERR = r"""
import sys
import torch
import aotcuda
from aotcuda.errors import RuntimeCallError

assert sys.stderr is None, "the test meant to start this process with fd 2 closed"
program = aotcuda.load(sys.argv[1])  # the probe run that turns AOTInductor's checks on
""" + _CHECKED_AND_RUNS


def test_an_unsigned_load_in_a_process_started_without_stderr_checks_and_runs(twice_unsigned_pt2):
    """A process started with fd 2 closed (a daemon, `aotcuda run ... 2>&-`): Python's sys.stderr is None there. The
    probe run at an unsigned package's load flushed sys.stderr: load raised a raw AttributeError ('NoneType' object
    has no attribute 'flush'), and `aotcuda run` exited 1 with nothing said. It loads now, AOTInductor's checks on."""
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "AOTI_RUNTIME_CHECK_INPUTS"}
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-c", _WITHOUT_STDERR,
                           twice_unsigned_pt2], env=env, stdout=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", \
        f"the child ended with code {done.returncode}: {done.stdout[-1500:]}"
