"""The time an operation itself takes, for tests that bound it (a stall, a quadratic scan), measured so that a loaded
machine cannot fail them.

CI runs two pytest workers on 2 cores beside AOTInductor's ~40 s compiles, and one full pass of the cyclic collector
in a process holding torch's objects takes ~0.4 s: a wall-clock reading of a 0.06 s parse was 0.4 s there, against a
0.5 s bound. What is read here is the process's CPU time (another process's work is not in it), with the collector
off (a collection the operation happens to set off is not its cost), the least of a few runs (the rest only ever adds
time). A stall or a quadratic scan is slow in every run, so a bound that caught it still does.
"""

from __future__ import annotations

import contextlib
import gc
import time


@contextlib.contextmanager
def collector_off():
    """The cyclic collector off (after one collection) within: a collection the timed code happens to set off, over
    every object of the process, is not its cost."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def least_cpu_seconds(operation, runs: int = 3):
    """(the least CPU seconds of ``runs`` calls of ``operation()``, what its last call returned)."""
    least, result = float("inf"), None
    with collector_off():
        for _ in range(runs):
            started = time.process_time()
            result = operation()
            least = min(least, time.process_time() - started)
    return least, result
