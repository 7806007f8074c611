"""When a Program may free its model container: only once no call is in flight.

A server that shuts down under load calls ``Program.close()`` while other threads are inside
``execute``; deleting the model container under a running call frees the memory that call works on
(SIGSEGV, before this gate). ``CallGate`` counts the calls in flight: ``close`` marks the Program closed
(new calls raise RuntimeCallError at once) and then waits until the calls already inside have returned,
so that they finish with their results; only then is the container deleted.

Cost per call: one list append and one pop (atomic in CPython, ~0.1 µs together), not a lock taken
twice (0.4 µs idle, ~2 µs on a loaded machine: a fifth of a tiny program's call). Why it is safe without
a lock: a call registers itself (append) BEFORE it reads ``closed``, and ``close`` sets ``closed`` BEFORE
it reads the count. So either the call's append comes first and close sees it and waits, or close's read
of an empty list comes first, which means ``closed`` was already set when the call read it, and the call
refuses (after taking its entry back out).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
import weakref

CLOSED_MESSAGE = "this Program was closed; load the package again"
FORKED_MESSAGE = ("this process was forked while another thread of its parent was inside a call of this Program, whose "
                  "model that call may hold here for ever; load the package again in this process (or fork before "
                  "the calls begin, or start processes with multiprocessing's 'spawn')")
_GATES: weakref.WeakSet = weakref.WeakSet()  # every live gate, for a forked child (CallGate.forked)
_POLL_S = 0.001  # how often close() looks whether the calls in flight have returned
_thread = threading.get_ident


class CallGate:
    """Entered and left inline around each call (below); ``gate.close(free)`` once, to free what the calls use.

    A call made on the thread that closes (a signal handler that runs ``program.close()`` while the main
    thread is inside a call, or a callback of the call) cannot return before close does: waiting for it
    hung for ever (and a second SIGTERM ran the same handler, which hung too). So close never waits for
    its own thread's calls: it refuses new calls, and the last call to leave frees, after its own work.

    An entry must leave however its call ends, also by an exception a signal's handler raises (Ctrl-C's
    KeyboardInterrupt): Python runs a handler where a call returns and where a Python function begins, so an
    entry made by ``append`` (a call) and one whose ``__exit__`` was interrupted as it began stayed, and a later
    ``close()`` on another thread waited for that call for ever. A call therefore enters and leaves inline
    (``Program.execute``, ``Program.bind``): ``calls += (thread,)``, which calls nothing, right before its ``try``,
    a refusal raised when ``refusal`` is set, and ``calls.remove(thread)`` then ``free_deferred()`` first in its
    ``finally``. No ``__enter__``/``__exit__``: a context manager's ``__exit__`` is a Python function, whose start
    is such a point.
    """

    __slots__ = ("calls", "refusal", "_closed", "_close_lock", "_deferred", "__weakref__")

    def __init__(self) -> None:
        self.calls: list[int] = []  # the thread of each call in flight
        self.refusal: str | None = None  # why a new call is refused (closed; forked during another thread's call)
        self._closed = False
        self._close_lock = threading.Lock()  # close() against close(), and a deferred free against itself
        self._deferred = None  # the free that the last call in flight runs (see the class docstring)
        _GATES.add(self)

    def forked(self) -> None:
        """In a forked child: only the thread that forked lives on, so the calls other threads had in flight in the
        parent will never leave here (close() waited for them for ever, and so did the child's exit, where the
        Program's finalizer closes it), and a lock one of them held stays held. Keep the forking thread's own."""
        self._close_lock = threading.Lock()
        me = _thread()
        if any(thread != me for thread in self.calls) and self.refusal is None:
            # Such a call may have been inside the model container's run, whose one model then stays taken here:
            # the child's next call waited for it for ever (AOTInductorModelContainer::get_available_model).
            self.refusal = FORKED_MESSAGE
        self.calls[:] = [thread for thread in self.calls if thread == me]

    def free_deferred(self) -> None:
        """After a call has left: the free of a close made on a thread that was inside a call, by the last call."""
        if self._deferred is not None:  # rare: a close on a thread that was inside a call
            with self._close_lock:
                free, self._deferred = (self._deferred, None) if not self.calls else (None, self._deferred)
            if free is not None:
                free()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self.calls)

    def close(self, free=None) -> bool:
        """Refuse new calls; then ``free()``, once the calls in flight on other threads have returned, or, where
        this thread is itself inside a call, when the last call leaves. Returns True the first time, False when
        already closed (``free`` is then not called)."""
        if self._closed:  # before the lock: a signal's handler that closes while this thread's close waits for the
            return False  # calls in flight (holding the lock) waited for the lock for ever
        with self._close_lock:
            if self._closed:
                return False
            self._closed, self.refusal = True, CLOSED_MESSAGE
            mine = _thread()
            try:
                while any(thread != mine for thread in list(self.calls)):
                    time.sleep(_POLL_S)
            except BaseException:
                # Interrupted while it waits (Ctrl-C, a signal handler's exception): closed already, so every later
                # close (and the finalizer's) returns at once, and nothing freed the Program: its model container, the
                # weights, stayed for the life of the process. The last call in flight frees it as it leaves instead.
                self._deferred = free  # first: a call that leaves from here on frees (free_deferred)
                if not self.calls:  # every call left meanwhile (this thread's own too): free here, then go on
                    self._deferred = None
                    if free is not None:
                        free()
                raise
            if mine in self.calls:  # beneath this close, on this thread: it frees when it leaves
                self._deferred = free
                return True
        if free is not None:
            free()
        return True


class _OpenMP:
    """Whether a CPU model ran in this process (``Program._run`` sets ``used``): its generated code's
    ``#pragma omp parallel`` regions then have started OpenMP's thread pool. A child forked after that
    (``multiprocessing``'s default start on Linux, a server's preforked workers) inherits the pool's state but
    not its threads: GNU OpenMP has no fork handler, and the child's first parallel region waited for the
    parent's threads for good (eager torch hangs alike). A team of one thread needs none of them, so such a
    child runs OpenMP with one thread; a child forked before any CPU run keeps every thread. Set more in the
    child with torch.set_num_threads only if its parent never ran a parallel region.

    One thread is set twice over, since either alone left a child hanging:
    - ``torch.set_num_threads(1)`` for torch's own parallel regions;
    - ``omp_set_max_active_levels(0)`` in every OpenMP runtime a CPU program's library calls (``note``,
      found from the library's own handle): a region then runs one thread even where its pragma names a
      count, as torch 2.11's Inductor writes it (``num_threads(16)``, the build machine's cores), which
      overrides the thread count torch sets; and the library may call an OpenMP runtime that is not torch's
      (a system libgomp beside the one torch's wheel ships), which torch's setting never reaches."""

    def __init__(self):
        self.used = False
        self._runtimes: dict[int, object] = {}  # address of a runtime's omp_set_max_active_levels -> callable

    def note(self, set_max_active_levels: int | None) -> None:
        """Remember a CPU program library's OpenMP runtime by the address of its ``omp_set_max_active_levels``
        (None: the library calls no OpenMP)."""
        if set_max_active_levels and set_max_active_levels not in self._runtimes:
            self._runtimes[set_max_active_levels] = ctypes.CFUNCTYPE(None, ctypes.c_int)(set_max_active_levels)

    def one_thread(self) -> None:
        import torch

        torch.set_num_threads(1)
        for set_max_active_levels in self._runtimes.values():
            set_max_active_levels(0)  # no level of parallel regions is active: every team is one thread


OPENMP = _OpenMP()


def _one_openmp_thread_in_a_child() -> None:
    if OPENMP.used:
        OPENMP.one_thread()
    for gate in list(_GATES):
        gate.forked()


os.register_at_fork(after_in_child=_one_openmp_thread_in_a_child)
