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
