"""Each route answers another method with 405 and ``Allow`` (leftovers): ``GET /predict`` (a browser, ``curl URL/predict``
without ``--data-binary``), ``PUT``/``DELETE`` were answered 404 "no route", which says the path is wrong where the
method is. The routes are called as Ray's proxy calls them, without Ray: the method check comes before a route
reads anything of its replica, so a stand-in replica does."""

from __future__ import annotations

import asyncio
import types

import pytest

deployment = pytest.importorskip("aotcuda.serving.deployment", reason="aotcuda[serve] is not installed")

from aotcuda.serving.health import HealthCheck  # noqa: E402


def answer(route, method: str, path: str):
    from starlette.requests import Request

    scope = {"type": "http", "method": method, "path": path, "headers": [], "query_string": b""}
    return asyncio.run(route(Request(scope)))


def replica_route(replica=None):
    """ProgramReplica's own routing (``__call__``), on a stand-in replica that has nothing a 405 or 404 may read."""
    return lambda request: deployment.ProgramReplica.__call__(replica or types.SimpleNamespace(), request)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
@pytest.mark.parametrize("path", ["/predict", "/predict/"])
def test_predict_with_another_method_is_405_allow_post(method, path):
    answered = answer(replica_route(), method, path)
    assert answered.status_code == 405 and answered.headers["allow"] == "POST", (answered.status_code, answered.body)
    body = answered.body.decode()
    assert body == f"{method} /predict: this route takes POST only; POST the inputs as a safetensors body"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_healthz_and_stats_with_another_method_are_405_allow_get(method):
    for route, path in ((replica_route(), "/stats"), (replica_route(), "/healthz"),
                        (HealthCheck("aotcuda", "ProgramReplica"), "/healthz")):
        answered = answer(route, method, path)
        assert answered.status_code == 405 and answered.headers["allow"] == "GET, HEAD", (path, answered.body)
        assert answered.body.decode() == f"{method} {path}: this route takes GET or HEAD only; use GET"


def test_head_is_answered_as_get_on_healthz_and_stats(monkeypatch):
    """RFC 9110 9.1: a general-purpose server takes GET and HEAD; monitors ask ``HEAD /healthz`` (``curl -I``), which
    got 404. The route answers as for GET; the HTTP server sends the head alone."""
    from aotcuda.serving import health

    # Serve's own word, stood in for: the application "aotcuda" runs, and its ProgramReplica's replicas all do
    deployment_status = types.SimpleNamespace(replica_states={"RUNNING": 2})
    app = types.SimpleNamespace(status="ApplicationStatus.RUNNING", deployments={"ProgramReplica": deployment_status})
    monkeypatch.setattr(health.serve, "status", lambda: types.SimpleNamespace(applications={"aotcuda": app}))
    answered = answer(HealthCheck("aotcuda", "ProgramReplica"), "HEAD", "/healthz")
    assert answered.status_code == 200 and answered.body == b"ok"
    stats = {"requests": 3}
    answered = answer(replica_route(types.SimpleNamespace(stats=lambda: stats)), "HEAD", "/stats")
    assert answered.status_code == 200 and answered.body == b'{"requests": 3}'


def test_a_path_that_is_no_route_is_still_404():
    answered = answer(replica_route(), "GET", "/nothing-here")
    assert answered.status_code == 404 and "allow" not in answered.headers
    assert answered.body.decode() == "no route GET /nothing-here: POST /predict, GET /healthz, GET /stats"
