"""A signal's handler that raises (Ctrl-C's KeyboardInterrupt, a SIGALRM timeout) while a call is inside the runtime.

Python runs a signal's handler between bytecodes, so its exception may surface as any call the runtime makes
returns: also as torch's call that hands the model's output handles to new tensors returns, before those tensors
reach the runtime. They are dropped then, and release the handles; the runtime's error path released the same
handles again: a double free, and the process died of SIGSEGV (found by the breaker, 2026-12-05: Ctrl-C during a
loop of calls). And the call gate's entry, made with a call and removed at the start of ``__exit__``, stayed when the
exception came at either point: a later ``close()`` on another thread waited for that call for ever. Each case runs
in a child process, so that a regression fails the test instead of the session.
"""

import os
import subprocess
import sys
import textwrap

import pytest

# The exception raised exactly where the crash was: as torch's steal of the output handles returns.
AS_THE_STEAL_RETURNS = textwrap.dedent("""
    import sys, torch, aotcuda
    import aotcuda.runtime.handles as handles
    program = aotcuda.load(sys.argv[1])
    x = torch.randn(3, 4)  # Twice takes (batch, 4), Scaled (3, 4)
    expected = [t.clone() for t in program.execute([x])]
    real = handles._alloc_by_stealing

    def interrupted(capsules):
        tensors = real(capsules)  # torch's tensors own the handles now ...
        raise KeyboardInterrupt   # ... and the handler's exception comes before they reach the runtime

    for round in range(3):
        handles._alloc_by_stealing = interrupted
        try:
            program.execute([x])
            print("no interrupt")
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        handles._alloc_by_stealing = real
        got = program.execute([x])
        assert all(torch.equal(g, e) for g, e in zip(got, expected)), "the next call is wrong"
    print("next calls right")
""")

# The start of a child that a timer interrupts: its SIGALRM handler raises KeyboardInterrupt, as Ctrl-C's does.
_TIMER_RAISES = textwrap.dedent("""
    import os, signal, sys, threading, torch, aotcuda

    def interrupt(number, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, interrupt)
    program = aotcuda.load(sys.argv[1])
""")

# Ctrl-C as it comes: a timer's handler raising KeyboardInterrupt wherever the main thread happens to be.
UNDER_A_TIMER = _TIMER_RAISES + textwrap.dedent("""
    x = torch.randn(64, 4)
    expected = [t.clone() for t in program.execute([x])]
    interrupts = 0
    for round in range(300):
        try:  # armed inside the try: a process paused right after arming gets the handler's exception at once
            signal.setitimer(signal.ITIMER_REAL, 0.0002 + 0.00001 * (round % 20))
            for _ in range(5000):
                program.execute([x])
        except KeyboardInterrupt:
            interrupts += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
    got = program.execute([x])
    assert all(torch.equal(g, e) for g, e in zip(got, expected)), "the next call is wrong"
    print("interrupted", interrupts, "times; next call right")
""")


# Interrupts, then a close on another thread (a server's shutdown after a Ctrl-C'd request): it must return.
CLOSE_AFTER_INTERRUPTS = _TIMER_RAISES + textwrap.dedent("""
    x = torch.randn(8, 4)
    interrupts = 0
    for round in range(1500):
        try:  # armed inside the try (see UNDER_A_TIMER)
            signal.setitimer(signal.ITIMER_REAL, 0.0001 + 0.000003 * (round % 37))
            for _ in range(5000):
                program(x)
        except KeyboardInterrupt:
            interrupts += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
    closer = threading.Thread(target=program.close, daemon=True)
    closer.start()
    closer.join(10)
    print("interrupted", interrupts, "times;", "close hung" if closer.is_alive() else "closed", flush=True)
    os._exit(0)
""")


# A signal's handler that calls the program, run (as handlers run: between bytecodes) while the interrupted call held
# the lock of the shapes it remembers: the handler's call waited for that lock for ever. The hook below runs a
# handler's call at each line of the remembering, each of another shape (so that it remembers too).
CALL_FROM_A_HANDLER_INSIDE_THE_SHAPE_LOCK = textwrap.dedent("""
    import sys, faulthandler, torch, aotcuda
    faulthandler.dump_traceback_later(60, exit=True)
    program = aotcuda.load(sys.argv[1])
    fired, busy = [], []

    def handler_here(frame, event, arg):
        if event == "line" and not busy:
            busy.append(1)
            fired.append(1)
            x = torch.randn(7 + len(fired), 4)
            assert torch.equal(program(x)[0], x * 2)  # the handler's own call
            busy.pop()
        return handler_here

    sys.settrace(lambda frame, event, arg: handler_here if frame.f_code.co_name == "remember" else None)
    x = torch.randn(5, 4)
    got = program(x)
    sys.settrace(None)
    assert fired and torch.equal(got[0], x * 2)
    print("both calls returned", flush=True)
""")

# A SIGTERM handler that closes the Program while the main thread's own close() waits for a call in flight on
# another thread (a shutdown, and the orchestrator's SIGTERM): the handler's close waited for the lock its own
# thread held, for ever.
CLOSE_FROM_A_HANDLER_DURING_CLOSE = textwrap.dedent("""
    import os, signal, sys, threading, faulthandler, torch, aotcuda
    faulthandler.dump_traceback_later(60, exit=True)
    program = aotcuda.load(sys.argv[1])
    real_run, inside, release = program._container.run, threading.Event(), threading.Event()

    def held_run(*args, **kwargs):  # the other thread's call stays in flight until released
        inside.set()
        release.wait(30)
        return real_run(*args, **kwargs)

    program._container.run = held_run
    caller = threading.Thread(target=lambda: program(torch.randn(5, 4)))
    caller.start()
    inside.wait(30)
    handled = []
    signal.signal(signal.SIGTERM, lambda number, frame: handled.append(program.close()))
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()  # while close() below waits
    threading.Timer(1.0, release.set).start()
    program.close()
    caller.join(30)
    print("closed; the handler's close returned", handled, flush=True)
""")


# Ctrl-C at every point of one call where Python may run a signal's handler: where a Python function begins, at a
# backward jump, and where a call of a C function returns (sys.settrace's opcode events; after a call of a Python
# function Python runs no handler, and none is raised there). After each: the gate holds no call (a close() on
# another thread returns), the next call is right, and no input handle leaked (the use count of the input's storage is
# back where it was: a handle torch made and nobody holds keeps it up for the life of the process).
_AT_A_POINT = textwrap.dedent("""
    import dis, os, sys, threading, torch, aotcuda
    runtime = os.path.dirname(aotcuda.__file__) + os.sep + "runtime"
    points, state = {}, {"n": 0, "target": 0, "hit": None}
    python_call_returned = set()  # frames whose last call was of a Python function

    def breaker_points(code):
        if code not in points:
            found, previous = set(), None
            for instruction in dis.get_instructions(code):
                if instruction.opname in ("RESUME", "JUMP_BACKWARD") or (
                        previous is not None and previous.opname in ("CALL", "CALL_FUNCTION_EX")):
                    found.add(instruction.offset)
                previous = instruction
            points[code] = found
        return points[code]

    def local(frame, event, arg):
        if event == "opcode" and frame.f_lasti in breaker_points(frame.f_code):
            if id(frame) in python_call_returned and dis.opname[frame.f_code.co_code[frame.f_lasti]] != "RESUME":
                python_call_returned.discard(id(frame))
                return local
            state["n"] += 1
            if state["n"] == state["target"]:
                state["hit"] = f"{frame.f_code.co_name}:{frame.f_lineno}@{frame.f_lasti}"
                raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        if frame.f_back is not None:
            python_call_returned.add(id(frame.f_back))
        if not frame.f_code.co_filename.startswith(runtime):
            return None
        frame.f_trace_opcodes, frame.f_trace_lines = True, False
        return local
""")
AT_EVERY_POINT = _AT_A_POINT + textwrap.dedent("""
    program = aotcuda.load(sys.argv[1])
    x = torch.randn(5, 4)
    bind = sys.argv[2:] == ["bind"]  # Program.bind: on the CPU refused after its gate's entry, by bind_graph
    from runtime_programs import cerr_muted
    from aotcuda.runtime.libloader import cxx_error_mute
    muting = bool(os.environ.get("AOTCUDA_FOREIGN_WRITES"))  # std::cerr muted during each run: never after one
    call, refused = (lambda: program(x), KeyboardInterrupt)
    if bind:
        call, refused = lambda: program.bind([x]), aotcuda.RuntimeCallError
    storage_uses = lambda: torch._C._storage_Use_Count(x.untyped_storage()._cdata)
    expected = [t.clone() for t in program(x)]
    problems, leaks, uses = [], [], storage_uses()
    while True:
        state.update(n=0, target=state["target"] + 1, hit=None)
        python_call_returned.clear()
        sys.settrace(tracer)
        try:
            call()
        except (KeyboardInterrupt, refused):
            pass
        finally:
            sys.settrace(None)
        if state["hit"] is None:
            break
        if program._gate.in_flight:
            problems.append(f"a call's entry stayed: {state['hit']}")
            break
        if muting and (cxx_error_mute() is None or cerr_muted()):
            problems.append(f"std::cerr stayed muted: {state['hit']}" if cxx_error_mute() else "no mute")
            break
        if storage_uses() != uses:
            leaks.append(state["hit"])
            uses = storage_uses()
        if not all(torch.equal(g, e) for g, e in zip(program(x), expected)):
            problems.append(f"the next call is wrong: {state['hit']}")
    closer = threading.Thread(target=program.close, daemon=True)
    closer.start()
    closer.join(10)
    print("points", state["target"] - 1, "leaks", leaks, "problems", problems, "closed", not closer.is_alive(), flush=True)
""")


def _child(script, package, *args, **env):
    here = os.path.dirname(os.path.abspath(__file__))  # runtime_programs
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path]), **env}
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", script, package, *args], capture_output=True,
                          text=True, timeout=300, env=environment)


@pytest.mark.parametrize("package, switches", [
    ("twice_pt2", {}),  # one handle in two slots: ownership.adopt_all (main: SIGSEGV at the first interrupt)
    ("scaled_pt2", {}),  # one output: the OutputStealer
    ("scaled_pt2", {"AOTCUDA_FOREIGN_WRITES": "1"}),  # its capsules made once and rewritten
])
def test_an_interrupt_as_the_outputs_are_handed_over_is_raised_and_frees_nothing_twice(package, switches, request):
    done = _child(AS_THE_STEAL_RETURNS, request.getfixturevalue(package), **switches)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.split() == ["KeyboardInterrupt"] * 3 + ["next", "calls", "right"], done.stdout


def test_ctrl_c_during_a_loop_of_calls_raises_keyboard_interrupt_and_the_program_goes_on(twice_pt2):
    done = _child(UNDER_A_TIMER, twice_pt2)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert "next call right" in done.stdout and int(done.stdout.split()[1]) > 100, done.stdout


def test_close_on_another_thread_after_interrupted_calls_returns(twice_pt2):
    done = _child(CLOSE_AFTER_INTERRUPTS, twice_pt2)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.split()[-1] == "closed" and int(done.stdout.split()[1]) > 1000, done.stdout


def test_a_call_from_a_signal_handler_inside_the_interrupted_calls_shape_lock_returns(twice_pt2):
    done = _child(CALL_FROM_A_HANDLER_INSIDE_THE_SHAPE_LOCK, twice_pt2)  # main: hung (the child's own timeout ends it)
    assert done.returncode == 0 and "both calls returned" in done.stdout, done.stdout + done.stderr[-2000:]


def test_a_close_from_a_signal_handler_while_close_waits_returns(twice_pt2):
    done = _child(CLOSE_FROM_A_HANDLER_DURING_CLOSE, twice_pt2)  # main: hung
    assert done.returncode == 0 and "the handler's close returned [None]" in done.stdout, \
        done.stdout + done.stderr[-2000:]


@pytest.fixture(scope="module")
def every_point(twice_pt2):
    """One child run of AT_EVERY_POINT, read by the two tests below."""
    return _child(AT_EVERY_POINT, twice_pt2)


def test_an_interrupt_at_every_point_a_handler_may_run_leaves_the_program_working(every_point):
    done = every_point
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    words = done.stdout.split()
    assert int(words[1]) > 50 and done.stdout.strip().endswith("problems [] closed True"), done.stdout


def test_an_interrupt_at_every_point_of_a_muted_run_leaves_std_cerr_unmuted(twice_pt2):
    """AOTCUDA_FOREIGN_WRITES mutes std::cerr during each run: the mute was a context manager, and an interrupt as its
    setter returned inside ``__enter__`` (no ``__exit__`` follows) or as ``__exit__`` began left std::cerr muted for
    good, its depth up so that no later run unmuted it (main: muted at ``__enter__:190@132``)."""
    done = _child(AT_EVERY_POINT, twice_pt2, AOTCUDA_FOREIGN_WRITES="1")
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert int(done.stdout.split()[1]) > 50 and done.stdout.strip().endswith("problems [] closed True"), done.stdout


def test_an_interrupt_as_the_input_handles_are_made_leaks_none(every_point):
    """torch hands the input handles over as capsules without a destructor, the result of a Python call: an
    interrupt as that call returned (or in the loop that read them) dropped them, and each kept its input's memory
    for the life of the process (main: 8 of 79 points, all in handles.new_handle_array)."""
    done = every_point
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert " leaks [] problems" in done.stdout, done.stdout


def test_an_interrupt_at_every_point_of_bind_leaves_no_entry_in_the_call_gate(twice_pt2):
    """bind entered the gate with ``with gate:``, whose ``__exit__`` is a Python function: an interrupt as it began left
    the call's entry, and a later close() on another thread waited for it for ever (main: the entry stayed at
    ``_leave:84@62``, as ``_thread()`` returned in ``__exit__``; close hung). On the CPU bind is refused inside the
    gate, so every point of its gate runs here."""
    done = _child(AT_EVERY_POINT, twice_pt2, "bind")
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert int(done.stdout.split()[1]) > 20 and done.stdout.strip().endswith("problems [] closed True"), done.stdout


# Ctrl-C at every point of a call whose written input the checks copied into the exported layout (a transposed cache):
# the copy is written back into the caller's tensor after the run, and an interrupt after the run, before that, left
# the caller's tensor without the run's write (the program's buffers had it). After each point: the caller's tensor
# holds the write exactly when the run happened (Stateful counts its runs in step0, read by the next call).
WRITE_BACK_AT_EVERY_POINT = _AT_A_POINT + textwrap.dedent("""
    from runtime_programs import stateful_inputs
    program = aotcuda.load(sys.argv[1])
    x, _, idx = stateful_inputs()
    cache = torch.randn(4, 4).t()  # not the exported layout: copied for the call, and written back after it
    steps = lambda: int(program(x, torch.zeros(4, 4), idx)[1])  # runs so far, this one included
    runs, problems, written = steps(), [], 0
    while True:
        state.update(n=0, target=state["target"] + 1, hit=None)
        python_call_returned.clear()
        before = cache.clone()
        sys.settrace(tracer)
        try:
            program(x, cache, idx)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        now = steps()
        ran, runs = now - runs - 1, now
        written += ran and state["hit"] is not None
        if not torch.allclose(cache, before + x if ran else before):
            problems.append(f"ran {ran}, the caller's tensor {'without' if ran else 'with'} the write: {state['hit']}")
        if state["hit"] is None:
            break
    print("points", state["target"] - 1, "interrupted after the run", written, "problems", problems, flush=True)
""")


def test_an_interrupt_after_the_run_still_writes_back_a_copied_input(stateful_pt2):
    """main: the caller's tensor went without the run's write at each point after the run (from the adoption of the
    outputs to the write-back itself)."""
    done = _child(WRITE_BACK_AT_EVERY_POINT, stateful_pt2)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    words = done.stdout.split()
    assert int(words[1]) > 50 and int(words[6]) > 10 and done.stdout.strip().endswith("problems []"), done.stdout


# An interrupt (or any exception) as a load's model container has just been made: the container, with its model's
# weights, must be deleted, not dropped with the half-made ModelContainer for the life of the process.
AS_THE_CONTAINER_IS_MADE = textwrap.dedent("""
    import gc, sys, aotcuda
    from aotcuda.runtime import container as container_module

    program = aotcuda.load(sys.argv[1])
    lib = program._container._lib  # shared by every later load of this library
    counts = {"made": 0, "deleted": 0}
    real_create, real_delete = lib.AOTInductorModelContainerCreateWithDevice, lib.AOTInductorModelContainerDelete

    def create(*args):
        code = real_create(*args)
        counts["made"] += code == 0
        return code

    def delete(handle):
        counts["deleted"] += 1
        return real_delete(handle)

    lib.AOTInductorModelContainerCreateWithDevice, lib.AOTInductorModelContainerDelete = create, delete
    real_size = container_module.ModelContainer._get_size

    def interrupted(self, name):
        raise KeyboardInterrupt

    container_module.ModelContainer._get_size = interrupted
    for _ in range(3):
        try:
            aotcuda.load(sys.argv[1])
        except KeyboardInterrupt:
            pass
    container_module.ModelContainer._get_size = real_size
    gc.collect()
    again = aotcuda.load(sys.argv[1])
    again.close()
    print("made", counts["made"], "deleted", counts["deleted"], flush=True)
""")


def test_an_interrupt_as_the_model_container_is_made_deletes_it(twice_pt2):
    """main: made 4 deleted 1 (the three interrupted loads' containers were never deleted)."""
    done = _child(AS_THE_CONTAINER_IS_MADE, twice_pt2)
    assert done.returncode == 0, f"the child died (code {done.returncode}):\n{done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.split() == ["made", "4", "deleted", "4"], done.stdout + done.stderr[-2000:]
