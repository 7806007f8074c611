"""aotcuda.serving end to end on a local Ray instance (loopback only): correctness under concurrency,
batching, bad requests, and a replica killed under load. Bounded: every request has a timeout, and the
module serves a few hundred requests in all."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from serving_cases import (BATCH_MAX, SEQ, answered, get, loopback_ray, raw_request, ray_stack_listeners, relative_error,
                           replica_stats, server_environment, status_of)

serving = pytest.importorskip("aotcuda.serving")
safetensors_torch = pytest.importorskip("safetensors.torch")

PORT = 18765  # 187xx: the serving tests' ports on a shared machine
# a POST /predict's head as a client sends it: a Host the loopback proxy takes, the content type it takes (proxy.py)
POST_HEAD = "POST /predict HTTP/1.1\nHost: localhost\nContent-Type: application/octet-stream\n"
TOLERANCE = 1e-5  # float32; a batch's rows may go through other matmul kernels than one row's
BODY_TIMEOUT_S, MAX_BODY = 3.0, 1 << 20  # the largest good request here: 17 x 16 x 256 float32, 278 KiB
SLOTS = 2 * 16  # replicas x max_ongoing_requests (max(8, 2 x max batch size))


@pytest.fixture(scope="module")
def server(served_block):
    path, model = served_block
    options = serving.ServeOptions(replicas=2, port=PORT, max_batch_size=8, batch_wait_ms=20,
                                   body_timeout_s=BODY_TIMEOUT_S, max_request_bytes=MAX_BODY)
    with server_environment(), serving.serve_package(path, options, ray_init_options=loopback_ray()) as running:
        yield running, model


def eager(model, x):
    with torch.no_grad():
        return model(x)


def random_input(generator: random.Random) -> torch.Tensor:
    return torch.randn(generator.choice([1, 1, 1, 2]), SEQ, 256)


def test_the_ray_it_started_gives_a_starting_proxy_time_to_answer(server):
    # Ray's 5 s made Serve's controller kill the HTTP proxy on a loaded 2-core machine (serve.start then
    # failed with ActorDiedError). Ray's workers, the controller among them, inherit the setting.
    import ray

    read = ray.remote(num_cpus=0)(lambda: os.environ.get("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"))  # the replicas hold the CPUs
    seen = ray.get(read.remote(), timeout=60)
    assert seen == str(serving.server.PROXY_READY_TIMEOUT_S) and serving.server.PROXY_READY_TIMEOUT_S >= 30


def test_the_ray_it_started_gives_its_proxy_the_body_middleware_with_these_limits(server):
    # Ray's proxy reads the callback and the limits from the environment it inherits (aotcuda.serving.proxy)
    import ray

    from aotcuda.serving import proxy

    names = (proxy.CALLBACK_VARIABLE, proxy.BODY_TIMEOUT_VARIABLE, proxy.MAX_BYTES_VARIABLE, proxy.MAX_PENDING_VARIABLE,
             proxy.MIN_SEND_RATE_VARIABLE, proxy.ALLOWED_HOSTS_VARIABLE, proxy.ALLOWED_ORIGINS_VARIABLE,
             proxy.IN_FLIGHT_VARIABLE, proxy.HOLD_TIMEOUT_VARIABLE, proxy.REQUEST_TIMEOUT_VARIABLE)
    read = ray.remote(num_cpus=0)(lambda: {name: os.environ.get(name) for name in names})
    # the proxy lets in as many requests as the replicas take (SLOTS), held at most --request-timeout-s (60 s) less
    # the run's time (--run-timeout-s 30 s and the 20 ms batch wait), and counts 60 s from each request's arrival
    hold_s = 60.0 - 30.0 - 0.020
    assert ray.get(read.remote(), timeout=60) == proxy.proxy_environment(BODY_TIMEOUT_S, MAX_BODY, None, SLOTS, hold_s,
                                                                         request_timeout_s=60.0)


# A stall Ray's own budget does not survive: three health checks of 10 s, 10 s apart, and the controller kills the
# proxy; the first check of a stall is sent within 10 s of its start, so the kill comes within 60 s.
PROXY_STALL_S = 70


def test_the_ray_it_started_gives_a_running_proxy_time_to_answer_health_checks(server):
    # What Serve's controller reads (ray/serve/_private/constants.py), in a worker of that Ray: Ray's 10 s killed a
    # busy proxy with requests in it (issue 26 item 13; the next test shows it).
    import ray

    read = ray.remote(num_cpus=0)(
        lambda: __import__("ray.serve._private.constants", fromlist=["_"]).PROXY_HEALTH_CHECK_TIMEOUT_S)
    assert ray.get(read.remote(), timeout=60) == serving.server.PROXY_HEALTH_CHECK_TIMEOUT_S >= PROXY_STALL_S + 30


def test_a_proxy_stalled_for_a_minute_is_not_killed_with_requests_in_it(server):
    """Issue 26 item 13: a request after recovery got "Remote end closed connection without response". Serve's
    controller kills its HTTP proxy after three health checks of 10 s go unanswered (a busy 2-core machine) and
    starts another: every request in the old one is dropped without an answer. Here the proxy stops (SIGSTOP)
    for longer than Ray's budget while requests arrive; once it runs again, it is the same proxy and it
    answers every one of them."""
    import psutil

    running, model = server
    proxy = ray_proxy_process()
    later = [torch.randn(1, SEQ, 256) for _ in range(6)]
    client = serving.Client(running.url, retries=0, timeout_s=PROXY_STALL_S + 120)
    proxy.suspend()
    try:
        stalled = time.monotonic()
        with ThreadPoolExecutor(len(later)) as pool:
            futures = [pool.submit(client.predict, {"x": x}) for x in later]  # wait in the listening socket's queue
            time.sleep(max(0.0, PROXY_STALL_S - (time.monotonic() - stalled)))
            assert proxy.is_running(), "the stalled proxy was killed"
            proxy.resume()
            outputs = [future.result(timeout=180) for future in futures]
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            proxy.resume()
    for x, (y,) in zip(later, outputs):
        assert relative_error(y, eager(model, x)) < TOLERANCE
    assert ray_proxy_process().pid == proxy.pid
    assert get(f"{running.url}/healthz") == (200, b"ok")  # a 503 shows the replica states it saw


def ray_proxy_process():
    """The process of Serve's HTTP proxy in the Ray this test session started (one node: one proxy)."""
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, IndexError):
            if process.cmdline()[0].startswith("ray::ProxyActor"):
                found.append(process)
    assert len(found) == 1, found
    return found[0]


# Serve's replicas listen on every interface for inter-deployment gRPC: Ray 2.60 binds it to "[::]:0" with no
# setting (ray/serve/_private/replica.py, Replica._on_initialized), one per replica (docs/serving.md, "Ports").
REPLICA_PREFIX, REPLICA_PROCESSES = "ray::ServeReplica:", 3  # 2 ProgramReplica + 1 HealthCheck


def test_every_socket_of_the_served_stack_listens_on_loopback_but_the_replicas_inter_deployment_grpc(server):
    import ray

    assert ray.util.get_node_ip_address() == serving.server.RAY_NODE_ADDRESS == "127.0.0.1"
    listeners = ray_stack_listeners()
    # An actor's process title names the method it is running at that moment ("ray::ServeController.
    # listen_for_change"): the component is the title before that.
    processes = {listener.process.split(" ")[0].split(".")[0] if listener.process.startswith("ray::")
                 else listener.process.split(" ")[0] for listener in listeners}
    for component in ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::ServeController",
                      "ray::ProxyActor"):
        assert component in processes, f"{component} not found among {sorted(processes)}: the listing misses it"
    assert any(listener.port == PORT and listener.address == "127.0.0.1" for listener in listeners)
    off_loopback = [listener for listener in listeners if not listener.on_loopback]
    replicas = {listener.pid for listener in listeners if listener.process.startswith(REPLICA_PREFIX)}
    assert len(replicas) == REPLICA_PROCESSES, sorted(processes)
    unknown = [listener for listener in off_loopback
               if not (listener.process.startswith(REPLICA_PREFIX) and listener.address in ("::", "0.0.0.0"))]
    assert not unknown, f"listening off loopback: {unknown}"
    assert sorted(listener.pid for listener in off_loopback) == sorted(replicas), off_loopback  # one each, no more


def test_the_replicas_grpc_port_refuses_a_caller_without_the_cluster_token(server):
    """What keeps the one socket Ray 2.60 opens on every interface closed: Ray's token authentication (on by
    default for a local ray.init). An attacker who reaches the port and calls the replica's ASGI service
    without the token is refused."""
    grpc = pytest.importorskip("grpc")
    ports = [listener.port for listener in ray_stack_listeners()
             if listener.process.startswith(REPLICA_PREFIX) and not listener.on_loopback]
    assert ports
    for port in ports:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/ray.serve.ASGIService/HandleRequest")
            with pytest.raises(grpc.RpcError) as refused:
                call(b"", timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, (port, refused.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "192.0.2.7"])
def test_a_local_ray_puts_its_node_on_loopback_whatever_host_the_proxy_listens_on(host):
    options = serving.ServeOptions(host=host)
    init = serving.server.local_ray_init_options(options)
    assert init["_node_ip_address"] == "127.0.0.1" and init["include_dashboard"] is False
    assert serving.server.local_ray_init_options(serving.ServeOptions(dashboard=True))["include_dashboard"] is True
    assert "_node_ip_address" not in serving.server.local_ray_init_options(options, joining=True)

def test_concurrent_requests_match_eager_and_are_batched(server):
    running, model = server
    before = replica_stats(running.url)
    client = serving.Client(running.url, retries=0, timeout_s=60)
    rng = random.Random(1)
    inputs = [random_input(rng) for _ in range(200)]
    with ThreadPoolExecutor(16) as pool:
        outputs = list(pool.map(lambda x: client.predict({"x": x}), inputs))
    for x, (y,) in zip(inputs, outputs):
        assert y.shape == x.shape and y.dtype == torch.float32
        assert relative_error(y, eager(model, x)) < TOLERANCE
    after = replica_stats(running.url)
    assert len(after) == 2, f"expected two replicas to answer /stats, got {sorted(after)}"
    requests = sum(s["batched_requests"] for s in after.values()) - sum(s["batched_requests"] for s in before.values())
    batches = sum(s["batches"] for s in after.values()) - sum(s["batches"] for s in before.values())
    assert requests == 200
    assert batches < requests, f"{requests} requests ran as {batches} batches: nothing was coalesced"
    assert max(s["largest_batch"] for s in after.values()) > 1
    assert all(s["device"] == "cpu" and s["batching"] == "batch" for s in after.values())  # the Dim's name


@pytest.mark.parametrize("kind", ["not safetensors", "missing input", "unknown input", "wrong dtype",
                                  "wrong rank", "static dim", "batch above the exported max"])
def test_a_bad_request_gets_400_with_the_reason_and_the_next_one_is_right(server, kind):
    running, model = server
    x = torch.randn(1, SEQ, 256)
    body = {
        "not safetensors": b"\x00not a file",
        "missing input": safetensors_torch.save({"y": x}),
        "unknown input": safetensors_torch.save({"x": x, "extra": x.clone()}),
        "wrong dtype": safetensors_torch.save({"x": x.double()}),
        "wrong rank": safetensors_torch.save({"x": x[0]}),
        "static dim": safetensors_torch.save({"x": torch.randn(1, SEQ + 1, 256)}),
        "batch above the exported max": safetensors_torch.save({"x": torch.randn(BATCH_MAX + 1, SEQ, 256)}),
    }[kind]
    client = serving.Client(running.url, retries=0)
    with pytest.raises(serving.ServingError) as caught:
        client.post(body)
    expected = {"not safetensors": "not a safetensors file", "missing input": "missing input.*'x'",
                "unknown input": "unknown input.*'extra'", "wrong dtype": "dtype torch.float64",
                "wrong rank": "has 2 dims", "static dim": "dim 1 is 17",
                "batch above the exported max": "outside the exported range"}[kind]
    assert caught.value.status == 400 and not caught.value.retriable
    assert __import__("re").search(expected, caught.value.message), caught.value.message
    good = torch.randn(2, SEQ, 256)
    (y,) = client.predict({"x": good})
    assert relative_error(y, eager(model, good)) < TOLERANCE


def test_health_and_unknown_routes(server):
    running, _ = server
    assert get(f"{running.url}/healthz") == (200, b"ok")
    status, body = get(f"{running.url}/nothing-here")
    assert status == 404 and b"POST /predict" in body
    # another method on a route: 405 with Allow, through Ray's proxy (leftovers: GET /predict was a 404)
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(f"{running.url}/predict", method="GET"), timeout=10)
    assert refused.value.code == 405 and refused.value.headers["Allow"] == "POST"
    assert refused.value.read() == b"GET /predict: this route takes POST only; POST the inputs as a safetensors body"
    with urllib.request.urlopen(urllib.request.Request(f"{running.url}/healthz", method="HEAD"), timeout=10) as head:
        assert head.status == 200 and head.read() == b""  # GET's answer without its body (was 404)


def test_a_request_head_over_16_kib_is_refused_by_the_proxy(server):
    """Ray's proxy took httptools (http="auto"), which bounds no request head: a 1 MiB header was read and the
    request answered (a 120 MiB one grew the proxy by 120 MiB and held its CPU 46 s). Now h11 refuses it."""
    running, _ = server
    attacker = raw_request(PORT, "GET /healthz HTTP/1.1\nHost: x\nX-Big: " + "a" * (1 << 20))
    status, answer = status_of(attacker, 30)
    attacker.close()
    assert status in (400, None), answer[:300]
    assert get(f"{running.url}/healthz") == (200, b"ok")


def test_bodies_that_never_arrive_neither_stall_health_checks_nor_hold_the_replicas(server):
    """More connections than the replicas have slots send their headers and then nothing. /healthz answers
    at once, each attacker gets 408 after the body timeout (not the proxy's 60 s), and a good request is
    answered once their slots are free."""
    running, model = server
    attackers = [raw_request(PORT, POST_HEAD + "Content-Length: 1000") for _ in range(SLOTS + 4)]
    try:
        time.sleep(1.0)  # every attacker now holds a slot, or waits for one in the proxy
        started = time.monotonic()
        assert get(f"{running.url}/healthz", timeout=5)[0] == 200
        assert time.monotonic() - started < 5
        x = torch.randn(1, SEQ, 256)
        (y,) = serving.Client(running.url, retries=0, timeout_s=BODY_TIMEOUT_S * 4 + 20).predict({"x": x})
        assert relative_error(y, eager(model, x)) < TOLERANCE
        assert time.monotonic() - started < BODY_TIMEOUT_S * 4 + 20
        statuses = [status_of(attacker, timeout=BODY_TIMEOUT_S * 4 + 20) for attacker in attackers]
        assert all(status == 408 and b"did not arrive" in answer for status, answer in statuses), statuses[:3]
    finally:
        for attacker in attackers:
            attacker.close()


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(server):
    attacker = raw_request(PORT, POST_HEAD + f"Content-Length: {256 << 20}")
    with attacker:
        status, answer = status_of(attacker, timeout=10)  # the body never comes: only its length was read
    assert status == 400 and b"declares 268435456 bytes, more than this server's limit" in answer, answer[:300]


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(server):
    """No Content-Length: the body streams in 64 KiB chunks (32 MiB/s at most) until the server answers, which
    it does with a few MiB sent (socket buffers, the answer's way back), not after reading all 128 MiB."""
    chunk = b"%x\r\n%s\r\n" % (1 << 16, b"\0" * (1 << 16))
    attacker = raw_request(PORT, POST_HEAD + "Transfer-Encoding: chunked")
    sent = 0
    with attacker:
        try:
            while sent < 128 << 20 and not answered(attacker):
                attacker.sendall(chunk)
                sent += 1 << 16
                time.sleep(0.002)
        except OSError:  # the server closed its side after answering
            pass
        status, answer = status_of(attacker, timeout=10)
    assert status == 400 and b"more than this server's limit" in answer, answer[:300]
    assert sent < 32 << 20, f"{sent >> 20} MiB sent before the answer"


def test_a_replica_killed_under_load_loses_no_request_silently_and_comes_back(server):
    """Kill one replica's process mid-load: every request either succeeds with the right answer or gets an
    error that says the replica may have died on it (none hangs: each has a timeout), and is not resent, even
    by a retrying client (a request a replica died on may kill the next one); Ray Serve starts a new
    replica, and every later request succeeds."""
    running, model = server
    pids = {stats["pid"] for stats in replica_stats(running.url).values()}
    assert len(pids) == 2
    victim = min(pids)
    plain = serving.Client(running.url, retries=0, timeout_s=60)
    retrying = serving.Client(running.url, retries=5, timeout_s=60, backoff_s=1.0)
    rng = random.Random(2)
    inputs = [random_input(rng) for _ in range(120)]

    def call(index: int):
        client = plain if index % 2 else retrying
        try:
            return client.predict({"x": inputs[index]})
        except serving.ServingError as error:
            return error

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(call, i) for i in range(len(inputs))]
        time.sleep(0.5)
        os.kill(victim, signal.SIGKILL)
        results = [future.result(timeout=180) for future in futures]
    failures = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    assert len(failures) <= 16, f"more requests failed than the victim can hold (max_ongoing_requests 16): {failures}"
    for index, result in enumerate(results):
        if isinstance(result, Exception):
            assert not result.retriable and ("may have died" in str(result) or "not resent" in str(result)), \
                f"request {index}: {result}"
        else:
            assert relative_error(result[0], eager(model, inputs[index])) < TOLERANCE
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        now = {stats["pid"] for stats in replica_stats(running.url, tries=20, wait_s=5).values()}
        if len(now) == 2 and victim not in now and get(f"{running.url}/healthz")[0] == 200:
            break
        time.sleep(1)
    else:
        pytest.fail(f"no second replica within 90 s of the kill (replicas answering: {now}); failures: {failures}")
    later = [torch.randn(1, SEQ, 256) for _ in range(30)]
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda x: plain.predict({"x": x}), later))
    for x, (y,) in zip(later, outputs):
        assert relative_error(y, eager(model, x)) < TOLERANCE
