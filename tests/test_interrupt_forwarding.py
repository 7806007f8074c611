"""A SIGINT passed on to the processes a command started in its own process group (aotcuda/interrupt_forwarding.py),
as a terminal's Ctrl-C reaches them; the lowering's end to end case is test_cli.py's
test_sigint_to_lowers_pid_alone_during_the_compile_ends_as_ctrl_c_does."""

import subprocess
import sys
import textwrap

# In a child of its own, so that nothing this test runs (or pytest started) is ever sent the signal.
_CHILD = textwrap.dedent("""
    import signal, subprocess, sys, time
    from aotcuda.interrupt_forwarding import descendants_in_group, interrupt_descendants_in_group

    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    grandchild = [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])", *sleep]
    in_group = subprocess.Popen(grandchild)  # a child that runs a child of its own, as g++ runs cc1plus
    apart = subprocess.Popen(sleep, process_group=0)  # a child that made a group of its own
    deadline = time.monotonic() + 60
    while len(descendants_in_group()) < 2 and time.monotonic() < deadline:  # both started, on a loaded machine too
        time.sleep(0.05)
    found = descendants_in_group()
    assert in_group.pid in found and apart.pid not in found and len(found) == 2, (found, in_group.pid, apart.pid)
    interrupt_descendants_in_group()
    assert in_group.wait(timeout=30) != 0  # a KeyboardInterrupt in the child, and in its own child
    time.sleep(0.5)
    assert apart.poll() is None and descendants_in_group() == [], descendants_in_group()
    apart.kill()
    print("ok")
""")


def test_only_descendants_in_the_process_group_are_interrupted():
    result = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120,
                            start_new_session=True)
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr


def test_nothing_is_sent_where_proc_is_another_pid_namespaces(monkeypatch):
    """review39b: in a pid namespace whose /proc is the outer one's (`unshare -pf` without a new mount), /proc/self
    names another process, and the "descendants" read there were the outer kthreadd's: 61 kernel threads. Nothing
    is sent where /proc/self is not this process."""
    from aotcuda import interrupt_forwarding

    sent = []
    monkeypatch.setattr(interrupt_forwarding, "descendants_in_group", lambda pid=None: [12345])
    monkeypatch.setattr(interrupt_forwarding.os, "kill", lambda pid, sig: sent.append(pid))
    monkeypatch.setattr(interrupt_forwarding.os, "readlink", lambda path: "17317")
    interrupt_forwarding.interrupt_descendants_in_group()
    assert sent == []
    monkeypatch.setattr(interrupt_forwarding.os, "readlink", lambda path: str(interrupt_forwarding.os.getpid()))
    interrupt_forwarding.interrupt_descendants_in_group()
    assert sent == [12345]  # this namespace's /proc: sent as before
