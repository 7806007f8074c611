"""When a Program may free its model container: only once no call is in flight.

A server that shuts down under load calls ``Program.close()`` while other threads are inside
``execute``; deleting the model container under a running call frees the memory that call works on
(SIGSEGV, before this gate). ``CallGate`` counts the calls in flight: ``close`` marks the Program closed
(new calls raise RuntimeCallError at once) and then waits until the calls already inside have returned,
so that they finish with their results; only then is the container deleted.

Cost per call: one uncontended lock taken twice (well under a microsecond).
"""

from __future__ import annotations

import threading

from aotcuda.errors import RuntimeCallError

CLOSED_MESSAGE = "this Program was closed; load the package again"


class CallGate:
    """``with gate:`` around each call; ``gate.close()`` once, before freeing what the calls use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._closed = False

    def __enter__(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeCallError(CLOSED_MESSAGE)
            self._in_flight += 1

    def __exit__(self, *exc_info) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0 and self._closed:
                self._idle.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def close(self) -> bool:
        """Refuse new calls and wait for the calls in flight to return. Returns True the first time (the
        caller then frees), False when already closed. Must not be called from inside a call."""
        with self._lock:
            first = not self._closed
            self._closed = True
            self._idle.wait_for(lambda: self._in_flight == 0)
        return first
