"""The request body, read under a size and a time limit, and the errors of the HTTP contract that need no
torch: Ray Serve's HTTP proxy imports this (proxy.WholeBody), and a proxy should not carry torch (about
2.5 s and 180 MB more at its start). codec.py re-exports these names; the wire format is there.
"""

from __future__ import annotations

import asyncio
import io
import re

from aotcuda.errors import AotcudaError, InputError, clipped

__all__ = ["CLIENT_LEFT", "ERROR_HEADER", "LEAST_TIMEOUT_S", "BusyError", "ForeignOriginError", "LateBodyError",
           "PendingBytes", "RequestError", "SlowBodyError", "SlowHeadError", "read_body", "shown"]

# Marks the answers aotcuda gave itself (400, 408, 500, 503), from the proxy or a replica: a 5xx without it
# came from Ray's own proxy (client.py retries those).
ERROR_HEADER = "X-Aotcuda-Error"
# ASGI scope key: a callable saying whether the request's client has left (its connection lost), which the proxy
# reads without a receive() (that would wait while the client stays); set by heads.DeadlineH11Protocol, a function of
# the proxy's process, never handed on to Ray (whose proxy pickles the scope for the replica)
CLIENT_LEFT = "aotcuda.client_left"
# The least body (and request) timeout, in ServeOptions and in the proxy that reads AOTCUDA_SERVE_BODY_TIMEOUT_S:
# 1e-300 is positive, and answered every request whose head came in pieces 408 at once.
LEAST_TIMEOUT_S = 0.1


class RequestError(InputError):
    """A request body that is not a safetensors file of the program's inputs (answered with HTTP 400)."""

    http_status = 400


class SlowBodyError(RequestError):
    """A request body that did not arrive within the server's time for it (answered with HTTP 408)."""

    http_status = 408


class SlowHeadError(SlowBodyError):
    """A request head (request line and headers) that did not arrive within the server's time for it (answered
    with HTTP 408 by the HTTP proxy's connection, before any app sees the request: serving/heads.py)."""


class WrongHostError(RequestError):
    """A request that arrived over a loopback address naming another host (a web page's DNS rebinding; answered with
    HTTP 421 by the HTTP proxy: serving/proxy.py)."""

    http_status = 421


class MediaTypeError(RequestError):
    """A POST /predict whose Content-Type is not application/octet-stream (a web page's form or text/plain post;
    answered with HTTP 415 by the HTTP proxy: serving/proxy.py)."""

    http_status = 415


class ForeignOriginError(RequestError):
    """A request a web page sent (its Origin header names a web origin the deployer has not allowed: a browser adds
    it to every cross-origin request and to every POST; answered with HTTP 403 by the HTTP proxy: serving/proxy.py)."""

    http_status = 403


class StoppingError(AotcudaError):
    """A request to a route of the program while the server has none (it is stopping, or not started yet): answered
    with HTTP 503, Retry-After and Connection: close in place of Ray's final-looking 404."""

    http_status = 503


class LateBodyError(AotcudaError):
    """A body that Ray Serve's HTTP proxy had read whole but that did not reach the replica in time: Ray's
    delay, not the client's (answered with HTTP 503; the program did not run)."""

    http_status = 503


class BusyError(AotcudaError):
    """A request refused because the HTTP proxy already holds as many bytes of request bodies as it may
    (answered with HTTP 503 and Retry-After; nothing of it ran, so a client may send it again)."""

    http_status = 503


class PendingBytes:
    """The bytes of request bodies one HTTP proxy holds (read, or being read, until their request ends),
    within ``limit``: concurrent clients cannot make it hold more than that, whatever each body's size."""

    def __init__(self, limit: int):
        self.limit, self.held = limit, 0

    def take(self, size: int) -> None:
        """Count ``size`` more bytes, or raise BusyError when they would pass the limit (nothing counted)."""
        if self.held + size > self.limit:
            raise BusyError(f"the server holds {self.held} bytes of request bodies, and {size} more would pass its "
                            f"limit of {self.limit} (--max-pending-bytes); nothing of this request ran, send it "
                            "again after the Retry-After seconds")
        self.held += size

    def give(self, size: int) -> None:
        self.held -= size


def too_large(size: int, max_bytes: int, how: str) -> RequestError:
    """The refusal of a body of `size` bytes (declared, counted so far, or whole) over `max_bytes`."""
    return RequestError(f"the request body {how} {size} bytes, more than this server's limit of {max_bytes}; "
                        "send smaller batches, or start the server with a larger --max-request-bytes")


CONTENT_LENGTH_RULE = "Content-Length must be a decimal number of bytes"  # read_body's and the proxy's words


async def read_body(request, max_bytes: int, timeout_s: float, take=None) -> bytes:
    """The body of a Starlette request, read within ``timeout_s`` seconds and at most ``max_bytes`` long (by
    Ray Serve's HTTP proxy, from the client: proxy.WholeBody; by a replica behind a proxy without it).

    A declared Content-Length over the limit is refused before a byte of the body is read; a body without
    one (chunked) is counted while it streams and refused as soon as it passes the limit. A body that is
    still arriving after ``timeout_s`` (a client that sends headers and then trickles, or nothing) is
    refused with SlowBodyError, which frees the replica's slot.

    ``take(size)`` (optional) is called for each piece of the body as it arrives, with that piece's length,
    before it is kept; it may raise (PendingBytes.take: BusyError) to refuse the body. Room is counted for
    bytes received, never for bytes declared: a client that declares 256 MiB and sends nothing holds nothing
    (four such connections filled the proxy's 1 GiB and every honest request got 503 for the body timeout),
    and a request without a body (a GET) takes nothing.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        # At most 20 digits (2**64): int() of a longer string raises ValueError past 4300 digits, and HTTP
        # parsers other than h11 and httptools may hand one on.
        if not (declared.isascii() and declared.isdigit() and len(declared) <= 20):
            raise RequestError(f"the request's Content-Length {shown(declared, 40)!r} is not a number of bytes: "
                               f"{CONTENT_LENGTH_RULE} (digits only, at most 20)")
        if int(declared) > max_bytes:
            raise too_large(int(declared), max_bytes, "declares")
    body = OneBuffer()

    async def read() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise too_large(size, max_bytes, "has at least")
            if chunk and take is not None:
                take(len(chunk))
            body.add(chunk)

    try:
        await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:
        raise SlowBodyError(f"the request body did not arrive within {timeout_s:g} s (this server's "
                            "--body-timeout-s); send the whole body at once") from None
    return body.whole()


class OneBuffer:
    """A body's pieces written into one buffer as they arrive, given back as bytes without a copy.

    Why (fix38, 2026-12-07): the pieces were kept in a list and joined at the end, so the body was held twice for a
    moment, its pieces and the joined bytes (2.0 times a 32 MiB body, 2 GiB at the proxy's default 1 GiB of pending
    bodies, which PendingBytes counts once). A BytesIO grows one bytes object (by an eighth at a time) and
    ``getvalue`` hands that object on, cut to its size in place. A body of one piece (what a replica gets from Ray's
    proxy, which hands the body on whole) is that piece itself, never copied."""

    def __init__(self):
        self._first: bytes = b""
        self._buffer: io.BytesIO | None = None

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        if self._buffer is not None:
            self._buffer.write(piece)
        elif not self._first:
            self._first = piece
        else:  # a second piece: from here on, one buffer
            self._buffer = io.BytesIO()
            self._buffer.write(self._first)
            self._first = b""
            self._buffer.write(piece)

    def whole(self) -> bytes:
        if self._buffer is not None:
            return self._buffer.getvalue()
        return self._first if type(self._first) is bytes else bytes(self._first)


def shown(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (errors.clipped): what an answer echoes of a request stays small
    whatever the request held (a shape of 480,000 dims made a 1.44 MB 400)."""
    return clipped(text, limit)


# an absolute path of two parts or more (/tmp/aotcuda-x/m.so, /home/me/model.py), not a route or a ratio (a / b)
SERVER_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s/:'\"()\[\],;]+/)+[^\s/:'\"()\[\],;]*")
PATH_SHOWN = "<a path on the server>"


def without_server_paths(text: str) -> str:
    """``text`` as a client may read it: every absolute path of two parts or more (a package's, a temporary folder's, a
    source file's, a user's home) written ``<a path on the server>``; the deployer reads the whole text in the logs."""
    return SERVER_PATH.sub(PATH_SHOWN, text)
