"""read_body: the request body's limits, checked without a server (a stand-in for Starlette's request)."""

from __future__ import annotations

import asyncio

import pytest

from aotcuda.serving.body import BusyError, PendingBytes
from aotcuda.serving.codec import RequestError, SlowBodyError, read_body


class StandInRequest:
    def __init__(self, headers: dict, chunks: list[bytes], pause_s: float = 0.0):
        self.headers, self._chunks, self._pause_s = headers, chunks, pause_s

    async def stream(self):
        for chunk in self._chunks:
            await asyncio.sleep(self._pause_s)
            yield chunk


def read(request, max_bytes=100, timeout_s=5.0, take=None) -> bytes:
    return asyncio.run(read_body(request, max_bytes, timeout_s, take))


@pytest.mark.parametrize("declared", ["²", "١٢", "12 ", "-1", "0x10", "1e3", "", "9" * 5000])
def test_a_content_length_that_is_not_ascii_digits_is_a_request_error(declared):
    """str.isdigit() is True for '²' and Arabic-Indic digits, which int() then rejects with a raw ValueError, as
    it does a string of more than 4300 digits."""
    with pytest.raises(RequestError, match="Content-Length .* is not a number of bytes"):
        read(StandInRequest({"content-length": declared}, [b"x"]))


def test_a_declared_length_over_the_limit_is_refused_before_reading():
    class Unread(StandInRequest):
        async def stream(self):
            raise AssertionError("the body was read")
            yield b""  # pragma: no cover - makes this an async generator

    with pytest.raises(RequestError, match="declares 101 bytes, more than this server's limit of 100"):
        read(Unread({"content-length": "101"}, []))


def test_a_streamed_body_is_counted_and_refused_past_the_limit():
    with pytest.raises(RequestError, match="has at least 120 bytes"):
        read(StandInRequest({}, [b"x" * 60] * 5))


def test_a_body_within_the_limits_is_returned_whole():
    assert read(StandInRequest({"content-length": "90"}, [b"ab" * 15] * 3)) == b"ab" * 45


def test_a_trickling_body_is_cut_at_the_timeout():
    with pytest.raises(SlowBodyError, match="did not arrive within 0.2 s"):
        read(StandInRequest({}, [b"x"] * 50, pause_s=0.05), timeout_s=0.2)


@pytest.mark.parametrize("headers", [{}, {"content-length": "0"}, {"content-length": "90"}])
def test_room_is_taken_for_the_bytes_that_arrive_never_for_the_declared_length(headers):
    """Found by a breaker: room was taken for the declared Content-Length before a byte was read (and for the
    whole --max-request-bytes without one), so four connections declaring 256 MiB and sending nothing filled
    the proxy's 1 GiB, and a GET /healthz, with no body at all, was refused with 503 once room was low."""
    taken = []
    pieces = [b"ab" * 15] * 3 if headers.get("content-length") == "90" else []
    assert read(StandInRequest(headers, pieces), take=taken.append) == b"".join(pieces)
    assert taken == [len(piece) for piece in pieces]  # nothing for a request without a body


def test_a_piece_that_passes_the_pending_limit_refuses_the_body_and_the_room_is_counted_exactly():
    pending = PendingBytes(70)
    with pytest.raises(BusyError, match="holds 60 bytes of request bodies, and 30 more would pass its limit of 70"):
        read(StandInRequest({"content-length": "90"}, [b"x" * 30] * 3), take=pending.take)
    assert pending.held == 60  # the caller (proxy.WholeBody) gives back what its request took


class FreshPieces(StandInRequest):
    """Pieces made as they are sent, as a server's parser makes them: the body's bytes exist only in what is kept."""

    def __init__(self, source: bytes, piece: int):
        super().__init__({}, [])
        self._source, self._piece = memoryview(source), piece

    async def stream(self):
        for start in range(0, len(self._source), self._piece):
            yield bytes(self._source[start:start + self._piece])


def test_a_body_is_held_once_as_it_is_read():
    """fix38 (2026-12-07): read_body kept the body's pieces in a list and joined them at the end, so for a moment it
    held the body twice (the proxy reads every request's body so: 2 GiB at its default 1 GiB of pending bodies, which
    it counts once). Now the pieces go into one buffer, handed on without a copy; a body of one piece (what a
    replica gets from Ray's proxy) is that piece itself."""
    import tracemalloc

    size = 32 << 20
    source = bytes(range(256)) * (size // 256)

    async def measured():  # within the loop: asyncio.run's own end peaks at a multiple of a large result
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        body = await read_body(FreshPieces(source, 64 << 10), size, 5.0)
        return body, tracemalloc.get_traced_memory()[1] - before

    tracemalloc.start()
    try:
        body, peak = asyncio.run(measured())
    finally:
        tracemalloc.stop()
    assert type(body) is bytes and body == source
    assert peak < 1.5 * size, f"reading held {peak / size:.2f} times the body"  # before: 2.00; now ~1.13
    assert read(StandInRequest({}, [b"", source, b""]), max_bytes=size) is source
    assert read(StandInRequest({}, [b"ab", b"", b"cd", b"e"])) == b"abcde" and read(StandInRequest({}, [])) == b""
