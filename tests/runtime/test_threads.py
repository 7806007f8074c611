"""One Program called from many threads, and closed while calls are in flight (issue 12, item 7).

Before the call gate, ``close()`` deleted the model container under a running call: SIGSEGV, the whole
process. The close-under-load test runs in a child process so that such a crash fails one test, not
the session; a test hook holds one call inside the model's run while close() is called, so the race is
hit every time rather than by chance.
"""

import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from runtime_programs import Twice

import aotcuda
from aotcuda.errors import RuntimeCallError

THREADS = 8

CLOSE_UNDER_LOAD = textwrap.dedent("""
    import sys, threading, time, torch, aotcuda
    from aotcuda.errors import RuntimeCallError
    program = aotcuda.load(sys.argv[1])
    lib = program._container._lib
    real_run = lib.AOTInductorModelContainerRun
    inside, release = threading.Event(), threading.Event()

    def held_run(*args):          # the first call waits inside the run until close() has begun
        if not inside.is_set():
            inside.set()
            release.wait(5)
            time.sleep(0.2)       # close() is waiting (or, before the gate, has freed the container)
        return real_run(*args)

    lib.AOTInductorModelContainerRun = held_run
    results, errors = [], []

    def caller():
        for _ in range(200):
            x = torch.randn(8, 4)
            try:
                out = program(x)
            except RuntimeCallError as exc:
                errors.append(str(exc))
                return
            results.append(torch.allclose(out[0], x * 2) and torch.allclose(out[1], x + 1))

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    inside.wait(5)
    closer = threading.Thread(target=program.close)
    closer.start()
    time.sleep(0.05)
    release.set()
    closer.join(10)
    for thread in threads:
        thread.join(10)
    lib.AOTInductorModelContainerRun = real_run
    assert results and all(results), "a call in flight gave a wrong result"
    assert errors and all("this Program was closed" in e for e in errors), errors[:3]
    print("ok", len(results), "calls finished,", len(errors), "refused after close")
""")


def test_close_while_other_threads_are_in_calls(twice_pt2):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", CLOSE_UNDER_LOAD, twice_pt2], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.stdout.startswith("ok")


def _hammer(program, device, calls=40, caller_outputs=False):
    """THREADS threads each make ``calls`` calls on one Program; every result compared with eager."""
    failures = []
    barrier = threading.Barrier(THREADS)

    def worker(seed):
        generator = torch.Generator().manual_seed(seed)
        barrier.wait()
        for index in range(calls):
            x = torch.randn(2 + (seed + index) % 8, 4, generator=generator).to(device)
            want = Twice()(x)
            try:
                if caller_outputs:
                    got = program.execute([x], outputs=[torch.empty_like(w) for w in want])
                else:
                    got = program(x)
                for g, w in zip(got, want):
                    torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
            except Exception as exc:  # noqa: BLE001 - collected and reported by the test
                failures.append(f"thread {seed} call {index}: {type(exc).__name__}: {exc}")
                return

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures[:3]


@pytest.mark.parametrize("caller_outputs", [False, True])
def test_one_program_from_eight_threads_gives_eager_results(twice_pt2, caller_outputs):
    with aotcuda.load(twice_pt2) as program:
        _hammer(program, "cpu", caller_outputs=caller_outputs)


# The list given to execute() is the caller's, which another thread may change while the call runs. The runtime
# checked the tensors in it and then read the list again to make the run's handles: a tensor put there in between
# (here by a trace hook at the run's start, where another thread may do it) reached the generated code unchecked,
# and one whose storage was resized to nothing ended the process (SIGSEGV; the breaker, 2026-12-05).
LIST_CHANGED_DURING_A_CALL = textwrap.dedent("""
    import sys, torch, aotcuda
    program = aotcuda.load(sys.argv[1])
    good, bad = torch.randn(5, 4), torch.randn(5, 4)
    bad.untyped_storage().resize_(0)
    for fast in (True, False):  # the shape accepted before (the accepted-signature path) and not
        if not fast:
            program = aotcuda.load(sys.argv[1])
        inputs = [good]
        if fast:
            program.execute(inputs)

        def swap(frame, event, arg):
            if event == "call" and frame.f_code.co_name == "_run":
                inputs[0] = bad  # after the checks, before the run
            return None

        sys.settrace(swap)
        try:
            got = program.execute(inputs)
        finally:
            sys.settrace(None)
        assert torch.equal(got[0], good * 2), "the run read another tensor than the one checked"
        print("ran on the tensor checked", flush=True)
""")


def test_a_list_changed_during_a_call_is_not_read_again(twice_pt2):
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", LIST_CHANGED_DURING_A_CALL, twice_pt2],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.split("\n")[:2] == ["ran on the tensor checked"] * 2, done.stdout


def test_calls_after_close_raise_the_clear_error(twice_pt2):
    program = aotcuda.load(twice_pt2)
    program.close()
    program.close()  # idempotent
    with pytest.raises(RuntimeCallError, match="this Program was closed; load the package again"):
        program(torch.randn(3, 4))


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_one_cuda_program_from_eight_threads(tmp_path, cuda_graphs):
    from runtime_programs import twice_package

    path = twice_package(tmp_path / "twice_cuda.pt2", device="cuda")
    with aotcuda.load(path, cuda_graphs=cuda_graphs) as program:
        _hammer(program, "cuda", calls=60)
        _hammer(program, "cuda", calls=30, caller_outputs=True)


def test_many_threads_and_more_shapes_than_the_accepted_cache_holds(twice_pt2, monkeypatch):
    """The accepted-signature cache evicted without a lock: two threads evicting at once popped one key twice,
    and a valid call raised KeyError (or "dictionary changed size during iteration"). A cache of 4 entries,
    8 threads calling with 63 shapes, the interpreter switching threads every microsecond; bounded to ~6 s."""
    import time

    from aotcuda.runtime import accepted

    monkeypatch.setattr(accepted, "_MAX_ENTRIES", 4)
    failures, deadline = [], time.monotonic() + 6
    barrier = threading.Barrier(THREADS)

    def worker(seed, program):
        barrier.wait()
        index = 0
        while time.monotonic() < deadline and not failures and index < 3000:
            x = torch.full((2 + (seed * 7 + index) % 63, 4), float(index))
            try:
                got = program(x)
                if not torch.equal(got[1], x + 1):
                    failures.append(f"thread {seed} call {index}: wrong result")
            except Exception as exc:  # noqa: BLE001 - collected and reported by the test
                failures.append(f"thread {seed} call {index}: {type(exc).__name__}: {exc}")
            index += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with aotcuda.load(twice_pt2) as program:
            threads = [threading.Thread(target=worker, args=(seed, program)) for seed in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures[:3]


CLOSE_FROM_A_SIGNAL_HANDLER = textwrap.dedent("""
    import os, signal, sys, torch, aotcuda
    from runtime_programs import Twice

    program = aotcuda.load(sys.argv[1])
    closed_in = []

    def on_sigterm(number, frame):          # a graceful shutdown, as servers write it
        program.close()                     # ...while the main thread is inside a call, beneath this handler
        closed_in.append(program._container.deleted)

    signal.signal(signal.SIGTERM, on_sigterm)
    real_run = program._container.run

    def run_then_signal(*args, **kwargs):   # the signal arrives during the third call's run
        real_run(*args, **kwargs)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next bytecode, inside the call

    program._container.run = run_then_signal
    x, calls = torch.randn(64, 4), []
    try:
        while len(calls) < 10:
            got = program(x)
            torch.testing.assert_close(got[1], Twice()(x)[1])  # the call beneath the handler finished right
            calls.append(1)
        print("never closed")
    except aotcuda.RuntimeCallError as exc:
        assert "closed" in str(exc) and program._container.deleted, exc
        print("closed after", len(calls), "calls; freed before the call returned:", closed_in)
""")


def test_close_from_a_signal_handler_during_a_call_returns_and_frees_after_it(twice_pt2):
    """A SIGTERM handler that closes the Program ran while the main thread was inside a call: close waited for
    that call, which could not return before the handler did. The process hung for good (a second SIGTERM ran
    the same handler, which hung too; only SIGKILL ended it). Now close returns at once, the call beneath it
    finishes with its result, frees the container as it leaves, and the next call says the Program is closed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run([sys.executable, "-c", CLOSE_FROM_A_SIGNAL_HANDLER, twice_pt2], capture_output=True,
                              text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process hung in close() ({exc})")
    assert done.returncode == 0 and "closed after" in done.stdout, done.stdout + done.stderr[-3000:]


def test_an_interrupt_while_close_waits_for_a_call_still_frees_the_program(twice_pt2):
    """Ctrl-C (a signal's KeyboardInterrupt) that came while close() waited for another thread's call in flight: the
    Program was marked closed before the wait, so every later close() (and the finalizer's) returned at once, and
    nothing freed it: its model container (the weights) and its extracted folder stayed for the life of the process
    (break38, 2026-12-07). Now the interrupt goes on, and the last call in flight frees the Program as it leaves."""
    import _thread

    program = aotcuda.load(twice_pt2)
    real_run, inside, release = program._container.run, threading.Event(), threading.Event()

    def held_run(*args, **kwargs):  # the other thread's call stays in flight until released
        inside.set()
        release.wait(30)
        return real_run(*args, **kwargs)

    program._container.run = held_run
    x, results = torch.randn(3, 4), []
    caller = threading.Thread(target=lambda: results.append(program(x)))
    caller.start()
    assert inside.wait(30)
    timer = threading.Timer(0.2, _thread.interrupt_main)  # Ctrl-C while close() waits for that call
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            program.close()
    finally:
        timer.cancel()
        release.set()
        caller.join(30)
    torch.testing.assert_close(results[0][1], x + 1)  # the call in flight finished with its result
    assert program._container.deleted, "the interrupted close() left the model container for the life of the process"
    assert not os.path.exists(program._package.model_dir), "the extracted package folder was left"
    program.close()  # idempotent
    with pytest.raises(RuntimeCallError, match="this Program was closed"):
        program(x)
