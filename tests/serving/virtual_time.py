"""asyncio on a clock that moves only while every task waits, for tests that time the proxy's asyncio code.

A scenario timed on the real clock fails on a loaded machine for no defect: CI runs two pytest workers on 2 cores
beside AOTInductor's ~40 s compiles, and one full pass of the cyclic collector in a process holding torch's objects
takes ~0.4 s, so a 0.1 s sleep may end 0.5 s late, a 0.4 s send timeout fire while the test's "client" was about to
read, and a request given 0.9 s be given 0.8. On :class:`VirtualTimeLoop` the clock jumps to the next timer whenever
nothing is ready to run, and never moves while anything runs: each step of a scenario happens at exactly the time the
code under test scheduled it, however slowly this machine runs it. The durations a test reads are then the ones the
code decided (a hold, a deadline, a timeout), which is what such a test checks; a defect that waits too long or too
little still shows, now by the same margin on every machine.

Only for asyncio code with no real I/O (its transports and clients stood in for): a socket's bytes or a thread's
answer would arrive on the real clock while the virtual one jumps past them.
"""

from __future__ import annotations

import asyncio
import time


class _JumpingSelector:
    """The loop's selector, which never waits for a timer: it moves the loop's clock to it instead."""

    def __init__(self, selector, loop: VirtualTimeLoop):
        self._selector, self._loop = selector, loop

    def select(self, timeout=None):
        events = self._selector.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer at all: only another thread (call_soon_threadsafe) can wake the loop
            return self._selector.select(None)
        self._loop.now += timeout  # the loop asks for the time left to its earliest timer: that timer is due now
        return []

    def __getattr__(self, name):
        return getattr(self._selector, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` starts at the real monotonic clock's reading and moves only as above."""

    def __init__(self):
        super().__init__()
        self.now = time.monotonic()
        self._selector = _JumpingSelector(self._selector, self)

    def time(self) -> float:
        return self.now


class LoopClock:
    """The ``time`` module as a module under test sees it while :func:`run_in_virtual_time` runs: its ``monotonic()``
    is the running VirtualTimeLoop's clock, so that the module's own deadlines keep the loop's time; everything else
    is the real module's."""

    def monotonic(self) -> float:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop), "LoopClock is read outside run_in_virtual_time"
        return loop.time()

    def __getattr__(self, name):
        return getattr(time, name)


def run_in_virtual_time(main, clocked=()):
    """``asyncio.run(main)`` on a :class:`VirtualTimeLoop`; each module of ``clocked`` (one that reads
    ``time.monotonic()``, e.g. aotcuda.serving.proxy for a request's budget) reads the loop's clock meanwhile."""
    real = [module.time for module in clocked]
    for module in clocked:
        module.time = LoopClock()
    try:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            return runner.run(main)
    finally:
        for module, clock in zip(clocked, real):
            module.time = clock


def loop_time() -> float:
    """The running loop's clock: the scenario's own readings, in the time its code keeps."""
    return asyncio.get_running_loop().time()
