"""A SIGINT sent to this process alone, passed on to the processes it started, as a terminal's Ctrl-C reaches them.

Why: a terminal's Ctrl-C goes to the whole foreground process group, so a compiler Inductor runs (g++, and the
cc1plus g++ runs in turn) stops at once with the command. A SIGINT to the command's process alone (``kill -INT PID``,
a supervisor, a script's ``Popen.send_signal``) reached Python only: subprocess.run waited 0.25 s, then killed the g++
driver with SIGKILL, and cc1plus, which no signal reached, went on writing into the temporary folder torch was
removing (``_precompile_header``'s ``header.i``). The removal failed (``OSError: [Errno 39] Directory not empty``),
which replaced the interrupt: `aotcuda lower` said ``error: InductorError: OSError ...``, exited 1, and left the folder
in the temporary folder (a new user's trial, nu39, 2026-12-07).

Only descendants in this process's own group get the signal: those the terminal's Ctrl-C would have reached with it
(a child that made a group or session of its own chose not to be). A descendant that the terminal's Ctrl-C did reach
gets it twice, which a compiler, being stopped, takes as once. Linux only (it reads /proc); elsewhere nothing is sent.
This module imports neither torch nor the rest of aotcuda.
"""

from __future__ import annotations

import os
import signal


def _process_table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, process group)} of every process /proc shows; {} without /proc."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        # "pid (comm) state ppid pgrp ...": the command name may hold spaces and parentheses, so split after its last ")"
        fields = text[text.rfind(b")") + 1:].split()
        if len(fields) >= 3 and fields[1].isdigit() and fields[2].isdigit():
            table[int(name)] = (int(fields[1]), int(fields[2]))
    return table


def descendants_in_group(pid: int | None = None) -> list[int]:
    """The processes below ``pid`` (this process by default: its children, theirs, ...) that are in its process
    group, parents before children."""
    pid = os.getpid() if pid is None else pid
    table = _process_table()
    group = table[pid][1] if pid in table else os.getpgid(pid)
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, waiting, seen = [], [pid], {pid}
    while waiting:
        for child in children.get(waiting.pop(0), ()):
            if child not in seen:  # a table read while processes come and go: each pid once
                seen.add(child)
                waiting.append(child)
                if table[child][1] == group:
                    found.append(child)
    return found


def interrupt_descendants_in_group() -> None:
    """Send SIGINT to each process ``descendants_in_group`` finds, as the terminal's Ctrl-C would have. A process
    that ended meanwhile is skipped. As with any kill by pid, a pid freed and handed to another process between the
    read and the kill (microseconds; Linux hands pids out in order, wrapping at pid_max) would get it instead."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):  # a /proc of another pid namespace: its pids are not ours
            return
        found = descendants_in_group()
    except OSError:  # no /proc: nothing is known of the children, nothing is sent
        return
    for pid in found:
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:  # ended, or became another user's
            pass
