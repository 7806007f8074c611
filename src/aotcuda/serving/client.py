"""A small HTTP client of `aotcuda serve`: inputs in, outputs out, retrying only what is known to be safe.

    client = Client("http://127.0.0.1:8000")
    outputs = client.predict({"x": x})          # [output_0, output_1, ...] as CPU tensors

Retry rule: a request is sent again (up to ``retries`` times) only when the server cannot have run it:
the connection was never made (refused, unreachable, connect timeout: nothing was sent), the server closed it
before the body was whole and gave no answer (an answer given early, such as a 400 for a body over the server's
limit, is read and is final), or the answer is a
503 with ``Retry-After`` (Ray Serve's proxy refusing it before any replica took it, or aotcuda's part of the
proxy holding too many bodies: X-Aotcuda-Error BusyError, or a server with no application, stopping or starting:
StoppingError; the wait is the header's, capped at
``max_retry_after_s``). Anything after the request was sent is final: a read timeout (the server
may still be running it), a connection closed without an answer, a 5xx without the X-Aotcuda-Error header
(the replica that held the request died: resending the request a replica died on can kill the next one,
and resending one that is still running doubles the load), and every answer aotcuda gave itself, from a
replica or from its part of the proxy (400, 408, 500, 503, with X-Aotcuda-Error).
"""

from __future__ import annotations

import http.client
import inspect
import json
import numbers
import re
import selectors
import socket
import struct
import threading
import time
import unicodedata
import urllib.parse

import torch

from aotcuda.errors import AotcudaError, terminal_safe
from aotcuda.serving.body import ERROR_HEADER

__all__ = ["Client", "ServingError"]


class ServingError(AotcudaError):
    """The request failed. Attributes: ``status`` (HTTP code, None without an answer), ``retriable`` (the
    server cannot have run it), ``message``, ``retry_after_s`` (the server's Retry-After, when it sent one)."""

    def __init__(self, status: int | None, message: str, retriable: bool, retry_after_s: float | None = None):
        self.status, self.message, self.retriable, self.retry_after_s = status, message, retriable, retry_after_s
        super().__init__(f"HTTP {status}: {message}" if status else message)

    def __reduce__(self):  # pickle rebuilds an exception from self.args: here, the message alone
        return type(self), (self.status, self.message, self.retriable, self.retry_after_s), self.__dict__


# what a 503 with Retry-After may say when nothing of the request ran: Ray's proxy (no header), aotcuda's proxy
# holding too many bodies, or no application running (stopping or starting: proxy.answers_while_stopping)
_NOTHING_RAN = (None, "BusyError", "StoppingError")


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the delta-seconds form; a date or garbage counts as absent)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


# serve's default --request-timeout-s (60 s), the longest the server takes to answer, and 15 s for the network
DEFAULT_TIMEOUT_S = 75.0


class Client:
    """POST /predict with safetensors bodies. ``timeout_s`` bounds each attempt as a whole (seconds, from its
    connect, whatever the server's name's addresses, to the last byte of the answer, however slowly it arrives); ``max_response_bytes`` bounds an
    answer's size.

    ``timeout_s`` should exceed the server's --request-timeout-s (``DEFAULT_TIMEOUT_S``: serve's default 60 s and
    a margin for the network), so that the server's own answer, a 408 or the proxy's hold's 503 with Retry-After
    (which is resent), arrives before the client gives up: at 60 s, as serve's, the client gave up first, with a
    final "no complete answer" where nothing had run (fixlist, 2026-12-07)."""

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = 3, backoff_s: float = 0.5,
                 max_retry_after_s: float = 30.0, max_response_bytes: int = 1 << 30):
        _check_arguments(url, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
                         max_retry_after_s=max_retry_after_s, max_response_bytes=max_response_bytes)
        self.url, self.timeout_s, self.retries, self.backoff_s = url.rstrip("/"), timeout_s, retries, backoff_s
        self.max_retry_after_s, self.max_response_bytes = max_retry_after_s, max_response_bytes
        parts = urllib.parse.urlsplit(self.url)
        try:
            port = parts.port
        except ValueError as error:  # "Port out of range 0-65535", naming no url
            raise ValueError(f"url must be http://HOST[:PORT], got {url!r} ({error})") from None
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url must be http://HOST[:PORT], got {url!r}")
        self._host, self._port, self._path = parts.hostname, port or 80, parts.path + "/predict"
        # Where the server's name's addresses are tried from: moved on by one at each attempt that could not connect,
        # so that a retry starts with another address than the one that just failed it
        self._first_address = 0

    def predict(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """The flat outputs for these named inputs. Raises ServingError (after the retries, if retriable)."""
        import safetensors.torch as safetensors_torch

        body = safetensors_torch.save(_wire_tensors(inputs))
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                answer = self.post(body)
            except ServingError as error:
                if not error.retriable:
                    raise
                if attempt == self.retries:
                    raise self._gave_up(error, attempt + 1, time.monotonic() - started) from None
                wait = error.retry_after_s if error.retry_after_s is not None else self.backoff_s * (attempt + 1)
                time.sleep(min(wait, self.max_retry_after_s))
                continue
            try:
                _check_answer_header(answer)  # before a tensor is built
                if not isinstance(answer, bytes):
                    # safetensors reads bytes only. The copy replaces the answer as read (the bytearray goes with
                    # this line), and safetensors then copies every tensor out of the answer, whatever its path:
                    # twice the answer at most, as for one of a declared length.
                    answer = bytes(answer)
                outputs = safetensors_torch.load(answer)
                return [outputs[f"output_{i}"] for i in range(len(outputs))]
            except Exception as error:  # noqa: BLE001 - safetensors' own error types, or a missing output_<i>
                raise ServingError(200, f"the answer is not a safetensors file of output_0, output_1, ... "
                                   f"({type(error).__name__}: {terminal_safe(str(error)[:200])}); not resent: the "
                                   "server ran it", retriable=False) from None
        raise AssertionError("unreachable")

    def _gave_up(self, error: ServingError, attempts: int, seconds: float) -> ServingError:
        """The last retriable error, saying that the retries ran out and what to change. A new user's 8 concurrent
        bodies under --max-pending-bytes ended, after retries=5, with the server's "send it again after the
        Retry-After seconds", which the client had just done five times."""
        text = re.sub(r"[;,]? *(nothing of this request ran, )?send it again after the Retry-After seconds$", "",
                      error.message).rstrip("; ")
        tried = (f"; nothing of it ran: tried {attempts} time{'s' * (attempts != 1)} over {seconds:.1f} s "
                 f"(retries={self.retries}) and every attempt was refused.")
        if error.status is None:
            advice = f" Check that the server is up at {self.url}, or raise Client(retries=) or backoff_s"
        elif "--max-pending-bytes" in text:
            advice = (" Raise Client(retries=), send fewer requests at once, or start the server with a larger "
                      "--max-pending-bytes")
        else:
            advice = " Raise Client(retries=), or send fewer requests at once"
        return ServingError(error.status, text + tried + advice, retriable=True, retry_after_s=error.retry_after_s)

    def post(self, body: bytes) -> bytes | bytearray:
        """One attempt on a fresh connection: the response body of a 200 (``_read``: bytes, or a bytearray where
        the answer's length was not declared), else ServingError saying whether the server cannot have run the
        request (``retriable``)."""
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        connection.response_class = _FinalResponse
        deadline = time.monotonic() + self.timeout_s
        try:
            try:
                connection.sock = _connected(self._host, self._port, deadline, self._first_address)
                connection.sock.settimeout(self.timeout_s)  # each read, as before: the watchdog ends the attempt first
            except OSError as error:  # refused, unreachable, connect timeout: nothing was sent
                self._first_address += 1
                raise ServingError(None, f"could not connect to {self.url}: {error}", retriable=True) from None
            # The socket's timeout bounds each read, not the attempt: a server trickling its answer a byte a
            # second would hold the call for ever. The watchdog closes the socket at the attempt's deadline.
            expired = threading.Event()
            watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (connection.sock, expired))
            watchdog.start()
            try:
                whole = _send(connection, self._path, body, expired)
                try:
                    response = connection.getresponse()
                except OSError:
                    if whole:
                        raise
                    why = (f"read no more of the request's body within {self.timeout_s:g} s (timeout_s)"
                           if expired.is_set() else "closed the connection before the request's body was whole")
                    raise ServingError(None, f"{self.url} {why} and gave no answer: it cannot have run it",
                                       retriable=True) from None
                try:
                    answer = self._read(response)
                except ServingError:
                    if expired.is_set():  # the cut socket read as a chunked answer's torn end: it is the deadline's
                        raise TimeoutError("the attempt's deadline passed") from None
                    raise
                if expired.is_set():  # the cut socket reads as the end of the answer: it is not complete
                    raise TimeoutError("the attempt's deadline passed")
            except (OSError, http.client.HTTPException) as error:
                # http.client's errors quote the server's bytes (BadStatusLine: the status line, up to 64 KiB): shown
                # as the answer's text is, escaped and cut
                why = (f"no complete answer within {self.timeout_s:g} s (timeout_s)" if expired.is_set()
                       else f"no answer ({type(error).__name__}: {terminal_safe(_cut_text(str(error)))})")
                raise ServingError(None, f"{why} from {self.url} after the request was sent; not resent: the server "
                                   "may have run it, or may still run it", retriable=False) from None
            finally:
                watchdog.cancel()
        finally:
            connection.close()
        if response.status == 200:
            return answer
        text = answer.decode(errors="replace").strip()
        if len(text) > SHOWN_ERROR_CHARS or len(answer) == MAX_ERROR_ANSWER_BYTES:
            text = text[:SHOWN_ERROR_CHARS] + " ... (the rest of the server's answer is not shown)"
        # escaped: a hostile server's 400 put ESC ] 52 (a terminal's clipboard write), a screen clear and hidden text
        # into the message, which a traceback prints as it is (breaker-serving)
        text = terminal_safe(text or response.reason)
        if 300 <= response.status < 400:
            text = (f"{text}: a redirect to {str(response.headers.get('Location'))[:200]!r}, which the client does not "
                    "follow; give it the server's own URL")
        retry_after = _retry_after(response.headers.get("Retry-After"))
        if response.status == 503 and retry_after is not None and response.headers.get(ERROR_HEADER) in _NOTHING_RAN:
            raise ServingError(503, text, retriable=True, retry_after_s=retry_after)
        if response.status >= 500 and response.headers.get(ERROR_HEADER) is None:
            text = (f"{text.strip() or response.reason} (from Ray's proxy, not the program: the replica that held "
                    "the request may have died on it; not resent)")
        raise ServingError(response.status, text, retriable=False)

    def _read(self, response) -> bytes | bytearray:
        """The answer's body, in one buffer, refused past ``max_response_bytes``: bytes of the declared length where
        the answer has a Content-Length, else a bytearray grown as the answer arrives (chunked, or up to the
        connection's end), its size checked before each piece is read into it. Pieces joined at the end, and bytes()
        of a bytearray, held the answer twice for a moment (2 GiB at the default 1 GiB limit). Of an answer other
        than a 200, MAX_ERROR_ANSWER_BYTES at most (``_read_error_answer``)."""
        if response.status != 200:
            return _read_error_answer(response)
        declared = response.getheader("Content-Length")
        length = None
        if declared is not None and declared.isascii() and declared.isdigit():
            # At most 20 digits (2**64) before int(), as body.read_body does server-side: int() of more than 4300
            # digits raises ValueError, and http.client hands such a header on (it then reads to the end).
            if len(declared) > 20:
                raise ServingError(response.status, f"the answer's Content-Length has {len(declared)} digits, not a "
                                   "number of bytes", retriable=False)
            length = int(declared)
            if length > self.max_response_bytes:
                raise ServingError(response.status, f"the answer declares {declared} bytes, more than "
                                   f"max_response_bytes ({self.max_response_bytes})", retriable=False)
        if response.chunked:  # read here: http.client reads a chunk of size -1 as "to the end", past any limit
            return _read_chunked(response.fp, self.max_response_bytes, response.status)
        if length is not None:
            # one read into one buffer of the declared size (within the limit, checked above): pieces joined at the
            # end held the answer twice for a moment (2 GiB at the default 1 GiB limit); the attempt's watchdog
            # bounds its time as it bounds every read
            return response.read(length)  # short when the connection ended early: the caller says why
        return _read_to_end(response, self.max_response_bytes, response.status)


# An answer's safetensors header: ~80 bytes an output, so this holds 13,000 outputs.
MAX_ANSWER_HEADER_BYTES = 1 << 20


def _check_answer_header(answer: bytes) -> None:
    """ValueError unless the answer's safetensors header is at most MAX_ANSWER_HEADER_BYTES of JSON, three levels
    deep, naming output_0, ..., output_<n-1> and nothing else: read before safetensors builds a tensor. An answer of
    1,000,000 zero-size tensors (61 MiB, within max_response_bytes) held Client(timeout_s=2).predict 16.7 s and grew
    it by 1.4 GiB (safetensors built every tensor), as a body of many names once held a replica (review 5)."""
    from aotcuda.package_format import json_depth

    if len(answer) < 8:
        raise ValueError("shorter than its 8-byte header length")
    (size,) = struct.unpack("<Q", answer[:8])
    if size > min(MAX_ANSWER_HEADER_BYTES, len(answer) - 8):
        raise ValueError(f"its header claims {size} bytes; a header of a program's outputs is at most "
                         f"{MAX_ANSWER_HEADER_BYTES} here")
    text = answer[8:8 + size].decode("utf-8")  # UnicodeDecodeError is a ValueError
    if json_depth(text, stop=4) > 3:
        raise ValueError("its header nests deeper than a safetensors header")
    entries = json.loads(text)
    if not isinstance(entries, dict):
        raise ValueError("its header is not a JSON object")
    names = [name for name in entries if name != "__metadata__"]
    if set(names) != {f"output_{index}" for index in range(len(names))}:
        unknown = [str(name)[:40] for name in names if not (name.startswith("output_") and name[7:].isdigit())][:3]
        raise ValueError(f"its {len(names)} names are not output_0 to output_{len(names) - 1}"
                         + (f" (e.g. {', '.join(map(repr, unknown))})" if unknown else ""))


# Bytes of a request body sent between two looks for an early answer (_send), and the most it waits for the socket
# to take more (seconds; the attempt's deadline still bounds the whole).
SEND_CHUNK_BYTES = 1 << 20
SELECT_WAIT_S = 0.1
# The most bytes of an interim (1xx) answer's head, and of a chunked answer's size line; trailer lines read.
MAX_INTERIM_BYTES = 16 << 10
MAX_CHUNK_LINE = 1 << 10
MAX_TRAILER_LINES = 64


def _send(connection: http.client.HTTPConnection, path: str, body: bytes, expired: threading.Event) -> bool:
    """POST ``body`` on ``connection``, stopping early where the server answers before it has the whole body (a
    refusal by Content-Length: a body over the server's limit gets 400 at once, and the server closes the connection
    without reading the rest). http.client's request() sends the whole body first and the send then fails with
    EPIPE or a reset, losing the answer: a 600 KB body over a 100 KB limit read as "Broken pipe". The socket is
    non-blocking meanwhile, so that a server that answers and then reads nothing cannot hold a send until the
    attempt's deadline (whose cut would drop the answer); an interim answer (100 Continue) is read and passed over.
    Returns whether the whole body was sent."""
    connection.putrequest("POST", path)
    connection.putheader("Content-Type", "application/octet-stream")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders()
    sock, view, sent = connection.sock, memoryview(body), 0
    timeout = sock.gettimeout()
    sock.setblocking(False)
    # A selector (epoll, kqueue), not select.select: select takes no descriptor past FD_SETSIZE (1024), and a process
    # holding that many files or sockets (a web service calling the model server for its own clients, which those
    # clients' connections fill) got select's raw "ValueError: filedescriptor out of range in select()" from every
    # predict (breakserve, 2026-12-07).
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    try:
        while sent < len(view) and not expired.is_set():
            events = selector.select(SELECT_WAIT_S)
            ready = events[0][1] if events else 0
            readable, writable = ready & selectors.EVENT_READ, ready & selectors.EVENT_WRITE
            if readable:
                if _skipped_interim_answer(sock):
                    continue
                return False  # an answer (or the connection's end) before the whole body
            if writable:
                try:
                    sent += sock.send(view[sent:sent + SEND_CHUNK_BYTES])
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    return False
    finally:
        selector.close()
        sock.settimeout(timeout)
    return sent == len(view)


def _skipped_interim_answer(sock) -> bool:
    """Read an interim (1xx) answer off the socket, whole, and say so; False (nothing read) for anything else. A
    server may send 100 Continue unasked (RFC 9110, 15.2), and the final answer follows the body."""
    try:
        start = sock.recv(16, socket.MSG_PEEK)
    except BlockingIOError:
        return True  # nothing to read after all
    except OSError:
        return False
    if not re.match(rb"HTTP/1\.[01] 1\d\d[ \r]", start):
        return False
    head = b""
    sock.settimeout(SELECT_WAIT_S * 10)
    try:
        while not head.endswith(b"\r\n\r\n"):
            if len(head) > MAX_INTERIM_BYTES:
                return False  # the connection's end: not an answer we read
            byte = sock.recv(1)
            if not byte:
                return False
            head += byte
    except OSError:
        return False
    finally:
        sock.setblocking(False)
    return True


class _FinalResponse(http.client.HTTPResponse):
    """http.client's response, reading past every interim (1xx) answer to the final one. http.client passes over
    100 Continue only: a 102 Processing or 103 Early Hints (RFC 8297, which a proxy in front may send) was taken
    for the answer, and Client raised "HTTP 103: " where the server then answered 200 (review 12). A flood of
    them ends at the attempt's deadline, as any answer that does not end."""

    def _read_status(self):
        while True:
            version, status, reason = super()._read_status()
            if not 100 < status < 200 or status == 101:  # 100 is begin()'s own; 101 switches protocols: final
                return version, status, reason
            http.client._read_headers(self.fp)  # at most 100 lines of 64 KiB, as begin() reads them


# Bytes read at a time into an answer's buffer (_read_to_end, _read_chunked).
READ_PIECE_BYTES = 1 << 16


def _longer_than(limit: int, status: int) -> ServingError:
    return ServingError(status, f"the answer is longer than max_response_bytes ({limit})", retriable=False)


# The most bytes read of an answer other than a 200, and the most characters of it a ServingError shows: its text is
# the error's message (aotcuda's own answers are at most 2,000 characters). A server's 200 MiB 400 was read whole
# (within max_response_bytes) and made a message of 209,715,210 characters, the client's peak 1.2 GiB
# (breaker-serving); at the default 1 GiB limit, a few GiB.
MAX_ERROR_ANSWER_BYTES = 64 << 10
SHOWN_ERROR_CHARS = 2000


def _cut_text(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def _read_error_answer(response) -> bytes:
    """At most the first MAX_ERROR_ANSWER_BYTES of an answer other than a 200 (the rest is left unread: the connection
    is closed after the attempt). A chunked one is read by _read_chunked: http.client reads a chunk of size -1 as "to
    the end", past any amount asked."""
    if response.chunked:
        return bytes(_read_chunked(response.fp, MAX_ERROR_ANSWER_BYTES, response.status, cut=True))
    return response.read(MAX_ERROR_ANSWER_BYTES)


def _read_to_end(response, limit: int, status: int) -> bytearray:
    """An answer without a declared length, read up to the connection's end into one buffer, never more than one
    byte past ``limit`` (which tells an answer of exactly ``limit`` bytes from a longer one)."""
    body = bytearray()
    while piece := response.read(min(READ_PIECE_BYTES, limit + 1 - len(body))):
        body += piece
        if len(body) > limit:
            raise _longer_than(limit, status)
    return body


def _read_chunked(fp, limit: int, status: int, cut: bool = False) -> bytearray:
    """A chunked answer's body (RFC 9112, 7.1), read into one buffer: each size line checked as what it is (at most
    16 hex digits after any leading zeros), and each chunk's size against ``limit`` before any of it is read (``cut``:
    the body's first ``limit`` bytes are returned where it is longer, not an error)."""
    body = bytearray()
    while True:
        line = fp.readline(MAX_CHUNK_LINE + 1)
        if not line:  # the connection's end, where a chunk's size line was due: no line the server sent
            raise ServingError(status, "the answer ended before its last chunk (of size 0): it is not complete",
                               retriable=False)
        # leading zeros are allowed (1*HEXDIG), and are not what could make the size too large to read
        digits = re.fullmatch(rb"0*([0-9A-Fa-f]{1,16})", line.split(b";", 1)[0].strip())
        if len(line) > MAX_CHUNK_LINE or not digits:
            raise ServingError(status, f"the answer's chunk size line {line[:40]!r} is not a chunk size", retriable=False)
        size = int(digits[1], 16)
        if size == 0:
            for _ in range(MAX_TRAILER_LINES):  # the trailers, up to the blank line
                if fp.readline(MAX_CHUNK_LINE + 1) in (b"\r\n", b"\n", b""):
                    return body
            raise ServingError(status, "the answer's trailers do not end", retriable=False)
        if len(body) + size > limit:
            if not cut:
                raise _longer_than(limit, status)
            body += fp.read(limit - len(body))
            return body
        while size:
            piece = fp.read(min(size, READ_PIECE_BYTES))
            if not piece:
                raise ServingError(status, "the answer ended inside a chunk", retriable=False)
            body += piece
            size -= len(piece)
        if fp.readline(MAX_CHUNK_LINE + 1) not in (b"\r\n", b"\n"):
            raise ServingError(status, "the answer's chunk does not end where its size says", retriable=False)


def _wire_tensors(inputs) -> dict[str, torch.Tensor]:
    """The inputs as safetensors sends them: dense CPU tensors, each with memory of its own and its conjugate or
    negative bit applied. TypeError or InputError, in our words, for what safetensors would refuse with its own (a
    bare tensor, an array, a sparse or meta tensor, a dtype it cannot carry) or send wrong (z.conj() was sent as z)."""
    from aotcuda.errors import InputError
    from aotcuda.serving.codec import unsupported_dtypes

    if not isinstance(inputs, dict):
        raise TypeError(f"predict takes a dict of input name -> torch.Tensor (the names `aotcuda inspect` lists, e.g. "
                        f"{{'x': x}}), not a {type(inputs).__name__}")
    wire, storages = {}, set()
    for name, value in inputs.items():
        if not isinstance(name, str):
            raise TypeError(f"input names must be strings, got {name!r}")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"input {name!r} is a {type(value).__module__}.{type(value).__name__}; pass a "
                            "torch.Tensor (torch.from_numpy for an array)")
        if value.is_nested or value.layout != torch.strided:
            raise InputError(f"input {name!r} is a {'nested' if value.is_nested else str(value.layout)} tensor; pass "
                             "a dense one (.to_dense())")
        if value.device.type == "meta":
            raise InputError(f"input {name!r} is on the meta device and holds no values")
        try:
            tensor = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
        except (RuntimeError, NotImplementedError) as error:
            raise InputError(f"input {name!r} cannot be copied to the CPU to be sent: {str(error)[:200]}") from None
        storage = tensor.untyped_storage()
        if tensor.numel() and (storage.data_ptr() in storages or storage.nbytes() != tensor.nbytes):
            tensor = tensor.clone()  # safetensors refuses two names over one memory, and a view of part of one
        storages.add(tensor.untyped_storage().data_ptr())
        wire[name] = tensor
    refused = unsupported_dtypes(tensor.dtype for tensor in wire.values())
    if refused:
        names = [name for name, tensor in wire.items() if tensor.dtype in refused]
        raise InputError(f"input {names[0]!r} is {str(refused[0]).removeprefix('torch.')}, which safetensors (the wire "
                         "format) cannot carry, and no served program takes; pass the dtype the program takes "
                         "(`aotcuda inspect` lists it)")
    return wire


def _check_arguments(url, **values) -> None:
    """ValueError naming a Client argument that is not what it must be, and the fix. Unchecked (breakcall, 2026-12-07):
    retries=-1 made no attempt and raised AssertionError("unreachable"); a negative backoff_s or max_retry_after_s
    raised time.sleep's "sleep length must be non-negative" in place of the server's refusal it was to wait after;
    timeout_s=None waited for ever on a server that never answers, inf or 1e12 raised a raw OverflowError, 0 made the
    socket non-blocking ("Operation now in progress"); a str number failed later with a raw TypeError; a url holding
    a line break was sent on into the request line and every error message."""
    if not isinstance(url, str):
        raise ValueError(f"url must be a str, http://HOST[:PORT], got {type(url).__name__}")
    if any(unicodedata.category(char)[0] in "CZ" for char in url):  # spaces, line breaks, other controls
        raise ValueError(f"url must be http://HOST[:PORT] without spaces or control characters, got {url!r}")
    for name, value in values.items():
        whole = name in ("retries", "max_response_bytes")
        number = not isinstance(value, bool) and isinstance(value, numbers.Integral if whole else numbers.Real)
        if name == "timeout_s":  # past TIMEOUT_MAX the socket's deadline overflows (nan fails every comparison)
            fits = number and 0 < value <= threading.TIMEOUT_MAX
        else:
            fits = number and (1 if name == "max_response_bytes" else 0) <= value < float("inf")
        if not fits:
            kind = "a whole number" if whole else "a number of seconds" if name == "timeout_s" else \
                "a finite number of seconds"  # inf: a server's Retry-After of 1e300 would be slept (OverflowError)
            bounds = {"timeout_s": f"above 0 and at most {threading.TIMEOUT_MAX:g} (what a socket waits; None would "
                                   "wait for ever)", "max_response_bytes": "of at least 1"}.get(name, "of 0 or more")
            raise ValueError(f"Client's {name} must be {kind} {bounds}, got {value!r}"
                             + (f" ({type(value).__name__})" if not number else "")
                             + f"; e.g. {name}={_DEFAULTS[name]!r}, the default")


# Client's keyword defaults, read from its signature: a refusal's "e.g. NAME=VALUE, the default" (a copy of them
# written out here had kept timeout_s=60.0 when the default became 75 s)
_DEFAULTS = {name: parameter.default for name, parameter in inspect.signature(Client.__init__).parameters.items()
             if parameter.default is not inspect.Parameter.empty}


def _connected(host: str, port: int, deadline: float, first: int = 0) -> socket.socket:
    """A connection to the first of ``host``'s addresses that answers before ``deadline`` (time.monotonic()), tried in
    turn from the ``first``-th (modulo their number); OSError (TimeoutError once the deadline passed) when none does.
    Why not socket.create_connection (http.client's connect): it gives each address the whole timeout, so that a
    server's name with many addresses that drop the connection held one attempt for their number of timeouts: five
    addresses, 5 s for Client(timeout_s=1), and retried as nothing was sent (breakserve, 2026-12-07). Why each address
    gets a share of what is left (split evenly among those not yet tried, at least ``LEAST_CONNECT_SHARE_S``), not
    all of it: a dual-stack name whose first address drops the connection (a broken IPv6 route) then took the whole
    attempt, on every attempt, and its working second address was never tried (fixrev, 2026-12-07)."""
    error: OSError | None = None
    addresses = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    if addresses:
        start = first % len(addresses)
        addresses = addresses[start:] + addresses[:start]
    for index, (family, kind, protocol, _, address) in enumerate(addresses):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = socket.socket(family, kind, protocol)
        try:
            sock.settimeout(min(left, max(left / (len(addresses) - index), LEAST_CONNECT_SHARE_S)))
            sock.connect(address)
        except OSError as failed:
            sock.close()
            error = failed
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client's connect sets it
        return sock
    if error is not None and deadline - time.monotonic() > 0:
        raise error
    raise TimeoutError(f"no address of {host} answered within the attempt's time (timeout_s)"
                       + (f"; the last: {error}" if error is not None else ""))


# The least time a connect to one address of many is given (seconds), while the attempt has that much left: a share
# of a short timeout_s split among many addresses would be too short for a working address across a slow network.
LEAST_CONNECT_SHARE_S = 0.25


def _cut(sock, expired: threading.Event) -> None:
    """End a connection's reads at once (the attempt's deadline passed)."""
    expired.set()
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass
