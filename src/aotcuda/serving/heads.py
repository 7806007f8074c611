"""Request heads under a deadline, in Ray Serve's HTTP proxy: uvicorn's h11 protocol with a clock on each
request head and a bound on the connections it keeps open (named by proxy.bound_request_heads in uvicorn's
table of protocols, so that Ray's ``http="auto"`` means this class).

Why: uvicorn times no request head. Its keep-alive timer runs only between requests and stops at the first
byte of the next one, and a new connection has no timer at all; the body's time (proxy.WholeBody) starts
only once a head is whole. A connection that trickled a header byte every 5 s stayed open past 80 s with a
5 s body timeout, and 2,000 of them held 2,000 of the proxy's file descriptors for as long as they liked.
Now a head must be whole within ``head_timeout_s`` of its first byte (of the connection, for the first):
else the connection gets 408 (SlowHeadError) and is closed, or is closed silently when it sent nothing.

Answers under a send timeout, measured between the client's reads (nginx's send_timeout): a connection whose
answer waits in the proxy's write buffer while the client accepts no byte of it for ``send_timeout_s`` is
aborted, and the buffer dropped. Why here and not in an ASGI middleware around ``send``: uvicorn's send writes a
body message whole into the transport's buffer and waits on flow control only before the next message, so an
answer of one message (a replica's whole Response: 32 MiB for embnorm.pt2) never stalls a send: the request ends,
the answer stays in the buffer, and uvicorn's close (keep-alive timeout) waits for the buffer to flush, for ever
when the client never reads. 20 such clients held 774 MiB of the proxy past 100 s. Only the protocol sees the
transport: progress is bytes leaving its write buffer (those written to it less those it still holds; a buffer
that is not empty means the kernel's socket buffer is full, so the client is not reading), and
``transport.abort()`` drops the buffer where ``close()`` would wait on it.

And under a minimum send rate (Kestrel's MinResponseDataRate, curl's low-speed limit): once an answer has waited in
the write buffer for SEND_RATE_GRACE_S (or the send timeout, if shorter), its client must have taken it at
``min_send_rate`` bytes a second on average since it began to wait, else the connection is aborted as above. Why:
the send timeout alone cuts off only a client that takes nothing, and a client that takes a few bytes within each
timeout kept its answer, which counts in the proxy's pending room, for as long as it kept reading: a few such slow
readers held the room, and honest requests got 503 (the serving breaker). The rate bounds how long any answer holds
its room: its size over the rate, plus the grace.

A chunked request body whose chunks are too small for what each costs (``ChunkCount``): h11 and uvicorn handle each
chunk as an event in Python, on the proxy's one event loop, so a body of 1-byte chunks (``1\r\nx\r\n`` repeated)
cost ~5,000 times the CPU of the same bytes in large chunks, and two such connections made a ``GET /healthz`` take
4.7-5.7 s for as long as they sent (the body limit does not help: a byte of body is 6 bytes of wire). Past
FREE_CHUNKS, a body must average MIN_CHUNK_BYTES a chunk: else it gets 400 and its connection is closed, before
the rest of the connection's bytes are parsed. Why this and not 411 for every chunked body: a client that streams
a body it cannot size first (requests with a generator, curl reading a pipe) sends chunked, and its chunks are
kilobytes; refusing them all would refuse honest clients to stop one kind of dishonest one. Go's net/http bounds
a chunked body's framing the same way (``chunked encoding contains too much non-data``, CVE-2023-39326: it bounds
the overhead bytes; here the cost is per chunk, so the chunks are counted). aotcuda's own Client sends a
Content-Length. The framing's bytes are bounded too, as Go bounds them: a chunk's size line may carry an extension
(``100;aaaa...``) of up to h11's 16 KiB, which h11 scans and the count of chunks does not see; 256 bytes of body a
chunk behind 16,000 bytes of extension passed the average, and two connections sending such chunks pushed 4.4 GiB
through the proxy in 12 s for 1.6 % of body, holding ``GET /healthz`` at 0.23-0.33 s where plain 16 KiB chunks at the
same rate left it at 0.04-0.10 s (breaker-serving). Past FREE_FRAMING_BYTES, a body's framing (size lines,
extensions, line ends) may not outgrow its data: else the same 400.
"""

from __future__ import annotations

import asyncio
import collections
import resource
import weakref

import h11
from h11._receivebuffer import ReceiveBuffer, blank_line_regex
from uvicorn.protocols.http.h11_impl import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, H11Protocol

from aotcuda.serving.body import CLIENT_LEFT, CONTENT_LENGTH_RULE, ERROR_HEADER, RequestError, SlowHeadError

__all__ = ["PROTOCOL", "ChunkCount", "DeadlineH11Protocol", "SmallChunksError", "connection_limit",
           "unread_answer_bytes"]

PROTOCOL = "aotcuda.serving.heads:DeadlineH11Protocol"  # the import path uvicorn's table takes
# A chunked request body may have FREE_CHUNKS chunks of any size, then must average MIN_CHUNK_BYTES a chunk: a
# streaming client's chunks are its writes (urllib3 16 KiB, curl's reads of a pipe, Go's 4 KiB buffer; a
# generator of small pieces: 100-512 bytes, refused at 1 KiB in review 8); the attack it stops sends 1 byte a chunk.
FREE_CHUNKS, MIN_CHUNK_BYTES = 64, 256
# The bytes of a chunked body's framing (size lines with their extensions, line ends) taken before they must be no more
# than its data: honest framing is a few bytes a chunk (6 for a 16 KiB chunk), and Go's net/http allows 16 KiB of
# excess the same way (chunked.go, "too much non-data").
FREE_FRAMING_BYTES = 16 << 10
# How long an answer may wait in the write buffer before its client's rate is judged (Kestrel's grace period): a
# reader's first seconds include its TCP window's growth, and an answer taken whole within it is never judged.
SEND_RATE_GRACE_S = 5.0


# The most header fields (lines) of a request head, or of a chunked body's trailers: Apache's LimitRequestFields and
# http.client's own bound; a browser sends about 20.
MAX_HEADER_FIELDS = 100


# What one connection may hold before its request is whole: h11's 16 KiB of head (uvicorn's
# h11_max_incomplete_event_size) and the connection's own state; measured: 21 KiB each for 3,000 connections that
# sent 16,000 bytes of head.
CONNECTION_BYTES = 32 << 10


def connection_limit(max_pending_bytes: int | None = None) -> int | None:
    """The connections this process keeps open; past it, new ones are closed at once. Three quarters of its file
    descriptors, so that Ray's own sockets (to the controller and the replicas) and files are never starved by
    clients; and, given ``max_pending_bytes`` (the proxy's room for bodies and answers), as many as that room
    holds at CONNECTION_BYTES each, so that the heads clients have begun are bounded in bytes too: Ray raises the
    proxy's soft limit to the hard one (1,048,576 in a Docker container), and 786,000 connections that each sent
    16 KB of a head, within its deadline, would hold 16 GiB (review 10)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = [] if soft == resource.RLIM_INFINITY else [soft * 3 // 4]
    if max_pending_bytes:
        limits.append(int(max_pending_bytes) // CONNECTION_BYTES)
    return max(1, min(limits)) if limits else None


def client_connection_caps(limit: int) -> tuple[int, ...]:
    """The connections one client may keep open in a process that keeps ``limit``, level by level as the proxy's fair
    hold shares turns (proxy.client_groups: an IPv4 or loopback client alone; an IPv6 client's /48, its /56, its /64):
    the limit less a quarter of it for the widest level, less two quarters for the next, three for the last (each at
    least one). Why (breakserve, 2026-12-07): the limit was first come first served, so one client that opened as many
    connections as it allows (and opened them again as the head's deadline closed them) had every other client's
    connection closed at once: no request of theirs was read at all, whatever the fair hold would have done with it.
    Behind a balancer that does not keep the client's address every connection is one client's, and a quarter of the
    connections goes unused, as a quarter of the pending room does."""
    reserve = max(1, limit // 4)
    return tuple(max(1, limit - levels * reserve) for levels in (1, 2, 3))


def unread_answer_bytes() -> int:
    """The bytes of answers this process's connections hold for clients that have not read them yet (their write
    buffers, while watched): proxy.WholeBody refuses new requests past its room, as it does for request bodies."""
    return sum(protocol.transport.get_write_buffer_size() for protocol in list(DeadlineH11Protocol.sending))


def late_head_answer(timeout_s: float) -> bytes:
    """The 408 written on a connection whose head is late: raw bytes, since h11 sends no answer before a
    request."""
    return raw_answer(SlowHeadError(f"the request head did not arrive within {timeout_s:g} s (this server's "
                                    "--body-timeout-s, which bounds the request line and headers too); send the "
                                    "whole request at once"), "Request Timeout")


def raw_answer(error: RequestError, reason: str) -> bytes:
    """An error's answer as bytes for the transport, closing the connection (written past h11, whose state
    is not asked)."""
    body = str(error).encode()
    return (f"HTTP/1.1 {error.http_status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"connection: close\r\n{ERROR_HEADER.lower()}: {type(error).__name__}\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def refusal_text(error: h11.RemoteProtocolError | None) -> str:
    """What is wrong with a request h11 refused (its words are short and stable: h11/_headers.py, _readers.py)."""
    why = str(error) if error is not None else ""
    if why == "bad Content-Length":
        return (f"the request's Content-Length is not a number of bytes: {CONTENT_LENGTH_RULE} (digits only, at "
                "most 20), one value; send the body's length, or send it chunked without a Content-Length")
    if why == "conflicting Content-Length headers":
        return f"the request has Content-Length values that disagree: send one ({CONTENT_LENGTH_RULE})"
    if why in (BOTH_FRAMINGS, OLD_CHUNKED):
        return (f"the request has {why}, which HTTP parsers frame differently (a proxy in front could read another "
                "request hidden in its body: request smuggling); send one of the two: a Content-Length, or "
                "Transfer-Encoding: chunked over HTTP/1.1")
    if why in ("Receive buffer too long", HEAD_TOO_LONG):
        return "the request head is longer than this server takes (16 KiB of request line and headers)"
    if why == TOO_MANY_FIELDS:
        return (f"the request head has more than {MAX_HEADER_FIELDS} header fields, more than this server takes; send "
                "fewer headers")
    if why == TRAILERS_TOO_LONG:
        return ("the chunked body's trailers (the header fields after its last chunk) are longer than this server takes "
                "(16 KiB); send fewer trailers, or none")
    if why == TOO_MANY_TRAILER_FIELDS:
        return (f"the chunked body's trailers (after its last chunk) have more than {MAX_HEADER_FIELDS} header fields, "
                "more than this server takes; send fewer trailers, or none")
    if why == CHUNK_LINE_TOO_LONG:
        return ("a chunk's size line (its size and extensions) in the chunked body is longer than this server takes "
                "(16 KiB); send chunks without extensions")
    return f"the request is not valid HTTP/1.1 ({why[:200] or 'refused by the parser'}); send a well-formed request"


# The words of a request whose body's framing two parsers could read differently (_ambiguous_framing).
BOTH_FRAMINGS = "Transfer-Encoding together with Content-Length"
OLD_CHUNKED = "Transfer-Encoding in an HTTP/1.0 request"


def _ambiguous_framing(request: h11.Request) -> str:
    """Why a request's body could be framed one way here and another way by an HTTP parser in front of this one
    ("" where it cannot). h11 takes Transfer-Encoding over Content-Length and keeps the connection open, where RFC 9112
    (6.1, 6.3) says such a request "ought to be handled as an error" and a server that reads it anyway MUST close the
    connection after answering: a balancer in front that framed it by its Content-Length passed on, as one request's
    body, what this server read as another request on the same connection (request smuggling, CL.TE; breakserve3:
    a POST /predict with both headers and a body of ``0\\r\\n\\r\\nGET /stats ...`` was answered twice on one
    connection, the hidden GET too). The same for Transfer-Encoding in an HTTP/1.0 request (RFC 9112, 6.1)."""
    names = {name.lower() for name, _ in request.headers}
    if b"transfer-encoding" not in names:
        return ""
    if b"content-length" in names:
        return BOTH_FRAMINGS
    if request.http_version == b"1.0":
        return OLD_CHUNKED
    return ""


HEAD_TOO_LONG, TOO_MANY_FIELDS = "request head too long", "too many header fields"
# The same bounds met after the request's head, within its chunked body: said as what they are (fixrev, 2026-12-07:
# over-long trailers were answered "the request head is longer than this server takes", of a head that had passed)
TRAILERS_TOO_LONG, TOO_MANY_TRAILER_FIELDS = "chunked trailers too long", "too many chunked trailer fields"
CHUNK_LINE_TOO_LONG = "chunk size line too long"


def _in_the_body(error: h11.RemoteProtocolError, reading_trailers: bool) -> h11.RemoteProtocolError:
    """A head's bound (BoundedHeads', or h11's "Receive buffer too long") met while a chunked body was read, in words
    that name the trailers or the chunk's size line it was met in; any other refusal as it is."""
    why = str(error)
    if why in ("Receive buffer too long", HEAD_TOO_LONG):
        why = TRAILERS_TOO_LONG if reading_trailers else CHUNK_LINE_TOO_LONG
    elif why == TOO_MANY_FIELDS:
        why = TOO_MANY_TRAILER_FIELDS
    else:
        return error
    return h11.RemoteProtocolError(why, error_status_hint=error.error_status_hint)


class BoundedHeads(ReceiveBuffer):
    """h11's receive buffer, whose heads (a request's line and headers, a chunked body's trailers: the blocks h11 reads
    up to a blank line) are at most ``limit`` bytes and MAX_HEADER_FIELDS lines, refused before h11 parses them.

    Why (breakserve, 2026-12-07): h11 bounds a head by its ``max_incomplete_event_size`` (16 KiB) only while it is
    incomplete, so a head that arrives whole in one read (up to asyncio's 256 KiB a read) was parsed whatever its size:
    a 100 KB head of 20,000 ``a:b`` headers took h11 0.1 s of the proxy's one event loop (and 40 ms more to drop Ray's
    controls from it), 4 MB of Python objects while its request was held; two connections sending such heads in a loop
    held another client's ``GET /stats`` 0.42 s (median; 0.79 s at most; 2 ms alone)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def maybe_extract_lines(self):
        data = self._data
        if (len(data) > self.limit and data[:2] != b"\r\n" and data[:1] != b"\n"  # (h11's own: a blank line first)
                and blank_line_regex.search(data, max(0, self._multiple_lines_search), self.limit + 3) is None):
            raise h11.LocalProtocolError(HEAD_TOO_LONG)  # h11 refuses it as the client's error, unparsed
        lines = super().maybe_extract_lines()  # split, not yet parsed: the parse is the cost
        if lines is not None and len(lines) > MAX_HEADER_FIELDS + 1:  # the request line, then the fields (trailers: 101)
            raise h11.LocalProtocolError(TOO_MANY_FIELDS)
        return lines


class SmallChunksError(RequestError):
    """A chunked request body whose chunks are too small for what each costs the proxy (answered with 400)."""


class ChunkCount(h11.Connection):
    """h11's server connection, counting each request's body chunks: ``next_event`` raises SmallChunksError once
    a chunked body has more than FREE_CHUNKS chunks and averages under MIN_CHUNK_BYTES a chunk. It counts the bytes
    of the answers it makes too (``bytes_sent``): uvicorn writes each of them to the transport as it is made."""

    def __init__(self, our_role, max_incomplete_event_size: int = DEFAULT_MAX_INCOMPLETE_EVENT_SIZE):
        super().__init__(our_role, max_incomplete_event_size)
        self._receive_buffer = BoundedHeads(max_incomplete_event_size)  # empty still: h11 made it in __init__
        self.chunks = self.body_bytes = self.bytes_sent = 0
        self.bytes_received = self.body_start = 0  # of the connection; where the request's body began in it
        self.refusal: h11.RemoteProtocolError | None = None  # why h11 refused the request, for its answer

    def receive_data(self, data: bytes) -> None:
        self.bytes_received += len(data)
        super().receive_data(data)

    def _consumed(self) -> int | None:
        """The connection's bytes h11 has parsed (received, less those waiting in its buffer); None for an h11
        without that buffer (its framing is then not bounded, its chunks still are)."""
        waiting = getattr(self, "_receive_buffer", None)
        return None if waiting is None else self.bytes_received - len(waiting)

    def send_with_data_passthrough(self, event):  # what send() joins, too
        data = super().send_with_data_passthrough(event)
        if data is not None:
            self.bytes_sent += sum(len(piece) for piece in data)
        return data

    def next_event(self):
        # taken before h11's refusal moves the client to ERROR and drops its reader: the body's (chunked) reader reads
        # trailers with the head's line reader, and its flag says whether it had reached them
        in_the_body, reader = self.their_state is h11.SEND_BODY, getattr(self, "_reader", None)
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as error:
            self.refusal = (_in_the_body(error, getattr(reader, "_reading_trailer", False)) if in_the_body
                            else error)
            if self.refusal is error:
                raise
            raise self.refusal from None
        if isinstance(event, h11.Request):
            self.chunks = self.body_bytes = 0
            self.body_start = self._consumed()
            framing = _ambiguous_framing(event)
            if framing:  # refused as h11 refuses its own: uvicorn's handle_events answers 400 and closes
                self.refusal = h11.RemoteProtocolError(framing)
                raise self.refusal
        elif isinstance(event, h11.Data):
            self.body_bytes += len(event.data)
            consumed = self._consumed()
            known = consumed is not None and self.body_start is not None
            framing = consumed - self.body_start - self.body_bytes if known else 0
            if framing > FREE_FRAMING_BYTES + self.body_bytes:
                raise SmallChunksError(
                    f"the request body's chunked framing (chunk size lines, their extensions, line ends) came to "
                    f"{framing} bytes for {self.body_bytes} bytes of body: past {FREE_FRAMING_BYTES} bytes this "
                    "server takes no more framing than body; send the body with a Content-Length, or in chunks "
                    "without extensions")
            # h11 marks the last piece of each chunk of a chunked body, whatever the reads it came in (its
            # chunk_start is set only where the size line and the first byte of data arrive in one read: a client
            # that splits the two got 1,447 chunks of a byte uncounted, review 8)
            if event.chunk_end:
                self.chunks += 1
                if self.chunks > FREE_CHUNKS + self.body_bytes // MIN_CHUNK_BYTES:
                    raise SmallChunksError(
                        f"the request body came in {self.chunks} chunks for {self.body_bytes} bytes: past "
                        f"{FREE_CHUNKS} chunks this server takes chunks of {MIN_CHUNK_BYTES} bytes on average "
                        "(each chunk costs it as much as a large one); send the body with a Content-Length, or "
                        "in larger chunks")
        return event


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's H11Protocol, with a deadline on each request head and at most ``max_connections`` open."""

    head_timeout_s: float = 30.0  # proxy.bound_request_heads sets these from the proxy's limits
    send_timeout_s: float = 30.0
    min_send_rate: float = 0.0  # bytes a second an answer must be taken at, past the grace; 0: no minimum
    max_connections: int | None = None
    sending: set[DeadlineH11Protocol] = set()  # the connections whose write buffer is watched: unread_answer_bytes
    # server state -> client or group -> its connections kept open (client_connection_caps)
    _kept_by: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # uvicorn's own connection (H11Protocol.__init__, before any request) with the chunks counted
        size = self.config.h11_max_incomplete_event_size
        self.conn = ChunkCount(h11.SERVER, DEFAULT_MAX_INCOMPLETE_EVENT_SIZE if size is None else size)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_started = False
        self._send_watch: asyncio.TimerHandle | None = None
        self._holders: tuple[str, ...] = ()
        if self.max_connections is not None and (len(self.connections) > self.max_connections
                                                 or not self._keep_for_its_client()):
            transport.close()  # connection_lost follows and forgets it
            return
        self._arm_head_deadline()  # a connection that sends nothing is bounded too

    def _keep_for_its_client(self) -> bool:
        """Count this connection for its client and each of its groups, unless one of them keeps its share already
        (client_connection_caps); whether it was counted."""
        from aotcuda.serving.proxy import client_groups, client_key  # proxy imports this module where it is used

        holders = client_groups(client_key(self.client[0] if self.client else ""))
        kept = self._kept_by.setdefault(self.server_state, collections.Counter())
        if any(kept[holder] >= cap for holder, cap in zip(holders, client_connection_caps(self.max_connections))):
            return False
        for holder in holders:
            kept[holder] += 1
        self._holders = holders
        return True

    def _forget_for_its_client(self) -> None:
        kept = self._kept_by.get(self.server_state)
        for holder in self._holders:
            kept[holder] -= 1
            if kept[holder] <= 0:
                del kept[holder]
        self._holders = ()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # bytes of a head: the first request's, or a kept-alive one's next
            self._head_started = True
            if self._head_deadline is None:
                self._arm_head_deadline()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is whole (or refused): the body has its own clock
            self._disarm_head_deadline()

    def handle_events(self) -> None:
        try:
            super().handle_events()
            cycle = getattr(self, "cycle", None)  # the request whose head these bytes ended, if any
            if cycle is not None and CLIENT_LEFT not in cycle.scope:
                cycle.scope[CLIENT_LEFT] = lambda: cycle.disconnected
        except SmallChunksError as error:
            # Answer unless the app has begun to (a route that answers before reading the body), and close: the
            # rest of the connection's bytes are never parsed. The app's receive then says the client left.
            if self.conn.our_state is h11.SEND_RESPONSE:
                self.transport.write(raw_answer(error, "Bad Request"))
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """The answer to a request h11 refused (uvicorn's was "Invalid HTTP request received.", without our header:
        a new user's Content-Length of "abc" read as an empty 400), in our words, closing the connection."""
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # not where the app has begun its answer
            self.transport.write(raw_answer(RequestError(refusal_text(self.conn.refusal)), "Bad Request"))
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._stop_send_watch()
        self._forget_for_its_client()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._forget_for_its_client()  # the connection is the WebSocket protocol's now: this one is never told its end
        super().handle_websocket_upgrade(event)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_sending()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # runs the pipelined bytes h11 holds: a next request whole, or part of its head
        # A head begun behind a pipelined request (sent with it, then nothing) was never timed: its bytes arrived while
        # the request before it ran, and uvicorn's keep-alive timer (Ray's: 90 s) was all that closed the connection.
        # Its clock starts now, when the server begins to read it (breakserve3, 2026-12-07).
        if (not self.transport.is_closing() and self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]
                and self._head_deadline is None):
            self._head_started = True
            self._arm_head_deadline()
        # An answer under the high-water mark never paused writing, yet its rest may wait in the buffer (the client
        # stopped reading near its end): uvicorn's close of this connection would wait on it for ever.
        if self.transport.get_write_buffer_size():
            self._watch_sending()

    def _watch_sending(self) -> None:
        """Watch the write buffer until it is empty: abort when the client takes none of it for ``send_timeout_s``,
        or when the client has taken it slower than ``min_send_rate`` once the grace is over (``_too_slow``). Sampled
        four times a timeout, so a client that stops reading is cut off between 1 and 1.25 timeouts later."""
        if self._send_watch is None:
            self.sending.add(self)
            now = self.loop.time()
            self._send_began, self._sent_then = now, self.conn.bytes_sent
            self._buffered_then = self.transport.get_write_buffer_size()
            self._send_watch = self.loop.call_later(self.send_timeout_s / 4, self._send_tick, 0, now)

    def _taken(self) -> int:
        """The bytes the client has taken since its answer began to wait: those written to the transport since, less
        the buffer's growth. Not the buffer's fall alone: the app writes more whenever flow control lets it (each
        message of a streamed answer), and a client that took 1 MB/s while the app refilled its buffer between two
        looks read as taking nothing. Taken means handed to the kernel, whose socket buffer the client drains."""
        grown = self.transport.get_write_buffer_size() - self._buffered_then
        return self.conn.bytes_sent - self._sent_then - grown

    def _send_tick(self, taken_then: int, since: float) -> None:
        self._send_watch = None
        if self.transport.get_write_buffer_size() == 0:  # all sent: a later pause watches again
            self.sending.discard(self)
            return
        taken = self._taken()
        if taken != taken_then:  # the client took bytes
            taken_then, since = taken, self.loop.time()
        elif self.loop.time() - since >= self.send_timeout_s:
            # The client accepted nothing for the timeout: drop the answer (close() would wait to flush it) and let
            # connection_lost tell the request, whose sends then return at once.
            self._abort_answer()
            return
        if self._too_slow(taken):
            self._abort_answer()
            return
        self._send_watch = self.loop.call_later(self.send_timeout_s / 4, self._send_tick, taken_then, since)

    def _too_slow(self, taken: int) -> bool:
        """Whether the client has taken its answer at less than ``min_send_rate`` bytes a second on average since it
        began to wait, judged once SEND_RATE_GRACE_S (or the send timeout, if shorter) has passed."""
        waited = self.loop.time() - self._send_began
        grace = min(SEND_RATE_GRACE_S, self.send_timeout_s)
        return bool(self.min_send_rate) and waited >= grace and taken < self.min_send_rate * waited

    def _abort_answer(self) -> None:
        self.transport.abort()
        self.sending.discard(self)

    def _stop_send_watch(self) -> None:
        if getattr(self, "_send_watch", None) is not None:
            self._send_watch.cancel()
        self._send_watch = None
        self.sending.discard(self)

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
