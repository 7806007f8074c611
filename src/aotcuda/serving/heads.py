"""Request heads under a deadline, in Ray Serve's HTTP proxy: uvicorn's h11 protocol with a clock on each
request head and a bound on the connections it keeps open (named by proxy.bound_request_heads in uvicorn's
table of protocols, so that Ray's ``http="auto"`` means this class).

Why: uvicorn times no request head. Its keep-alive timer runs only between requests and stops at the first
byte of the next one, and a new connection has no timer at all; the body's time (proxy.WholeBody) starts
only once a head is whole. A connection that trickled a header byte every 5 s stayed open past 80 s with a
5 s body timeout, and 2,000 of them held 2,000 of the proxy's file descriptors for as long as they liked.
Now a head must be whole within ``head_timeout_s`` of its first byte (of the connection, for the first):
else the connection gets 408 (SlowHeadError) and is closed, or is closed silently when it sent nothing.
"""

from __future__ import annotations

import asyncio
import resource

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from aotcuda.serving.body import ERROR_HEADER, SlowHeadError

__all__ = ["PROTOCOL", "DeadlineH11Protocol", "connection_limit"]

PROTOCOL = "aotcuda.serving.heads:DeadlineH11Protocol"  # the import path uvicorn's table takes


def connection_limit() -> int | None:
    """Three quarters of this process's file descriptors: past that, new connections are closed at once, so
    that Ray's own sockets (to the controller and the replicas) and files are never starved by clients."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else max(1, soft * 3 // 4)


def late_head_answer(timeout_s: float) -> bytes:
    """The 408 written on a connection whose head is late: raw bytes, since h11 sends no answer before a
    request."""
    error = SlowHeadError(f"the request head did not arrive within {timeout_s:g} s (this server's "
                          "--body-timeout-s, which bounds the request line and headers too); send the whole "
                          "request at once")
    body = str(error).encode()
    return (f"HTTP/1.1 {error.http_status} Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"connection: close\r\n{ERROR_HEADER.lower()}: {type(error).__name__}\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's H11Protocol, with a deadline on each request head and at most ``max_connections`` open."""

    head_timeout_s: float = 30.0  # proxy.bound_request_heads sets both from the proxy's limits
    max_connections: int | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_started = False
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            transport.close()  # connection_lost follows and forgets it
            return
        self._arm_head_deadline()  # a connection that sends nothing is bounded too

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # bytes of a head: the first request's, or a kept-alive one's next
            self._head_started = True
            if self._head_deadline is None:
                self._arm_head_deadline()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is whole (or refused): the body has its own clock
            self._disarm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _disarm_head_deadline(self) -> None:
        if getattr(self, "_head_deadline", None) is not None:
            self._head_deadline.cancel()
        self._head_deadline, self._head_started = None, False

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_started:
            self.transport.write(late_head_answer(self.head_timeout_s))
        self.transport.close()
