"""What the serving tests share: the served block's sizes, loopback Ray options, HTTP and error helpers."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import torch

BATCH_MAX, SEQ = 16, 16


def loopback_ray() -> dict:
    """ray.init options for tests: loopback only, small object store."""
    return {"_node_ip_address": "127.0.0.1", "object_store_memory": 128 << 20}


@contextlib.contextmanager
def server_environment():
    """The environment a server process starts with. Ray's workers inherit the driver's environment at
    ray.init, and earlier tests in this process load unsigned packages, which turns on AOTI's own input
    checks process-wide (AOTI_RUNTIME_CHECK_INPUTS=1). Those checks take a Dim(min=1) batch dim as >= 2
    (torch's 0/1 specialization) and refuse batch 1, which aotcuda's own checks accept and eager runs
    (the serving tests found this; docs/serving.md). A server is a fresh process: start it like one."""
    saved = os.environ.pop("AOTI_RUNTIME_CHECK_INPUTS", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = saved


async def posted(replica, body: bytes):
    """A replica's answer to POST /predict with ``body``, as Ray's HTTP proxy hands it on (the body read by the proxy,
    aotcuda.serving.proxy's mark in the scope): the route called without Ray."""
    from starlette.requests import Request

    from aotcuda.serving.proxy import BODY_READ

    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": [], "query_string": b"", BODY_READ: True}
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return await replica._predict(Request(scope, receive))


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def replica_stats(url: str, replicas: int = 2, tries: int = 60, wait_s: float = 30.0) -> dict[str, dict]:
    """Each replica's /stats, by replica id: requests go to a replica the proxy's router picks, so ask until
    all have answered. ``tries`` quick requests first; then, for up to ``wait_s`` seconds, one every 0.25 s:
    Ray Serve reports a deployment ready when all its replicas run, but the proxy learns of a new replica
    a little later (asynchronously), which under a loaded machine (another test compiling beside this
    one) was longer than 60 quick requests. Returns what answered (fewer than ``replicas`` after the wait)."""
    seen = {}
    deadline = None
    for attempt in itertools.count(1):
        status, body = get(f"{url}/stats")
        if status == 200:
            stats = json.loads(body)
            seen[stats["replica"]] = stats
        if len(seen) >= replicas:
            break
        if attempt >= tries:
            deadline = deadline or time.monotonic() + wait_s
            if time.monotonic() >= deadline:
                break
            time.sleep(0.25)
    return seen


def raw_request(port: int, head: str) -> socket.socket:
    """A connection to 127.0.0.1:port that has sent ``head`` (request line and headers, CRLF-joined) and
    nothing more: what an attacker holds open."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n")
    return connection


def status_of(connection: socket.socket, timeout: float) -> tuple[int | None, bytes]:
    """The status code and the answer (headers and body) on ``connection`` (None: no answer in time)."""
    connection.settimeout(timeout)
    answer = b""
    try:
        while True:
            piece = connection.recv(65536)
            answer += piece
            head, _, body = answer.partition(b"\r\n\r\n")
            length = [line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
            if not piece or (length and len(body) >= int(length[0])):
                break
    except (TimeoutError, OSError):
        pass
    return (int(answer.split()[1]) if answer.startswith(b"HTTP/") else None), answer


def answered(connection: socket.socket) -> bool:
    return bool(select.select([connection], [], [], 0)[0])


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket of the served stack: which process (its title, e.g. "gcs_server",
    "ray::ServeReplica:aotcuda:ProgramReplica"), pid, address and port."""

    process: str
    pid: int
    address: str
    port: int

    @property
    def on_loopback(self) -> bool:
        import ipaddress

        address = ipaddress.ip_address(self.address)
        return address.is_loopback or bool(getattr(address, "ipv4_mapped", None) and address.ipv4_mapped.is_loopback)


def ray_stack_listeners() -> list[Listener]:
    """Every listening TCP socket of this driver and of the processes of the Ray instance it started: the
    GCS, raylet, monitor, dashboard, agents, and every worker (Serve's controller, proxy and replicas
    included), found as the driver's descendants."""
    import psutil

    driver = psutil.Process()
    found = []
    for process in [driver, *driver.children(recursive=True)]:
        try:
            command = process.cmdline()
            title = os.path.basename(command[0]) if command and not command[0].startswith("ray::") else command[0]
            if title.startswith("python") and len(command) > 1:  # the Python processes Ray starts: their script
                script = next((part for part in command[1:] if part.endswith(".py")), command[1])
                title = "/".join(script.split("/")[-2:])
            sockets = process.net_connections("tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied, IndexError):
            continue
        found += [Listener(title, process.pid, s.laddr.ip, s.laddr.port) for s in sockets if s.status == psutil.CONN_LISTEN]
    return found


class LengthsToMask(torch.nn.Module):
    """The padding mask of a batch of sequence lengths: its width is the largest length, a size read from the
    input's values (an unbacked u0 in the signature), at most ``bound`` where one is given (torch._check)."""

    def __init__(self, bound: int | None = None):
        super().__init__()
        self.bound = bound

    def forward(self, lengths):
        n = lengths.max().item()
        torch._check(n >= 1)
        if self.bound is not None:
            torch._check(n <= self.bound)
        return torch.arange(n, device=lengths.device)[None, :] < lengths[:, None]


class LastOfARange(torch.nn.Module):
    """Breaker, review 8: a tensor sized by an input's value (``arange(n)``, n = lengths.max()) that no output
    shows: the output is (1,), so the outputs' dims alone did not say what a request's values make it allocate."""

    def forward(self, lengths):
        n = lengths.max().item()
        torch._check(n >= 1)
        ramp = torch.arange(n, device=lengths.device).flip(0)
        return ramp[-1:].sum().reshape(1) + lengths.sum()


class RowsOfTheBatch(torch.nn.Module):
    """Breaker: ``x[ids]`` with x and ids both [batch, ...]: ids index x's batch dim, so their range is [-batch,
    batch - 1], which over a batch of requests is the batch's rows (one client's ids=[0] read another's row)."""

    def forward(self, x, ids):
        return x[ids] * 1.0


class EmbedAndGather(torch.nn.Module):
    """Indices that stay within a request: token ids into a fixed table ([0, 15]) and positions gathered along the
    sequence dim ([0, t - 1]): neither range mentions the batch symbol, so requests batch."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16, 4)

    def forward(self, ids, pos, x):
        return self.table(ids) * 2 + x.gather(1, pos).unsqueeze(-1)


class PositionsFromAMask(torch.nn.Module):
    """Breaker: HF-style position ids from an attention mask (``mask.cumsum(-1) - 1``) into a position embedding:
    lowering cannot bound mask's values there (index_unchecked), and mask=1000 ended the replica's process."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(256, 8), torch.nn.Embedding(32, 8)

    def forward(self, ids, mask):
        return self.tok(ids) + self.pos(mask.cumsum(-1) - 1)


class ClampedPositionsFromAMask(PositionsFromAMask):
    """The same positions clamped into the table's rows: ``(mask.cumsum(-1) - 1).clamp(0, 31)`` is in range whatever
    the mask holds, so lowering leaves nothing unchecked (lowering/index_ranges.py ``_bounded``) and it serves.
    Its weights come from a fixed seed, so that a test can build eager's twin of a lowered one."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        for table in (self.tok, self.pos):
            table.weight.data = torch.randn(table.weight.shape, generator=generator)

    def forward(self, ids, mask):
        return self.tok(ids) + self.pos((mask.cumsum(-1) - 1).clamp(0, 31))


class OuterProduct(torch.nn.Module):
    """Breaker, review 10: an output that grows with the square of an input's size (no max on it): a 128 KiB
    request of x (2, 16384) was answered with 2 GiB."""

    def forward(self, x):
        return x[:, :, None] * x[:, None, :]


class GramAttention(torch.nn.Module):
    """Breaker, review 10: an intermediate that grows faster than the answer: x [n, 8] -> [n, n] scores -> [n, 8];
    a 1 MiB request of x (32768, 8) made a 4 GiB tensor (8.4 GiB peak, 36 s), though n has a max (2**20)."""

    def forward(self, x):
        return (x @ x.T).softmax(-1) @ x


class SumOfRows(torch.nn.Module):
    """Breaker, review 10: an output as long as an input's dim 1, whose dim 0 may be 0: x (0, 2**28) is an empty
    tensor of 112 bytes of request, and its answer 1 GiB."""

    def forward(self, x):
        return x.sum(0) + 1


class RepeatedHalving(torch.nn.Module):
    """Breaker: a run as long as a request's value says. y = y / 2 + 1, n times, in a while_loop whose trip count is
    the input n: every size is small, and n = 2**62 never ends (a replica held it for good, and every request
    routed to that replica waited behind it)."""

    def forward(self, x, n):
        from torch._higher_order_ops import while_loop

        def more(i, y):
            return i < n

        def halve(i, y):
            return i + 1, y * 0.5 + 1.0

        return while_loop(more, halve, (torch.zeros((), dtype=torch.int64), x))[1]


def what_serve_hands_ray_init(shown: str, port: int) -> str:
    """A child script that runs serve_package(argv[1], ServeOptions(port=port), ray_init_options=json argv[2]) up to
    ray.init, which it does not call: it prints json.dumps(<shown>) of ``init`` (serve's options for ray.init) and
    ``overrides`` (the caller's) instead."""
    return f"""
import json, os, sys
from aotcuda.serving import server

class Started(Exception):
    pass

def init_ray(init, overrides):  # what serve_package hands ray.init, without starting it
    print(json.dumps({shown}))
    raise Started

server._init_ray = init_ray
try:
    server.serve_package(sys.argv[1], server.ServeOptions(port={port}), ray_init_options=json.loads(sys.argv[2]))
except Started:
    pass
"""


# `aotcuda serve ARGS` as `python -m aotcuda serve ARGS` runs it, but with ray.init replaced by an exit that says it was
# reached: a refusal that must come before Ray starts is read from what the command did, not from how long it took
# (a child importing torch took 24 s of wall-clock time for 2 s of CPU on the loaded 2-core machine CI runs on).
RAY_INIT_REACHED = "the command reached ray.init"
_SERVE_WITHOUT_RAY = f"""
import sys
import ray

def reached(*args, **kwargs):
    sys.exit({RAY_INIT_REACHED!r})

ray.init = reached
from aotcuda.cli import main
main(prog_name="aotcuda")
"""


def serve_without_ray(*arguments: str, **run_options) -> subprocess.CompletedProcess:
    """The finished ``aotcuda serve *arguments`` (text, stdout and stderr captured), ray.init refused as above."""
    return subprocess.run([sys.executable, "-c", _SERVE_WITHOUT_RAY, "serve", *arguments], capture_output=True,
                          text=True, **run_options)
