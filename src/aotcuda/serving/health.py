"""GET /healthz: Ray Serve's replica states, and the word of each replica whose run is past run_timeout_s.

Why the replicas' own word: Serve's controller changes a replica's state only once the replica has failed its health
check REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD times in a row (3: a constant in Ray 2.60, with no setting;
ray/serve/_private/deployment_state.py, DeploymentReplica.check_health), one check every HEALTH_CHECK_PERIOD_S give
or take Ray's 10 % jitter. A replica whose run passed its deadline knows it at once (its waiting requests get 503
within deadline.POLL_S), yet serve.status() read it RUNNING, and /healthz answered 200, for two to three periods more
(up to ~6.6 s). So a ProgramReplica tells the HealthCheck deployment (HealthWord) as soon as it answers a request 503
for such a run, and again at each of Serve's checks while the run goes on; HealthCheck answers 503 while such a word
is fresh, and Serve's states otherwise.
"""

from __future__ import annotations

import asyncio
import time
from typing import NamedTuple

from ray import serve
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from aotcuda.serving.body import shown, without_server_paths

__all__ = ["HEALTH_CHECK_PERIOD_S", "OVERRUN_WORD_S", "WORD_WAIT_S", "HealthCheck", "HealthWord", "Look",
           "ROUTES", "health_answer", "look", "no_route", "replica_name", "wrong_method"]

# Seconds between Ray Serve's health checks of a replica (Ray's default: 10). Serve replaces a replica after 3
# failed checks in a row, and a run past run_timeout_s fails them (serving/deadline.py): so such a run is ended,
# with its process, about 3 periods after its deadline, plus Serve's graceful stop of the replica.
HEALTH_CHECK_PERIOD_S = 2.0
# Seconds a replica's word that its run is past the deadline counts. The replica says it again at each of Serve's
# checks while the run goes on, and says when the run has ended; but a replica that Serve ended says nothing more,
# and its word must not outlive it for long. It outlives it by less than this: by its third failed check Serve reads
# the replica stopping, and its successor starting until it runs.
OVERRUN_WORD_S = 3 * HEALTH_CHECK_PERIOD_S
# Seconds a replica's 503 for a run past the deadline waits for HealthCheck to take its word (ProgramReplica): a round
# trip between two deployments, milliseconds; bounded, since an answer must not wait on another deployment's troubles.
WORD_WAIT_S = 1.0


def replica_name(context) -> str:
    """The Serve replica's id, as /stats and the health words name it."""
    return getattr(context, "replica_tag", None) or str(getattr(context, "replica_id", ""))


class HealthCheck:
    """GET /healthz for one ProgramReplica deployment, from a deployment of its own (no CPU reserved, many
    slots): a health check never queues behind /predict requests, not even behind clients that hold every
    replica slot with bodies that never arrive. Its replicas tell it of a run past the deadline (report_overrun)."""

    def __init__(self, app_name: str, deployment_name: str):
        self.app_name, self.deployment_name = app_name, deployment_name
        # replica → time.monotonic() of its latest word that its run is past the deadline
        self._overrun_words: dict[str, float] = {}
        self._looks = SharedLook()  # one look at Serve for many checks

    async def __call__(self, request: Request) -> Response:
        refused = wrong_method(request.method, "/healthz")  # mounted at /healthz: every path here is that route
        if refused is not None:
            return refused
        return await health_answer(self.app_name, self.deployment_name, self.overrunning(), self._looks)

    def report_overrun(self, replica: str, overrun: bool) -> None:
        """A replica's word (HealthWord): its run is past the deadline now, or it has ended."""
        if overrun:
            self._overrun_words[replica] = time.monotonic()
        else:
            self._overrun_words.pop(replica, None)

    def overrunning(self) -> list[str]:
        """The replicas whose latest word, at most OVERRUN_WORD_S old, is a run past the deadline."""
        now = time.monotonic()
        self._overrun_words = {replica: said for replica, said in self._overrun_words.items()
                               if now - said <= OVERRUN_WORD_S}
        return sorted(self._overrun_words)


class HealthWord:
    """How a ProgramReplica tells the HealthCheck deployment ``deployment_name`` of application ``app_name`` that its
    run is past the deadline, or no longer: a call through a Serve handle. Best effort: where it cannot be sent (no
    such deployment), /healthz still has Serve's states, a few seconds later."""

    def __init__(self, app_name: str, deployment_name: str):
        self.app_name, self.deployment_name = app_name, deployment_name
        self._to: tuple | None = None  # (the handle, this replica's name): connect
        self._said_overrun = False

    def connect(self) -> None:
        """Make the handle ahead of the first word (at each of Serve's checks until it is made: ``tell``), so that the
        word at a deadline waits neither for Serve's controller nor for the handle's first routing: made at the first
        word, it reached HealthCheck after /healthz had answered 200 once more. Until the HealthCheck deployment
        exists (serve_package deploys both at once), each try fails and the next check tries again."""
        if self._to is not None:
            return
        try:
            handle = serve.get_deployment_handle(self.deployment_name, self.app_name)
            replica = replica_name(serve.get_replica_context())
            handle.report_overrun.remote(replica, False)  # starts the handle's routing; says nothing new
        except Exception:  # not deployed yet, or Serve shutting down
            return
        self._to = (handle, replica)

    def tell(self, overrun: bool):
        """Say ``overrun`` (a run past the deadline now, or not): each time while it is so, since each word counts
        OVERRUN_WORD_S, and once when it stops (nothing said while nothing changes). Returns the call's
        DeploymentResponse, to await for HealthCheck to have taken the word, or None when nothing was sent."""
        self.connect()
        if self._to is None:  # no HealthCheck deployment (yet): Serve's states will say it, later
            return None
        if not overrun and not self._said_overrun:
            return None
        self._said_overrun = overrun
        handle, replica = self._to
        try:
            return handle.report_overrun.remote(replica, overrun)
        except Exception:  # Serve shutting down
            return None


# The routes, each with the methods it takes (the deployment module's docstring says what each answers). HEAD is
# GET without the body (the HTTP server drops it): RFC 9110 9.1, every general-purpose server takes GET and HEAD,
# and monitors ask `HEAD /healthz` (`curl -I`), which got 404, then 405.
ROUTES = {"/predict": ("POST",), "/healthz": ("GET", "HEAD"), "/stats": ("GET", "HEAD")}


def no_route(method: str, path: str) -> Response:
    return PlainTextResponse(f"no route {method} {shown(path, 100)}: POST /predict, GET /healthz, GET /stats",
                             status_code=404)


def wrong_method(method: str, path: str) -> Response | None:
    """405 with ``Allow`` for a route asked with a method it does not take; None for a method it takes or a path
    that is no route. Why: ``GET /predict`` (a browser, ``curl URL/predict`` without ``--data-binary``) was
    answered 404 "no route", which says the path is wrong where the method is (RFC 9110: 405, with Allow)."""
    allowed = ROUTES.get(path)
    if allowed is None or method in allowed:
        return None
    how = "POST the inputs as a safetensors body" if allowed[0] == "POST" else f"use {allowed[0]}"
    return PlainTextResponse(f"{shown(method, 20)} {path}: this route takes {' or '.join(allowed)} only; {how}",
                             status_code=405, headers={"Allow": ", ".join(allowed)})


# How long one look at Serve answers every health check (SharedLook): a balancer's probe comes every few seconds.
LOOK_FRESH_S = 0.5


class SharedLook:
    """Serve's word on a deployment (``look``) for concurrent health checks: one look at a time, shared by the checks
    that wait for it, and reused for LOOK_FRESH_S after it began. Why (breakserve3, 2026-12-07): each GET /healthz
    asked Serve's controller (serve.status(), blocking, in the event loop's few threads), so 200 connections of one
    client looping GET /healthz got 28 answers a second and held a balancer's own check 3-15 s, past any probe's
    timeout. A replica's word that its run is past the deadline is not Serve's and is read at each check."""

    def __init__(self):
        self.taken: tuple[float, Look] | None = None  # (when the look began, what it saw)
        self.pending: asyncio.Future | None = None

    async def __call__(self, app_name: str, deployment_name: str) -> Look:
        if self.taken is not None and time.monotonic() - self.taken[0] < LOOK_FRESH_S:
            return self.taken[1]
        loop = asyncio.get_running_loop()
        if self.pending is None or self.pending.get_loop() is not loop:
            began = time.monotonic()
            # serve.status() asks the controller and blocks: off the event loop
            pending = self.pending = loop.run_in_executor(None, look, app_name, deployment_name)

            def taken(future, began=began):
                if self.pending is future:
                    self.pending = None
                if not future.cancelled() and future.exception() is None:
                    self.taken = (began, future.result())

            pending.add_done_callback(taken)
        return await asyncio.shield(self.pending)


async def health_answer(app_name: str, deployment_name: str, overrunning: list[str],
                        looks: SharedLook | None = None) -> Response:
    """503 naming the replicas whose run is past the deadline (``overrunning``), if any; else Serve's states, from
    ``looks`` (a route's SharedLook; None: a look of its own)."""
    if overrunning:
        return PlainTextResponse(f"not ready: replicas {overrunning} ran past run_timeout_s and are being replaced",
                                 status_code=503)
    return _states_answer(await (looks or SharedLook())(app_name, deployment_name))


def _states_answer(seen: Look) -> Response:
    """200 once every replica of that deployment runs; 503 with the replica states otherwise."""
    if seen.ready:
        return PlainTextResponse("ok")
    # the failure as any client may read it: without the server's paths (the package's, in a refusal of it), as a
    # replica's own answers; `aotcuda serve` says it whole on its stderr (start_failures.py)
    return PlainTextResponse(f"not ready: application {seen.status}, replicas {seen.states}"
                             + (f"; a replica failed to start: {shown(without_server_paths(seen.failure), 400)}"
                                if seen.failure else ""), status_code=503)


class Look(NamedTuple):
    """What Serve says of one deployment: its application's status ("missing" where there is none), the replica
    states, whether every replica runs, and why its latest replica failed to start ("" for none)."""

    status: object  # Serve's ApplicationStatus, shown as Serve formats it
    states: dict
    ready: bool
    failure: str


def look(app_name: str, deployment_name: str) -> Look:
    """Serve's word on the deployment now (serve.status(): asks the controller, and blocks); for /healthz, and for
    `aotcuda serve`'s own look at the replicas (start_failures.py)."""
    status = serve.status().applications.get(app_name)
    deployment = status.deployments.get(deployment_name) if status else None
    states = dict(deployment.replica_states) if deployment else {}
    ready = status is not None and str(status.status).endswith("RUNNING") and set(states) <= {"RUNNING"}
    return Look(status.status if status else "missing", states, ready, _start_failure(deployment))


def _start_failure(deployment) -> str:
    """Why Serve's latest replica of the deployment failed to start, from the deployment's status message (Serve
    ends it with the constructor's traceback, whose last line is the exception: aotcuda's PackageError, say); "" for
    none. Why: a replica that refused the package at the path (replaced after serve checked it) was started
    again and again, and /healthz said only "UNHEALTHY ... STARTING": the reason was in Ray's controller log alone,
    inside serve's private Ray folder (a new user's trial)."""
    message = str(getattr(deployment, "message", "") or "")
    if "failed to start" not in message:
        return ""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if len(lines) > 1 else ""
