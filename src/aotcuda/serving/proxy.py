"""What aotcuda adds to Ray Serve's HTTP proxy: the request body is read there, from the client, within
``--body-timeout-s`` and at most ``--max-request-bytes`` long, before any replica is asked.

Why in the proxy: Ray Serve 2.60's proxy sends a replica only the request's scope
(ray/serve/_private/proxy_request_response.py: ``serialized_replica_arg``), and the replica fetches the body
with actor calls back to the proxy (http_util.py: ``ASGIReceiveProxy``). A timeout measured in the replica also
counts Ray's own delay on a busy proxy: under load a body the client had sent whole got 408 (issue 26). Here the
clock runs on the client's sending alone; a slow client gets 408 from the proxy and never holds a replica slot.

How it is installed: Ray 2.60 refuses ``http_options={"middlewares": [...]}`` ("`middlewares` in HTTPOptions
has been removed", ray/serve/config.py); its proxy instead calls the function named by the environment variable
RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH when it starts and wraps its ASGI app in the Starlette middlewares
that function returns (http_util.py: ``configure_http_middlewares``, ``_apply_middlewares``). A Ray that
serve_package starts is given ``middlewares`` below, and the limits through ``proxy_environment``: the
proxy's process inherits both from the environment of ray.init.

The proxy marks each request whose body it read (``BODY_READ``, a key of the ASGI scope: a client cannot set
it); the replica then bounds only Ray's delay (deployment.RAY_BODY_DELAY_S). A request without the mark (a
cluster's proxy started without this callback) is timed in the replica as before.

It also drops the request headers Ray's proxy reads as its own per-request controls (``RAY_CONTROL_HEADERS``),
before Ray sees them: they are for a trusted caller in front of Ray (HAProxy), and from a client they overrode the
deployer's limits (``x-request-timeout-seconds: 0`` turned ``--request-timeout-s`` off for that request, and
``x-request-disconnect-disabled: ?1`` ran requests whose clients had left).

Before it reads a body, it refuses what a web page could have sent (``web_pages``: 415 for a /predict post that is
not application/octet-stream, 421 for a request over loopback naming another host, 403 for a request with an Origin
header the deployer has not allowed). A request target in absolute form (``POST http://host:port/predict``, which
HTTP/1.1 servers must take; uvicorn's h11 leaves the URL in the path and Ray's router answered its own 404) is read as
its path, with the URL's host as the Host that check reads (``web_pages.in_origin_form``); any other target that is not
a path is refused 400.

While the server has no application (``aotcuda serve`` stopping: ``serve.delete`` then ``ray.shutdown``, seconds
apart; or starting), Ray's proxy answers its routes 404 "Path '/predict' not found", which reads as final: those
answers become 503 with Retry-After and Connection: close (``StoppingError``).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import heapq
import ipaddress
import itertools
import os
import socket
import time

from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse

from aotcuda import switches
from aotcuda.serving.body import (CLIENT_LEFT, ERROR_HEADER, LEAST_TIMEOUT_S, BusyError, PendingBytes, RequestError,
                                  SlowBodyError, StoppingError, read_body)
from aotcuda.serving.web_pages import (ALLOWED_HOSTS_VARIABLE, ALLOWED_ORIGINS_VARIABLE, host_refusal,
                                       in_origin_form, media_type_refusal, origin_refusal, route_of)

__all__ = ["BODY_READ", "CALLBACK", "WholeBody", "bound_request_heads", "middlewares", "proxy_environment",
           "read_by_proxy", "refuse_websocket", "without_ray_controls"]

CALLBACK = "aotcuda.serving.proxy:middlewares"
CALLBACK_VARIABLE = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
BODY_TIMEOUT_VARIABLE, MAX_BYTES_VARIABLE = "AOTCUDA_SERVE_BODY_TIMEOUT_S", "AOTCUDA_SERVE_MAX_REQUEST_BYTES"
MAX_PENDING_VARIABLE = "AOTCUDA_SERVE_MAX_PENDING_BYTES"
MIN_SEND_RATE_VARIABLE = "AOTCUDA_SERVE_MIN_SEND_RATE"
IN_FLIGHT_VARIABLE = "AOTCUDA_SERVE_REQUESTS_IN_FLIGHT"
HOLD_TIMEOUT_VARIABLE = "AOTCUDA_SERVE_HOLD_TIMEOUT_S"
REQUEST_TIMEOUT_VARIABLE = "AOTCUDA_SERVE_REQUEST_TIMEOUT_S"
# the header by which Ray Serve 2.60's proxy takes a request's timeout from a trusted caller in front of it
# (http_util.parse_request_timeout_header): a client's is dropped (RAY_CONTROL_HEADERS), the proxy writes its own
RAY_TIMEOUT_HEADER = b"x-request-timeout-seconds"
# the route answered by a deployment of its own (health.py), held apart from the program's requests, and the
# requests that deployment takes at once (its max_ongoing_requests, server.py)
HEALTH_ROUTE, HEALTH_SLOTS = "/healthz", 64
# the program's routes (health.ROUTES, which imports Ray): a 404 from Ray for one means no application is running
PROGRAM_ROUTES = frozenset({"/predict", "/healthz", "/stats"})
# the routes Ray Serve 2.60's HTTP proxy answers itself, exactly these paths past the root path (proxy_request_response.py:
# is_health_request, is_route_request): its own health, which KubeRay's probes and balancers ask, and its route table.
# No replica runs them, so they never wait for a replica's slot (ray_proxy_route).
RAY_PROXY_ROUTES = frozenset({"/-/healthz", "/-/routes"})
RETRY_AFTER_S = 1  # what a client refused for lack of room is told to wait (BusyError)
BODY_READ = "aotcuda.body_read"  # scope key: the proxy read this request's whole body within its limits
# The request headers Ray Serve 2.60's HTTP proxy reads as per-request controls (ray/serve/_private/constants.py;
# proxy.py, setup_request_context_and_handle and the request's timeout; http_util.py, parse_request_timeout_header,
# parse_disconnect_disabled_header), in Ray's own spelling: lower case, "-" as "_" (Ray reads the model id and the
# session id so, whichever of the two a client writes). A client's word must not set them: a request with
# ``x-request-timeout-seconds: 0`` ran past --request-timeout-s (200 after 4.8 s where the limit was 2 s), and six
# requests sent with ``x-request-disconnect-disabled: ?1`` by clients that closed at once all ran, for nobody (without
# it, Ray cancels them), so that a client could queue any amount of work without holding a connection.
# ``x-request-id`` too: Ray takes a client's as the request's id in its logs, and bytes that are not UTF-8 made its
# proxy raise (a bare 500, without aotcuda's error header); Ray makes one of its own where none is given.
RAY_CONTROL_HEADERS = frozenset({"x_request_timeout_seconds", "x_request_disconnect_disabled",
                                 "serve_multiplexed_model_id", "x_request_id"})


def proxy_environment(body_timeout_s: float, max_request_bytes: int, max_pending_bytes: int | None = None,
                      requests_in_flight: int = 0, hold_timeout_s: float | None = None,
                      request_timeout_s: float | None = None) -> dict[str, str]:
    """The variables that give a Ray's HTTP proxy this middleware with these limits (read when it starts);
    ``max_pending_bytes`` None: the switch's default, or ``max_request_bytes`` where that is larger;
    ``requests_in_flight``: the requests the replicas take at once, and ``hold_timeout_s`` (None: the switch's
    default) how long one may be held for a slot (FairAdmission; 0: none held); ``request_timeout_s`` (None: the
    switch's default) a request's whole time from its arrival, body and hold included."""
    pending = max_pending_bytes or _default_pending_bytes(int(max_request_bytes))
    # the minimum send rate is this process's switch: read here, so that a value it refuses stops serve before Ray starts
    return {CALLBACK_VARIABLE: CALLBACK, BODY_TIMEOUT_VARIABLE: repr(float(body_timeout_s)),
            MAX_BYTES_VARIABLE: str(int(max_request_bytes)), MAX_PENDING_VARIABLE: str(int(pending)),
            MIN_SEND_RATE_VARIABLE: str(switches.number(MIN_SEND_RATE_VARIABLE)),
            IN_FLIGHT_VARIABLE: str(int(requests_in_flight)),
            REQUEST_TIMEOUT_VARIABLE: repr(float(request_timeout_s if request_timeout_s is not None else
                                                 switches.SWITCHES[REQUEST_TIMEOUT_VARIABLE].default)),
            HOLD_TIMEOUT_VARIABLE: repr(float(hold_timeout_s if hold_timeout_s is not None else
                                              switches.SWITCHES[HOLD_TIMEOUT_VARIABLE].default)),
            ALLOWED_HOSTS_VARIABLE: ",".join(sorted(switches.names(ALLOWED_HOSTS_VARIABLE))),
            ALLOWED_ORIGINS_VARIABLE: ",".join(sorted(allowed_origins()))}


def middlewares() -> list[Middleware]:
    """Called by Ray Serve's HTTP proxy when it starts: the limits come from its environment (the switches'
    defaults are ServeOptions'), request heads are bounded in size and time, and answers the client stops
    reading in time (``bound_request_heads``).
    Raises ValueError naming a variable that is not a positive number, or the two of sizes that do not fit."""
    timeout_s, max_bytes = _positive(BODY_TIMEOUT_VARIABLE), _positive(MAX_BYTES_VARIABLE)
    if timeout_s < LEAST_TIMEOUT_S:  # as ServeOptions refuses it
        raise ValueError(f"{BODY_TIMEOUT_VARIABLE}={timeout_s!r} is below {LEAST_TIMEOUT_S:g} s, which no client's "
                         "request could arrive within (serve's --body-timeout-s refuses it too); give seconds a "
                         "client on a slow link needs, e.g. 30")
    max_pending_bytes = _positive(MAX_PENDING_VARIABLE) if os.environ.get(MAX_PENDING_VARIABLE, "").strip() else None
    if max_pending_bytes is not None and max_pending_bytes < max_bytes:  # as ServeOptions refuses it, in its words
        raise ValueError(f"{MAX_PENDING_VARIABLE}={max_pending_bytes} must be at least {MAX_BYTES_VARIABLE}="
                         f"{max_bytes}: a body of the largest size must fit (else it is refused 503 for good); raise "
                         f"{MAX_PENDING_VARIABLE} or lower {MAX_BYTES_VARIABLE}")
    max_pending_bytes = max_pending_bytes or _default_pending_bytes(max_bytes)
    bound_request_heads(timeout_s, max_pending_bytes)
    trust_no_forwarded_address()
    in_flight = int(switches.number(IN_FLIGHT_VARIABLE))
    kwargs = {"requests_in_flight": in_flight, "hold_timeout_s": switches.number(HOLD_TIMEOUT_VARIABLE)} if in_flight else {}
    request_timeout_s = switches.number(REQUEST_TIMEOUT_VARIABLE)
    if request_timeout_s:
        if request_timeout_s == float("inf"):
            raise ValueError(f"{REQUEST_TIMEOUT_VARIABLE}={request_timeout_s!r} is not a finite number; a deadline "
                             "must end (0 leaves Ray's own request_timeout_s)")
        if request_timeout_s < LEAST_TIMEOUT_S:  # as ServeOptions refuses it (fixreview, 2026-12-07): 1e-300 or
            # 0.001 passed, and every request's budget was gone before it could be let in: a 503 with Retry-After
            # each, which Client resent until its retries ran out, for good
            raise ValueError(f"{REQUEST_TIMEOUT_VARIABLE}={request_timeout_s!r} is below {LEAST_TIMEOUT_S:g} s, "
                             "within which no request could be read and run (serve's --request-timeout-s refuses it "
                             "too); give the seconds a request may take from its arrival, e.g. 60, or 0 for Ray's own "
                             "request_timeout_s")
        kwargs["request_timeout_s"] = request_timeout_s
    return [Middleware(WholeBody, timeout_s=timeout_s, max_bytes=max_bytes, max_pending_bytes=max_pending_bytes,
                       **kwargs)]


def _default_pending_bytes(max_request_bytes: int) -> int:
    """The proxy's pending-bytes limit where none is given: the switch's default, or the body limit where that is
    larger (a body of the largest size must fit)."""
    return max(switches.SWITCHES[MAX_PENDING_VARIABLE].default, max_request_bytes)


FORWARDED_VARIABLE = "FORWARDED_ALLOW_IPS"  # uvicorn's: the peers whose X-Forwarded-For it takes as the client


def trust_no_forwarded_address() -> None:
    """Make uvicorn take no client's ``X-Forwarded-For`` as its address, in this process (Ray's proxy: called before Ray
    builds its uvicorn config), unless the deployer set FORWARDED_ALLOW_IPS (a balancer of theirs in front).

    Why (breakserve3, 2026-12-07): Ray's uvicorn runs with uvicorn's default ``proxy_headers=True`` and trusts
    127.0.0.1, so any local client's ``X-Forwarded-For: 10.9.9.9`` became the request's ``scope["client"]``: the
    address the proxy's fair hold (FairAdmission) tells clients apart by, so that one local client could pass for as
    many as it liked, or for another client, and the address Ray logs."""
    os.environ.setdefault(FORWARDED_VARIABLE, "")


def bound_request_heads(head_timeout_s: float, max_pending_bytes: int | None = None) -> bool:
    """Make uvicorn's ``http="auto"`` mean h11 with a deadline on each request head (heads.DeadlineH11Protocol),
    in this process (Ray's proxy: called when it starts, before Ray builds its uvicorn config, which leaves
    ``http`` at "auto"). Returns whether it could.

    Why h11: "auto" takes httptools where it is installed (Ray Serve's own dependencies install it), and
    httptools bounds no request head: it gathers a header value by concatenation, so one connection sending
    a 120 MiB header grew the proxy by 120 MiB and took 46 s of its CPU (the copies grow with the value),
    while every other request waited on the same event loop. h11 refuses a head over 16 KiB (uvicorn answers
    400 and closes). The body is read here either way; h11 costs tens of microseconds a request more, beside a
    model's run. Why the deadline: uvicorn times no head at all (heads.py), so a head trickled a byte at a time
    held its connection for ever; now it has ``head_timeout_s`` (the body's time), and connections past three
    quarters of the process's file limit, or past what ``max_pending_bytes`` holds of them (heads.connection_limit:
    a begun head holds 16 KiB), are closed at once. The same time bounds an answer the client stops
    reading (heads.py: a connection whose client accepts no byte of it for ``head_timeout_s`` is aborted and the
    answer dropped; else the proxy held each answer for as long as the client kept the connection open), and so
    does a minimum rate, AOTCUDA_SERVE_MIN_SEND_RATE (heads.py: a client that takes its answer slower is cut off
    once the grace is over; else a few slow readers held the pending room). A uvicorn without that table keeps its
    choice."""
    try:
        import uvicorn.config

        from aotcuda.serving import heads
    except ImportError:
        return False
    protocols = getattr(uvicorn.config, "HTTP_PROTOCOLS", None)
    if not isinstance(protocols, dict) or "h11" not in protocols or "auto" not in protocols:
        return False
    heads.DeadlineH11Protocol.head_timeout_s = head_timeout_s
    heads.DeadlineH11Protocol.send_timeout_s = head_timeout_s
    heads.DeadlineH11Protocol.min_send_rate = switches.number(MIN_SEND_RATE_VARIABLE)
    heads.DeadlineH11Protocol.max_connections = heads.connection_limit(max_pending_bytes)
    protocols["auto"] = heads.PROTOCOL
    return True


def _positive(name: str):
    value = switches.number(name)
    if not value > 0:
        raise ValueError(f"{name}={value!r} is not a positive number; a request body needs time and room")
    if value == float("inf"):  # "inf" or "1e999": float() takes it, and it turned every deadline of the proxy off
        raise ValueError(f"{name}={value!r} is not a finite number; a deadline must end (serve's own options "
                         "refuse it too)")
    return value


def read_by_proxy(scope) -> bool:
    """Whether the HTTP proxy read this request's body whole, within the client's time (see WholeBody)."""
    return bool(scope.get(BODY_READ))


class WholeBody:
    """ASGI middleware: read an HTTP request's whole body within ``timeout_s`` and at most ``max_bytes`` long
    (body.read_body: refused by Content-Length before reading, counted while it streams), answer 408 or 400
    itself when it does not fit, else hand the app the body as one message and mark the scope.

    ``max_pending_bytes``: the bytes of bodies it holds at once, over all requests (each piece is counted as it
    arrives, until its request ends; a declared Content-Length holds nothing by itself, nor does a request
    without a body). Each client is bounded by ``max_bytes``, but the proxy takes every connection: 40 clients
    sending 256 MiB each made it hold 10 GiB. A piece that would pass the limit gets its request 503 with
    Retry-After (BusyError): nothing of it ran, the client may resend; its room is given back at once.

    The same room covers answers that clients have not read yet (``unread_answers()``: heads.unread_answer_bytes,
    the connections' write buffers): a request with a body, read whole while they and the bodies held pass the
    limit, gets the same 503 before it reaches a replica. The send timeout and the minimum send rate (heads.py) bound
    how long a client may leave its answer unread, but not how many do so at once: 32 MiB answers to a new
    non-reader every 30 ms would make the proxy hold 32 GiB within a 30 s timeout. A request without a body (``GET /healthz``) is never refused.
    """

    def __init__(self, app, *, timeout_s: float, max_bytes: int, max_pending_bytes: int | None = None,
                 unread_answers=None, requests_in_flight: int = 0, hold_timeout_s: float | None = None,
                 request_timeout_s: float | None = None):
        self.app, self.timeout_s, self.max_bytes = app, timeout_s, max_bytes
        # a request's whole time, from its arrival (None: Ray's own timeout, from when it is handed on). Why here
        # (fixlist, 2026-12-07): Ray's clock starts when the proxy hands the request on, so a request held H s for a
        # slot then had the whole --request-timeout-s again (and its body's time too): up to twice what the deployer
        # set. The hold ends where the budget does, and Ray is given what is left.
        self.request_timeout_s = request_timeout_s or None
        self.hold_timeout_s = switches.SWITCHES[HOLD_TIMEOUT_VARIABLE].default if hold_timeout_s is None else hold_timeout_s
        # the program's requests, and the health checks apart (their own deployment's slots): neither waits for the other
        self.admission = FairAdmission(requests_in_flight) if requests_in_flight else None
        self.health_admission = FairAdmission(HEALTH_SLOTS) if requests_in_flight else None
        # the part of the budget a request's run keeps (fixreview, 2026-12-07): the budget less the hold (serve's
        # --run-timeout-s, and the batch wait: server.hold_timeout_s), where a hold shorter than the budget is set;
        # else none known, and only a budget used up whole is refused. No request is handed on with less: Ray
        # answered such a sliver 408 at once, final, where nothing had run.
        hold_s = self.hold_timeout_s
        self.run_reserve_s = (self.request_timeout_s - hold_s if self.request_timeout_s and self.admission is not None
                              and 0 < hold_s < self.request_timeout_s else 0.0)
        self.pending = PendingBytes(max_pending_bytes or max(switches.SWITCHES[MAX_PENDING_VARIABLE].default, max_bytes))
        # one client's part of that room, level by level as the fair hold shares turns (client_groups: an IPv4 or
        # loopback client alone, an IPv6 client's /48, its /56, its /64): the room less one largest body for the
        # widest level, two for the next, three for the last, so that another client's body always fits, and another
        # member's of the same group too (breakfair, 2026-12-07: one address's held bodies filled the room, and every
        # other client's was refused 503 at the room, never reaching the fair hold that would have let it in first;
        # fixlist: one /48's /64s filled it so; fixreview: keyed by the /48 alone, one hostile /64 filled its /48's
        # part and every other /64 of a shared /48 got 503). Each level holds one largest body at least: where the
        # room holds fewer than four, the narrower levels share what there is.
        self.level_rooms = tuple(max(self.pending.limit - bodies * max_bytes, max_bytes) for bodies in (1, 2, 3))
        self.held_by: collections.Counter = collections.Counter()  # client or group -> bytes its requests hold
        self.unread_answers = unread_answers or _unread_answer_bytes
        # this machine's own name too (Debian maps it to 127.0.1.1): /etc/hosts resolves it, no page's DNS can
        self.allowed_hosts = switches.names(ALLOWED_HOSTS_VARIABLE) | {socket.gethostname().lower()}
        self.allowed_origins = allowed_origins()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            await refuse_websocket(scope, receive, send)
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        origin_form = in_origin_form(scope)  # POST http://host:port/predict: its path, the URL's host as the Host
        if isinstance(origin_form, RequestError):
            await _refused(origin_form, scope, receive, send)
            return
        scope = origin_form
        refusal = (host_refusal(scope, self.allowed_hosts) or media_type_refusal(scope)
                   or origin_refusal(scope, self.allowed_origins))
        if refusal is not None:  # before a byte of the body is read
            await _refused(refusal, scope, receive, send)
            return
        send = answers_while_stopping(scope, send)
        arrived = time.monotonic()  # the request's clock: its body, its hold and its run count from here
        deadline = arrived + self.request_timeout_s if self.request_timeout_s else None
        held = 0
        client = client_key((scope.get("client") or ("",))[0])
        holders = client_groups(client)  # whose parts of the room: the client's, and an IPv6 client's groups'

        def take(size: int) -> None:  # room for the bytes received, as they arrive (body.read_body)
            nonlocal held
            try:
                for bodies, (holder, room) in enumerate(zip(holders, self.level_rooms), start=1):
                    if self.held_by[holder] + size > room:
                        whose = "this client's" if len(holders) == 1 else f"{holder}'s"
                        raise BusyError(f"{whose} requests hold {self.held_by[holder]} bytes of request bodies in the "
                                        f"server, and {size} more would pass the {room} they may hold "
                                        f"(--max-pending-bytes less {bodies} largest "
                                        f"bod{'y' if bodies == 1 else 'ies'}, kept for the other clients); nothing "
                                        "of this request ran, send it again after the Retry-After seconds")
                self.pending.take(size)
            except BusyError:
                # Refused: its room goes back now, not once its answer is sent (read_body's reader is a task of
                # its own: a loop turn later), so that the bodies still arriving can finish instead of being
                # refused one after the other against room that nobody will use.
                self._give(holders, held)
                held = 0
                raise
            held += size
            for holder in holders:
                self.held_by[holder] += size

        try:
            await self._read_and_hand_on(scope, receive, send, take, client, arrived, deadline)
        finally:
            self._give(holders, held)

    def _give(self, holders: tuple[str, ...], size: int) -> None:
        self.pending.give(size)
        for holder in holders:
            self.held_by[holder] -= size
            if self.held_by[holder] <= 0:
                del self.held_by[holder]

    async def _read_and_hand_on(self, scope, receive, send, take, client: str, arrived: float,
                                deadline: float | None) -> None:
        try:
            body = await read_body(Request(scope, receive), self.max_bytes, self.timeout_s, take)
            if body:
                self._check_room_for_answers()
        except ClientDisconnect:  # the client left mid-body: nobody to answer
            return
        except (RequestError, BusyError) as error:
            await _refused(error, scope, receive, send)
            return
        client_left = scope.get(CLIENT_LEFT)
        if client_left is not None and client_left():
            # Gone already: nobody to answer. Why (fixlist, 2026-12-07): clients that connect, send GET /stats and
            # close at once were handed on all the same, each routed by Ray to a replica and cancelled there, on
            # the proxy's one event loop: a flood of them at 2,000-3,000 a second left another client's /stats
            # waiting seconds (docs/reliability.md).
            return
        if deadline is not None and self._short_of_the_run(deadline):
            # Its body alone took the budget, or the run's part of it: final, not the hold's retryable 503. Why
            # (fixreview, 2026-12-07): a body slower than --request-timeout-s (--body-timeout-s 120 with
            # --request-timeout-s 60, which serve takes) got 503 with Retry-After, and Client sent the whole body
            # again, to the same end, as many times as its retries allowed.
            await _refused(self._slow_body_error(arrived, deadline), scope, receive, send)
            return
        if ray_proxy_route(scope):
            admission = None  # answered by Ray's proxy itself: no slot to wait for
        elif health_route(scope):
            admission = self.health_admission
        else:
            admission = self.admission
        admitted = admission is not None
        was_held = admitted and not admission.enter_at_once(client)
        if was_held:
            # Held. The body is whole: what the client sends next is its leaving (http.disconnect), which ends its
            # hold. Only here: a task of its own for that receive (made, cancelled, stepped once to end) cost each
            # request let in at once about 3 us of the proxy's one event loop, a tenth of the middleware's, for nothing.
            left = asyncio.ensure_future(receive())
            try:
                await admission.enter(client, self._hold_time(arrived, deadline), left)
            except ClientDisconnect:  # the client left while held: nobody to answer, no turn kept for it
                return
            except BusyError as error:
                await _refused(error, scope, receive, send)
                return
            finally:
                left.cancel()
        handed = False

        async def whole_body_then_client():
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # what follows the body: the client's disconnect

        try:
            headers = without_ray_controls(scope.get("headers") or [])
            scope = {name: value for name, value in scope.items() if name != CLIENT_LEFT}  # Ray pickles the scope
            if deadline is not None:
                left_s = deadline - time.monotonic()
                if was_held and self._short_of_the_run(deadline):  # let in as its hold ran out: nothing of it ran
                    await _refused(BusyError(f"this request waited for a replica's slot until {max(left_s, 0):.3g} s "
                                             f"of the server's {self.request_timeout_s:g} s for a request "
                                             "(--request-timeout-s) were left, less than its run's "
                                             f"{self.run_reserve_s:.3g} s; nothing of this request ran, send it "
                                             "again after the Retry-After seconds"), scope, receive, send)
                    return
                headers.append((RAY_TIMEOUT_HEADER, repr(left_s).encode()))  # Ray times it from here: what is left
            scope[BODY_READ], scope["headers"] = True, headers  # on the scope's copy made above
            await self.app(scope, whole_body_then_client, send)
        finally:
            if admitted:
                admission.leave(client)

    def _hold_time(self, arrived: float, deadline: float | None) -> float:
        """How long a request may still be held for a slot: until the hold's timeout from its arrival, or the end of
        its budget if sooner.

        Why from the arrival (fixreview, 2026-12-07): the hold was counted from when the body had been read, so its
        body's time came out of the run's part of the budget: at serve's defaults (request 60 s, hold 30 s, run 30 s)
        a body that took 25 s was held to 55 s and Ray was handed 5 s for a run of up to 30 s (Ray's 408, final: the
        client cannot tell whether it ran). Counted from the arrival, a request let in at the hold's end still has
        --request-timeout-s less the hold: its run's time."""
        hold_until = arrived + self.hold_timeout_s
        if deadline is not None:
            hold_until = min(hold_until, deadline)
        return max(0.0, hold_until - time.monotonic())

    def _short_of_the_run(self, deadline: float) -> bool:
        """Whether what is left of a request's budget is used up, or less than its run's part (run_reserve_s)."""
        left_s = deadline - time.monotonic()
        return left_s <= 0 or left_s < self.run_reserve_s

    def _slow_body_error(self, arrived: float, deadline: float) -> SlowBodyError:
        took_s, left_s = time.monotonic() - arrived, deadline - time.monotonic()
        leaving = (f"none of its {self.request_timeout_s:g} s for a request (--request-timeout-s)" if left_s <= 0 else
                   f"{left_s:.3g} s of its {self.request_timeout_s:g} s for a request (--request-timeout-s), less than "
                   f"the {self.run_reserve_s:.3g} s its run may need")
        return SlowBodyError(f"the request body took {took_s:.3g} s to arrive, leaving {leaving}; nothing of this "
                             "request ran, and a body sent as slowly again would fare alike: send it faster (smaller "
                             "batches), or ask for a server with a larger --request-timeout-s")

    def _check_room_for_answers(self) -> None:
        answers = self.unread_answers()
        if answers and self.pending.held + answers > self.pending.limit:
            raise BusyError(f"the server holds {answers} bytes of answers that their clients have not read and "
                            f"{self.pending.held} bytes of request bodies, past its limit of {self.pending.limit} "
                            "(--max-pending-bytes); nothing of this request ran, send it again after the "
                            "Retry-After seconds")


def ray_proxy_route(scope) -> bool:
    """Whether Ray's HTTP proxy answers this request itself (RAY_PROXY_ROUTES, read as Ray reads them: the path past the
    root path, exactly; ``/-/healthz/`` goes to the application, as any other path does).

    Why (breakserve, 2026-12-07): the fair hold held them as requests for a replica's slot, so that while the replicas
    ran as many requests as they take, a probe of Ray's own health waited for one to end (up to --run-timeout-s, or got
    503 at the hold's end): KubeRay's readiness probe of a Serve pod asks /-/healthz with a timeout of seconds, and load
    alone took the pod out of service."""
    path, root = scope.get("path") or "", scope.get("root_path") or ""
    return path.startswith(root) and path[len(root):] in RAY_PROXY_ROUTES


def health_route(scope) -> bool:
    """Whether Ray sends this request to the health deployment (mounted at HEALTH_ROUTE, server.py): its path past the
    root path is that route or under it, as Ray's router matches a route prefix (proxy_router.match_route: the prefix,
    then the path's end or a '/'); ``/healthzx`` goes to the program.

    Why (fix38, 2026-12-07): the hold compared the path without its trailing slashes with /healthz, so ``/healthz/x``
    (a probe's typo, a monitor that appends a path), which the health deployment answers, was held for one of the
    program's slots: while the replicas ran as many requests as they take it waited for a run to end, or got 503 at the
    hold's end, and it took a program slot from a request for the time of a health answer."""
    path, root = scope.get("path") or "", scope.get("root_path") or ""
    route = path[len(root):] if path.startswith(root) else path
    return route == HEALTH_ROUTE or route.startswith(HEALTH_ROUTE + "/")


def client_key(address: str) -> str:
    """Whom a request's address stands for, in the proxy's fair hold: an IPv6 address's /64 (a host is given a /64
    to make addresses in, 2^64 of them, so one client could pass for any number), every loopback address one client
    (this machine: a local client binds any of 127.0.0.0/8's 16 million addresses, or ::1, at will; breakfair,
    2026-12-07), an IPv4 address in IPv6 (mapped, 6to4's 2002::/16, Teredo's client, NAT64's 64:ff9b::/96) as that IPv4
    address: one IPv4 host has 65,536 6to4 /64s, and a Teredo address's upper 64 bits name a server the client chooses
    (breakfair); every IPv4 client a translator in front of an IPv6-only server (SIIT, NAT64's well-known prefix, or a
    /96 of RFC 8215's local-use 64:ff9b:1::/48 where the address shows it: ``_nat64_local_use_at_96``) passes on
    shared one /64, so that one of them held every other behind its flood (breakserve); any other address as it is."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    if ip.version == 6:  # an IPv4 host's own addresses in IPv6: the IPv4 address is the client
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:  # 2002:V4::/48: 65,536 /64s for one IPv4 address
            ip = ip.sixtofour
        elif ip.teredo is not None:  # 2001:0:SERVER:..:~CLIENT: the server's half is the client's to write
            ip = ip.teredo[1]
        elif ip in NAT64_PREFIX or _nat64_local_use_at_96(ip):  # an IPv4 client translated to IPv6 (RFC 6052)
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)  # its address in the last 32 bits
    if ip.is_loopback:
        return LOOPBACK_CLIENT
    if ip.version == 4:
        return str(ip)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


LOOPBACK_CLIENT = "loopback"  # the fair hold's one client for every address of this machine's loopback
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215's prefix for a network's own translators


def _nat64_local_use_at_96(ip) -> bool:
    """Whether an IPv6 address is an IPv4 client translated with a /96 taken from RFC 8215's local-use prefix
    64:ff9b:1::/48, so that the IPv4 address is its last 32 bits (fixrev, 2026-12-07: every IPv4 client of such a
    translator was the one /64 64:ff9b:1::/64 to the fair hold, the pending room and the connection caps). RFC 6052
    places the IPv4 address by the prefix's length, which the address does not say; one case says it alone:
    64:ff9b:1::/96 itself (bits 48-95 zero: at /48, /56 or /64 the IPv4 address would then start with 0, no client's).
    Any other address of the /48 (an operator's /96 in it, or a /48-/64 placement) stays one /64, as an operator's own
    prefix does. (A nonzero bits 64-71 said /96 here at first; RFC 6052 keeps those bits zero at every length, /96
    too, so no translator writes such an address, and a host with a /64 of the /48 took 2**32 clients' turns by them:
    review, 2026-12-07.)"""
    if ip not in NAT64_LOCAL_USE or int(ip) & 0xFFFFFFFF == 0:
        return False
    return (int(ip) >> 32) & ((1 << 48) - 1) == 0


# the prefixes an IPv6 client's /64 is held within, widest first: a provider delegates a /48 or a /56 to one
# customer, whose 65,536 or 256 /64s would otherwise be as many clients (RFC 6177)
IPV6_GROUPS = (48, 56)


@functools.lru_cache(maxsize=1 << 16)
def client_groups(client: str) -> tuple[str, ...]:
    """The fair hold's path to a client (``client_key``), widest first, ending with the client: an IPv6 /64 within
    its /48 and its /56; any other client (an IPv4 address, loopback) alone."""
    if not client.endswith("/64"):
        return (client,)
    import ipaddress

    try:
        network = ipaddress.ip_network(client)
    except ValueError:  # an address client_key could not read, kept as it was
        return (client,)
    return (*(str(network.supernet(new_prefix=prefix)) for prefix in IPV6_GROUPS), client)


class _Turns:
    """One level of the fair hold: its members that have requests held (``waiting``: a member's own level, or at the
    last level the client's held requests, in arrival order), taken in the order of turns: the fewest requests in
    flight first (``counts``, shared by every level), of those tied the one let in longest ago.

    Why a heap (breakfair, 2026-12-07): ``min`` over the waiting addresses cost 1.3 ms of the proxy's one event loop at
    each admission with 10,000 addresses held (5.4 ms with 40,000: at most 185 requests a second let in, whatever the
    replicas take); now O(log n). An entry is current while its member waits with that place and that many in flight
    (``_turns``); the others are dropped as they come up."""

    def __init__(self, counts: collections.Counter):
        self.counts = counts
        self.waiting: dict = {}
        self._heap: list[tuple[int, int, str]] = []
        self._turns: dict[str, int] = {}  # member -> its place in the order of turns (a tie goes to the lower)
        self._places = itertools.count()

    def __len__(self) -> int:
        return len(self.waiting)

    def take_place(self, member: str) -> None:
        """The member's place in the order of turns: after every member waiting now."""
        self._turns[member] = next(self._places)
        self.push(member)

    def push(self, member: str) -> None:
        """The member's rank, anew (its count changed)."""
        heapq.heappush(self._heap, (self.counts[member], self._turns[member], member))
        if len(self._heap) > 2 * len(self.waiting) + 64:  # entries no longer current: dropped, in O(n) once in n
            self._heap = [(self.counts[name], self._turns[name], name) for name in self.waiting]
            heapq.heapify(self._heap)

    def drop(self, member: str) -> None:
        del self.waiting[member]
        del self._turns[member]

    def next_member(self) -> str:
        """The waiting member with the fewest in flight (ties: the earliest place); some member waits."""
        while True:
            count, place, member = self._heap[0]
            if self._turns.get(member) == place and self.counts[member] == count:
                return member
            heapq.heappop(self._heap)  # not current: the member left the hold, was let in, or changed its count


class FairAdmission:
    """The requests the HTTP proxy hands on to Ray at once (``limit``: as many as the replicas take, serve's
    AOTCUDA_SERVE_REQUESTS_IN_FLIGHT), the others held here and let in by client address: when one ends, the next
    comes from the waiting address with the fewest requests in flight (of those tied, the one let in longest ago),
    first come first served within an address. An IPv6 client (its /64, ``client_key``) is chosen so within its /56,
    and that within its /48 (``client_groups``): first the /48 with the fewest in flight, then within it the /56, then
    the /64.

    Why (breakserve3, 2026-12-07): Ray's proxy queues every request it reads, first come first served, whoever sent
    it, with no bound; 200 connections of one client each looping a POST /predict held another client's single
    request 37.7 s in the queue (0.06 s alone) on a one-replica serve, and past --request-timeout-s it would have
    got 408. Held here, a flood queues behind its own requests: another address waits for at most one request of
    each address ahead of it. One address is one client: behind a balancer that does not keep the client's address,
    every request is one client's, and the order is first come first served, as before. A request held longer than
    ``timeout_s`` (serve's hold, within --request-timeout-s) gets 503 BusyError with Retry-After (nothing of it ran),
    rather than waiting for good. Why the groups (fixlist, 2026-12-07): a provider delegates a /56 (256 /64s) or a
    /48 (65,536) to one customer, who passed for that many clients; keying by /48 alone would make every customer
    of a provider that puts them in one /48 one client, so the share is split level by level (hierarchical fair
    queueing): a /48 gets one share beside an IPv4 client, its /56s share it, and their /64s share theirs.
    """

    def __init__(self, limit: int):
        self.limit, self.running = limit, 0
        self.in_flight: collections.Counter = collections.Counter()  # client -> its requests let in
        # client -> its held requests' futures, in arrival order (an OrderedDict: one given up leaves in O(1))
        self.waiting: dict[str, collections.OrderedDict] = {}
        self._counts: collections.Counter = collections.Counter()  # client or group -> requests in flight under it
        self._root = _Turns(self._counts)

    async def enter(self, client: str, timeout_s: float, left: asyncio.Future | None = None) -> None:
        """Return once this client's request may go on (counted in flight until ``leave``); BusyError after
        ``timeout_s`` held; ClientDisconnect once ``left`` (the request's next receive: its client's leaving) is
        done while it is held, so that clients that send and leave cannot pile up held requests."""
        if self.enter_at_once(client):
            return
        turn = asyncio.get_running_loop().create_future()
        queue = self.waiting.get(client)
        if queue is None:
            queue = self.waiting[client] = collections.OrderedDict()
            self._join(client, queue)
        queue[turn] = None
        try:
            await asyncio.wait([turn] if left is None else [turn, left], timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the request's task was cancelled while held (or as it was let in): no turn kept for it
            if turn.done() and not turn.cancelled():
                self.leave(client)
            else:
                self._give_up(client, turn)
            raise
        if turn.done() and not turn.cancelled():  # let in (as the clock ran out, or as the client left): it goes on
            return
        self._give_up(client, turn)
        if left is not None and left.done():
            raise ClientDisconnect()
        raise BusyError(f"the server's replicas are running as many requests as they take ({self.limit}), and this "
                        f"one waited {timeout_s:.3g} s behind other requests (AOTCUDA_SERVE_HOLD_TIMEOUT_S, or what "
                        "was left of --request-timeout-s); nothing of this request ran, send it again after the "
                        "Retry-After seconds")

    def enter_at_once(self, client: str) -> bool:
        """Let this client's request in now, where a slot is free and nobody is held (``enter``'s fast path, without
        a wait); whether it was."""
        if self.running < self.limit and not self.waiting:
            self._let_in(client)
            return True
        return False

    def leave(self, client: str) -> None:
        self.running -= 1
        self.in_flight[client] -= 1
        if self.in_flight[client] <= 0:
            del self.in_flight[client]
        level = self._root
        for member in client_groups(client):
            self._counts[member] -= 1
            if self._counts[member] <= 0:
                del self._counts[member]
            if level is None or member not in level.waiting:  # no level below waits either: counts alone
                level = None
                continue
            level.push(member)  # fewer in flight: its place in the order of turns stays, its rank changes
            level = level.waiting[member]
        self._let_next_in()

    def _let_in(self, client: str) -> None:
        self.running += 1
        self.in_flight[client] += 1
        for member in client_groups(client):
            self._counts[member] += 1

    def _levels(self, client: str) -> list[tuple[_Turns, str]]:
        """(level, member) from the widest group down to the client, for a client that waits."""
        path, level = [], self._root
        for member in client_groups(client):
            path.append((level, member))
            level = level.waiting.get(member)
        return path

    def _join(self, client: str, queue: collections.OrderedDict) -> None:
        """A client with a first held request: it, and each of its groups not waiting yet, takes a place after
        every member waiting now at its level."""
        members = client_groups(client)
        level = self._root
        for depth, member in enumerate(members):
            below = level.waiting.get(member)
            if below is None:
                below = level.waiting[member] = queue if depth == len(members) - 1 else _Turns(self._counts)
                level.take_place(member)
            level = below

    def _leave_levels(self, path: list[tuple[_Turns, str]], let_in: bool) -> None:
        """After a request left a client's queue: each level's member with nothing left waiting leaves it; where
        ``let_in``, one still waiting goes to the end of the order of turns (the next tie goes to another)."""
        for level, member in reversed(path):
            if not level.waiting[member]:
                level.drop(member)
            elif let_in:
                level.take_place(member)
            else:
                return  # nothing changes above a level that still waits

    def _give_up(self, client: str, turn) -> None:
        turn.cancel()
        queue = self.waiting.get(client)
        if queue is not None:
            queue.pop(turn, None)
            if not queue:
                self._leave_levels(self._levels(client), let_in=False)
                del self.waiting[client]
        self._let_next_in()

    def _let_next_in(self) -> None:
        while self.running < self.limit and self.waiting:
            level, path = self._root, []
            while isinstance(level, _Turns):  # the member whose turn it is, level by level
                member = level.next_member()
                path.append((level, member))
                level = level.waiting[member]
            client, queue = path[-1][1], level
            turn, _ = queue.popitem(last=False)
            if turn.done():  # given up (its request is gone): not let in
                self._leave_levels(path, let_in=False)
                if not queue:
                    del self.waiting[client]
                continue
            self._let_in(client)
            self._leave_levels(path, let_in=True)
            if not queue:
                del self.waiting[client]
            turn.set_result(None)


async def _refused(error, scope, receive, send) -> None:
    """The proxy's own answer to a request it refuses, with aotcuda's error header; the connection is closed (the rest
    of the body is unread); a client that may send it again is told when (Retry-After)."""
    headers = {ERROR_HEADER: type(error).__name__, "Connection": "close"}
    if isinstance(error, (BusyError, StoppingError)):
        headers["Retry-After"] = str(RETRY_AFTER_S)
    await PlainTextResponse(str(error), status_code=error.http_status, headers=headers)(scope, receive, send)


def answers_while_stopping(scope, send):
    """``send``, with Ray's 404 for a program route (no aotcuda error header: no replica gave it) replaced by a 503
    with Retry-After and Connection: close: Ray answers so only while the server has no application (stopping or
    starting), and a client must not read it as final. Other routes' answers pass as they are."""
    if route_of(scope.get("path") or "") not in PROGRAM_ROUTES:  # as the replica reads it: /predict/ too
        return send
    replaced = False
    error_header = ERROR_HEADER.lower().encode("latin-1")

    async def sent(message):
        nonlocal replaced
        if message["type"] == "http.response.start" and message.get("status") == 404 and not any(
                name.lower() == error_header for name, _ in message.get("headers") or ()):
            replaced = True
            error = StoppingError(f"the server has no application for {scope.get('path')} now: it is stopping or "
                                  "starting; nothing of this request ran, send it again after the Retry-After seconds")
            await _refused(error, scope, None, send)  # with Retry-After and Connection: close
            return
        if not replaced:  # else Ray's own body of the 404, dropped
            await send(message)

    return sent


def allowed_origins() -> frozenset[str]:
    """AOTCUDA_SERVE_ALLOWED_ORIGINS' origins as web_pages.origin_refusal compares them (no final slash, no default
    port: a browser's Origin names neither). Raises SwitchError naming an entry that is not an origin
    (scheme://host[:port], ``null`` or ``*``): ``app.example`` or ``https://app.example/app`` matched no Origin a
    browser sends, and every request of the page it meant was refused 403."""
    return frozenset(_origin_entry(origin) for origin in switches.names(ALLOWED_ORIGINS_VARIABLE))


def _origin_entry(entry: str) -> str:
    from urllib.parse import urlsplit

    from aotcuda.errors import SwitchError

    origin = entry.rstrip("/")
    if origin in ("*", "null"):
        return origin
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        parts = port = None
    if (parts is None or not parts.scheme or "://" not in origin or not parts.hostname or parts.path or parts.query
            or parts.fragment or "@" in parts.netloc or any(c.isspace() for c in origin)):
        raise SwitchError(f"{ALLOWED_ORIGINS_VARIABLE} holds {entry[:100]!r}, which is not a web page's origin: write "
                          "each as scheme://host[:port] (https://app.example, http://localhost:3000), without a path, "
                          "separated by commas; null for sandboxed frames and file:// pages, * for any")
    if not origin.isascii():  # a browser's Origin names an international domain in its ASCII form (xn--...)
        try:
            ascii_host = parts.hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise SwitchError(f"{ALLOWED_ORIGINS_VARIABLE} holds {entry[:100]!r}, whose host is not a domain name "
                              "a browser can send: write it in its ASCII form (xn--...)") from None
        origin = origin.replace(parts.hostname, ascii_host, 1)
    if port is not None and {"http": 80, "https": 443}.get(parts.scheme) == port:
        origin = origin.rsplit(":", 1)[0]  # a browser leaves the scheme's default port out of Origin
    return origin


def without_ray_controls(headers) -> list:
    """The request's headers without those Ray's proxy takes as per-request controls (RAY_CONTROL_HEADERS, and the
    session id header, RAY_SERVE_SESSION_ID_HEADER_KEY: the replica a request goes to is the router's choice, not
    the client's)."""
    session = os.environ.get("RAY_SERVE_SESSION_ID_HEADER_KEY", "x-session-id").lower().replace("-", "_")
    controls = RAY_CONTROL_HEADERS | {session}
    return [(name, value) for name, value in headers
            if name.decode("latin-1").lower().replace("-", "_") not in controls]


def _unread_answer_bytes() -> int:
    try:  # heads needs uvicorn's h11 protocol; without it no answer is watched, so none is counted
        from aotcuda.serving.heads import unread_answer_bytes
    except ImportError:
        return 0
    return unread_answer_bytes()


WEBSOCKET_REFUSAL = ("this server answers HTTP requests only, not WebSocket: send POST /predict, GET /healthz or "
                     "GET /stats without an Upgrade header")


async def refuse_websocket(scope, receive, send) -> None:
    """Refuse a WebSocket handshake before it is accepted. Passed on, it reached Ray's replica, whose
    ``Request(scope)`` asserts an HTTP scope: 500 without X-Aotcuda-Error and a traceback in the replica's log.
    400 with our header where the server lets an app answer a handshake (ASGI's websocket.http.response, which
    uvicorn's websockets protocol offers), else a close before accepting (uvicorn answers 403)."""
    message = await receive()
    if message["type"] != "websocket.connect":  # the client left already
        return
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await send({"type": "websocket.http.response.start", "status": 400,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (ERROR_HEADER.lower().encode(), b"RequestError")]})
        await send({"type": "websocket.http.response.body", "body": WEBSOCKET_REFUSAL.encode()})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": WEBSOCKET_REFUSAL[:120]})
