"""Start Ray (or join the cluster in RAY_ADDRESS), deploy a package, serve it over HTTP, shut down.

    with serve_package("block.pt2", replicas=2, port=8000) as server:   # returns once every replica runs
        ...                                                              # POST server.url + "/predict"
    # leaving the block deletes the application and stops the Ray instance this call started

`aotcuda serve` is this with `server.wait()` until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Callable

from aotcuda.errors import Advice, PackageError, ServingConfigError, terminal_clipped
from aotcuda.package_tags import key_file_path, key_file_switch, signing_key
from aotcuda.runtime.archive import ArchiveLimits, open_archive
from aotcuda.runtime.package import package_key_id, pick_model, read_signature
from aotcuda.runtime.package_checks import package_sha256
from aotcuda.runtime.specs import specs_from_signature
from aotcuda.serving.batching import (graph_rows_reason, index_records, serving_plan, state_written_names,
                                      tensor_size_records, training_norm_cause)
from aotcuda.serving.body import LEAST_TIMEOUT_S
from aotcuda.serving.deadline import check_run_timeout, finite_at_least
from aotcuda.serving.cluster_address import check_reachable
from aotcuda.serving.ray_token import use_own_token
from aotcuda.serving.start_failures import StartFailureNotice, StartFailureWatch

__all__ = ["OptionsError", "ServeOptions", "Server", "build_app", "check_package", "check_port_free", "local_ray_init_options",
           "replica_actor_options", "serve_package"]

APP_NAME = "aotcuda"
HEALTH_APP_NAME = "aotcuda-health"  # GET /healthz from a deployment of its own (health.HealthCheck)
HEALTH_DEPLOYMENT_NAME = "HealthCheck"
PROGRAM_DEPLOYMENT_NAME = "ProgramReplica"
# Seconds a starting HTTP proxy has to answer Serve's controller (Ray's default: 5), in a Ray started here.
PROXY_READY_TIMEOUT_S = 60
# Seconds a running HTTP proxy has to answer each of the controller's health checks (Ray's default: 10), in a Ray
# started here. Three misses in a row and the controller kills the proxy and starts another
# (ray/serve/_private/proxy_state.py: ProxyState.try_update_status, ProxyStateManager._stop_proxies_if_needed,
# ActorProxyWrapper.kill): every request in it is dropped, its clients see "Remote end closed connection without
# response", then "Connection refused" until the new one listens. A proxy that is only slow (a busy 2-core
# machine) must not be killed with requests in it. One that died is still replaced as soon as before (its health
# check fails at once, not by timing out); one alive but hung for good, after three checks of 120 s (~6.5 min).
PROXY_HEALTH_CHECK_TIMEOUT_S = 120
# What a Ray started here is told, through the environment its workers (Serve's controller among them) inherit;
# a value the user set wins.
RAY_SERVE_ENVIRONMENT = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": PROXY_READY_TIMEOUT_S,
                         "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": PROXY_HEALTH_CHECK_TIMEOUT_S}
# The address of a local Ray's node: its GCS, raylet, workers and agents listen here (docs/serving.md, "Ports").
RAY_NODE_ADDRESS = "127.0.0.1"


class OptionsError(ValueError):
    """ServeOptions that are wrong or do not fit each other. Its text names each option by its field here;
    ``worded(name)`` names each by ``name(field)`` instead: `aotcuda serve` gives its flags, which were what its user
    wrote (it said "max_pending_bytes (500000) must be at least max_request_bytes" to a new user of
    --max-pending-bytes)."""

    def __init__(self, template: str):
        self.template = template  # the message, with each option written ${field}
        super().__init__(self.worded(str))

    def worded(self, name) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda found: name(found[1]), self.template)

    def __reduce__(self):  # pickle rebuilds an exception from self.args: here, the message alone
        return type(self), (self.template,), self.__dict__


@dataclass(frozen=True)
class ServeOptions:
    """What `aotcuda serve` and `serve_package` take (see ProgramReplica for the per-replica ones).

    Attributes:
        replicas: number of replicas (each loads the package once).
        host, port: where Ray Serve's HTTP proxy listens (default loopback only).
        max_batch_size, batch_wait_ms: request batching (1: off).
        cuda_graphs: capture in CUDA graphs on each GPU replica.
        gpus_per_replica: GPUs Ray reserves per replica of a CUDA package (default 1; 0 for a CPU package).
        cpus_per_replica: CPUs Ray reserves per replica.
        request_timeout_s: Ray Serve's HTTP proxy answers a request that takes longer, from its arrival (its body
            and its wait for a replica included), with 408; a request held for a slot past it less run_timeout_s gets
            503 with Retry-After (hold_timeout_s). A Client's timeout_s must be above it (75 s by default) to read
            those answers.
        max_request_bytes: larger request bodies get 400 (refused by Content-Length before reading).
        max_response_bytes: a request whose outputs would be larger (computed from its inputs' shapes, before the
            program runs) gets 400.
        max_tensor_bytes: a request for which the program would make a larger tensor (an output or an intermediate:
            the signature's "tensor_sizes" at the request's shapes) gets 400 before it runs.
        body_timeout_s: a request body still arriving after this many seconds gets 408 (timed in the HTTP
            proxy, on the client's sending alone, in a Ray that serve_package starts: aotcuda.serving.proxy).
        run_timeout_s: a request whose run (its batch's call) takes longer gets 503, and its replica is replaced:
            Ray Serve ends the replica's process, the only way to stop a call into the program, and starts a new
            one (serving/deadline.py). It must be less than request_timeout_s (the proxy would answer 408 first).
            None: no deadline, and a request whose values make the program run for good (a while_loop's trip
            count) holds its replica for good.
        max_pending_bytes: the bytes of request bodies the HTTP proxy holds at once, over all clients (in a Ray
            that serve_package starts); a body that would pass it gets 503 with Retry-After. None: 1 GiB, or
            max_request_bytes where that is larger.
        dashboard: start Ray's dashboard (on 127.0.0.1:8265) with a local Ray instance; off by default.
        allow_unbounded_outputs: serve a program with an output dim computed from an input's values and no upper
            bound (``n = lengths.max().item()`` without ``torch._check(n <= N)``), which is refused otherwise: any
            client can then make a replica allocate as much memory as its request's values say.
        allow_unchecked_indices: serve a program with an input whose values reach an index that lowering could not
            bound (the signature's ``index_unchecked``; ``aotcuda inspect``: "index values not checked"), which is
            refused otherwise: any client can then end a replica's process (or its CUDA context) with one value.
        signing_key_file: serve the package only if it is signed with the key in this file (package_tags; default:
            the file AOTCUDA_SIGNING_KEY_FILE names where serve runs): checked before Ray starts, and by each replica
            as it loads, which reads the file at this path on its own node (its path, never the key, is what Ray's
            config holds).
    """

    replicas: int = 1
    host: str = "127.0.0.1"
    port: int = 8000
    max_batch_size: int = 1
    batch_wait_ms: float = 5.0
    cuda_graphs: bool = False
    gpus_per_replica: float | None = None
    cpus_per_replica: float = 1.0
    request_timeout_s: float = 60.0
    max_request_bytes: int = 256 << 20
    max_response_bytes: int = 1 << 30
    max_tensor_bytes: int = 1 << 30
    body_timeout_s: float = 30.0
    run_timeout_s: float | None = 30.0
    max_pending_bytes: int | None = None
    dashboard: bool = False
    allow_unbounded_outputs: bool = False
    allow_unchecked_indices: bool = False
    signing_key_file: str | None = None
    extra_actor_options: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("replicas", "max_batch_size", "port", "max_response_bytes", "max_tensor_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise OptionsError(f"${{{name}}} must be a positive integer, got {getattr(self, name)!r}")
        # finite numbers: nan passes every comparison (--request-timeout-s nan served a 408 to every request at once)
        # (and no timeout below 0.1 s: 1e-320 is positive, and answers every request 408)
        for name, least in (("batch_wait_ms", 0.0), ("request_timeout_s", LEAST_TIMEOUT_S),
                            ("body_timeout_s", LEAST_TIMEOUT_S),
                            ("cpus_per_replica", 0.0)):
            if not finite_at_least(getattr(self, name), least):
                raise OptionsError(f"${{{name}}} must be a finite number ≥ {least:g}, got {getattr(self, name)!r}")
        check_run_timeout(self.run_timeout_s)
        if self.run_timeout_s is not None and self.run_timeout_s >= self.request_timeout_s:
            raise OptionsError(f"${{run_timeout_s}} ({self.run_timeout_s:g} s) must be less than ${{request_timeout_s}} "
                               f"({self.request_timeout_s:g} s): Ray Serve's HTTP proxy answers 408 at "
                               "${request_timeout_s}, counted from the request's arrival, so a run that long could "
                               "never be answered; raise ${request_timeout_s} with it")
        # A request alone in its batch waits batch_wait_ms for others, then runs: the two within the proxy's timeout, or
        # a lone request is answered 408 without ever running (--max-batch-size 4 --batch-wait-ms 1e9 took every request
        # that way while the server looked healthy, and --batch-wait-ms 1e300 was taken too)
        batch_wait_s, run_s = self.batch_wait_ms / 1000, self.run_timeout_s or 0.0
        if self.max_batch_size > 1 and batch_wait_s + run_s >= self.request_timeout_s:
            raise OptionsError(f"${{batch_wait_ms}} ({self.batch_wait_ms:g} ms) "
                               f"{f'and ${{run_timeout_s}} ({run_s:g} s) must together' if run_s else 'must'} be less than "
                               f"${{request_timeout_s}} ({self.request_timeout_s:g} s): a request alone in its batch waits "
                               "${batch_wait_ms} for others before it runs, and Ray Serve's HTTP proxy answers 408 at "
                               "${request_timeout_s}, counted from the request's arrival, so it could never be answered; "
                               "lower ${batch_wait_ms} (a few ms is usual)")
        for name in ("max_request_bytes", "max_pending_bytes"):  # handed to the HTTP proxy through its environment,
            value = getattr(self, name)  # whose numbers are finite floats (switches.number)
            if isinstance(value, int) and value > sys.float_info.max:
                raise OptionsError(f"${{{name}}} has {len(str(value))} digits, past what the HTTP proxy's environment "
                                   f"carries ({sys.float_info.max:g}); give a number of bytes below that")
        if self.max_pending_bytes is not None and self.max_pending_bytes < self.max_request_bytes:
            raise OptionsError(f"${{max_pending_bytes}} ({self.max_pending_bytes}) must be at least "
                               f"${{max_request_bytes}} ({self.max_request_bytes}): a body of the largest size must "
                               "fit; raise ${max_pending_bytes} or lower ${max_request_bytes}")


def check_package(package_path: str, options: ServeOptions) -> str:
    """Check, from the package's aotcuda signature alone (nothing extracted or loaded), that the options
    fit it; return the device type it was lowered for. Raises PackageError or ServingConfigError (SigningKeyError
    for a key file that cannot be used)."""
    key_file = replica_key_file(options)
    key = None if key_file is None else signing_key(key_file_path(key_file))
    limits = ArchiveLimits.from_environment()
    # One opening: the signature checked here is the one the key check took, checked against the tag as it is
    # parsed (read from a second opening, a package another process put at the path in between was checked with
    # its unsigned signature: an edited device decided the replicas' GPUs).
    with open_archive(os.path.expanduser(package_path), limits) as archive:  # "~" as read_signature expands it
        pick_model(package_path, archive.namelist())  # none: says what the file is (a torch.save file), as load does
        if key is not None:  # every replica checks it as it loads; refused here before Ray starts
            package_key_id(package_path, key, limits=limits, archive=archive)
        signature = read_signature(package_path, key, archive)
    if not signature:
        raise PackageError(f"{package_path!r} has no aotcuda signature (inputs, outputs, device); serve a "
                           "package written by aotcuda.lower (or lower the model again)")
    specs = dict(zip(("inputs", "outputs"), specs_from_signature(signature, package_path)))  # PackageError if malformed
    _check_as_load_reads_it(signature, package_path)
    ranges, unchecked = index_records(signature, package_path)
    plan = serving_plan(specs["inputs"], specs["outputs"], options.max_batch_size, package_path,
                 allow_unbounded_outputs=options.allow_unbounded_outputs,
                 data_dependent_sizes=signature.get("data_dependent_sizes"), index_ranges=ranges,
                 index_unchecked=unchecked, allow_unchecked_indices=options.allow_unchecked_indices,
                 state_written=signature.get("state_written"),  # refuses batching a program that writes state
                 rows_mixed=signature.get("rows_mixed"),  # or mixes its rows
                 rows_found=graph_rows_reason(signature))
    if options.max_batch_size > 1 and plan.batches and not isinstance(signature.get("rows_mixed"), bool):
        logging.getLogger("aotcuda").warning(unprobed_rows_line(package_path, signature))
    _check_state_on_one_replica(signature.get("state_written"), options, package_path)
    tensor_size_records(signature.get("tensor_sizes"), package_path)  # as the replica reads it
    devices = {spec.device_type for spec in (*specs["inputs"], *specs["outputs"])}
    if len(devices) != 1:
        raise PackageError(f"{package_path!r}: its signature names devices {sorted(devices)}, not one")
    device_type = devices.pop()
    if options.cuda_graphs and device_type != "cuda":
        raise ServingConfigError(f"cuda_graphs=True needs a CUDA package; {package_path} was lowered for "
                                 f"{device_type}. Serve it with cuda_graphs=False, or lower it again with device='cuda'",
                                 advice=(Advice("cuda_graphs", False), Advice("device", "cuda", relower=True)))
    return device_type


def _check_as_load_reads_it(signature: dict, package_path: str) -> None:
    """PackageError for a "complex" field that describes no pair, which load refuses, here before Ray starts
    rather than in every replica as it loads (a breaker's signatures passed this check and failed only once
    serving had started), and "divisors" that are no list of expressions. Index ranges load refuses are refused by
    index_records, which reads them as load does."""
    from aotcuda.runtime.complex_adapter import split_signature
    from aotcuda.runtime.divisors import SizeDivisors

    split_signature(signature, package_path)
    SizeDivisors.from_signature(signature, package_path)


def _check_state_on_one_replica(state, options: ServeOptions, package_path: str) -> None:
    """A program that writes its state at every call (the signature's ``state_written``: a KV cache, a counter)
    answers each request after the ones before, so one replica serves it: each replica would hold its own state
    (answers would depend on the replica a request reached; a new user saw 0.5, 0.5, 1.0, 1.0, ... where eager
    gives 0.5, 1.0, 1.5, ...). Batching it is refused by batching.serving_plan, which ProgramReplica calls too."""
    names = state_written_names(state)
    if names and options.replicas > 1:
        cause = training_norm_cause(state)
        raise ServingConfigError(f"{package_path} writes its state at every call ({names}): each replica would hold "
                                 "its own, and an answer would depend on the replica a request reached; serve it "
                                 "with one replica (the default; --replicas 1)"
                                 + (f". But {cause}: then it serves on many" if cause else ""))


def check_port_free(host: str, port: int) -> None:
    """Raise ServingConfigError, in our words, when something already listens on host:port. Checked by
    binding it as the HTTP proxy will (SO_REUSEADDR, as uvicorn), before Ray starts: a proxy that cannot
    bind fails only inside Ray, with a RayTaskError that names neither the port nor the cause."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ServingConfigError(f"--host {host!r} is not an address of this machine ({error})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ServingConfigError(f"port {port} on {host} is in use; choose another with --port") from None
            raise ServingConfigError(f"cannot listen on {host} port {port}: {error.strerror}") from None


def _start_serve(serve, options: ServeOptions, checked_port: bool) -> None:
    """serve.start on the options' host and port, with the HTTP proxy's failure to bind a port found free by
    ``check_port_free`` (``checked_port``) said in our words: another process took it in the seconds Ray took to
    start (a squatter that binds it as soon as it is free again, or a coincidence). Before (breakproc, 2026-12-07),
    with a listener bound right after the check, serve ended 21 s later with Ray's
    'RayTaskError(RuntimeError) ray::ProxyActor.ready() ... Failed to bind to address', the message the port check
    was made to replace."""
    try:
        serve.start(http_options={"host": options.host, "port": options.port,
                                  "request_timeout_s": options.request_timeout_s})
    except Exception as exc:  # noqa: BLE001 - Ray's RayTaskError carries the proxy's RuntimeError as text
        if "Failed to bind to address" not in str(exc):
            raise
        when = (" was free when serve checked it, but another process started listening there while Ray started"
                if checked_port else " is in use")
        raise ServingConfigError(f"port {options.port} on {options.host}{when}, so Serve's HTTP proxy cannot listen "
                                 "there; nothing is served. Choose another with --port") from None


def _check_cluster_gpus(needed: float) -> None:
    """A replica asking for GPUs the cluster does not have would wait forever: say so instead."""
    import ray

    have = ray.cluster_resources().get("GPU", 0)
    if needed > have:
        raise ServingConfigError(f"the replicas need {needed:g} GPU(s) in all, and the Ray cluster has {have:g}; "
                                 "serve fewer replicas, or run on a cluster with GPUs (this is a CUDA package)")


def unprobed_rows_line(package_path: str, signature: dict) -> str:
    """serve's one line for a package it batches whose rows lowering did not probe (lowering/batch_rows.py)."""
    why = signature.get("rows_not_probed") if "rows_mixed" in signature else "lowered by an aotcuda without the probe"
    return (f"aotcuda: batching {package_path!r} unchecked: whether an output row depends on other rows of the batch "
            f"dim was not probed at lowering ({terminal_clipped(why, 300) if isinstance(why, str) else 'no reason recorded'}); if it may, "
            "serve it with --max-batch-size 1")


def replica_actor_options(package_path: str, options: ServeOptions) -> dict:
    """Ray actor options of one replica (CPUs, and one GPU for a CUDA package unless told otherwise),
    after check_package. Raises what check_package raises."""
    device_type = check_package(package_path, options)
    gpus = options.gpus_per_replica if options.gpus_per_replica is not None else float(device_type == "cuda")
    return {"num_cpus": options.cpus_per_replica, "num_gpus": gpus, **options.extra_actor_options}


def replica_key_file(options: ServeOptions) -> str | None:
    """The absolute path of the signing key file the replicas load with (``options.signing_key_file``, else the
    file AOTCUDA_SIGNING_KEY_FILE names here), or None: serve's own switch, not each replica node's, decides."""
    path = options.signing_key_file if options.signing_key_file is not None else key_file_switch()
    return None if path is None else os.path.abspath(os.path.expanduser(path))


def _bind(path: str, options: ServeOptions, actor_options: dict, package_sha256: str,
          health_deployment: tuple[str, str] | None = None):
    from ray import serve

    from aotcuda.serving.deployment import ProgramReplica
    from aotcuda.serving.health import HEALTH_CHECK_PERIOD_S

    deployment = serve.deployment(ProgramReplica, name=PROGRAM_DEPLOYMENT_NAME, num_replicas=options.replicas,
                                  ray_actor_options=actor_options,
                                  max_ongoing_requests=replica_slots(options.max_batch_size),
                                  health_check_period_s=HEALTH_CHECK_PERIOD_S)
    return deployment.bind(path, cuda_graphs=options.cuda_graphs, max_batch_size=options.max_batch_size,
                           batch_wait_ms=options.batch_wait_ms, max_request_bytes=options.max_request_bytes,
                           max_response_bytes=options.max_response_bytes, max_tensor_bytes=options.max_tensor_bytes,
                           body_timeout_s=options.body_timeout_s, run_timeout_s=options.run_timeout_s,
                           allow_unbounded_outputs=options.allow_unbounded_outputs,
                           allow_unchecked_indices=options.allow_unchecked_indices, package_sha256=package_sha256,
                           health_deployment=health_deployment, signing_key_file=replica_key_file(options))


def _bind_health():
    from ray import serve

    from aotcuda.serving.health import HealthCheck
    from aotcuda.serving.proxy import HEALTH_SLOTS

    deployment = serve.deployment(HealthCheck, name=HEALTH_DEPLOYMENT_NAME, num_replicas=1,
                                  ray_actor_options={"num_cpus": 0}, max_ongoing_requests=HEALTH_SLOTS)
    return deployment.bind(APP_NAME, PROGRAM_DEPLOYMENT_NAME)


def hold_timeout_s(options: ServeOptions) -> float:
    """How long the HTTP proxy holds a request for a replica's slot (AOTCUDA_SERVE_HOLD_TIMEOUT_S): its
    --request-timeout-s less the time its run may take once let in (--run-timeout-s, and --batch-wait-ms when
    batching), or half of it where runs have no deadline.

    Why (fixlist, 2026-12-07): the hold ran as long as --request-timeout-s, so a request held to its end was let
    in with no time left to run (Ray's 408, final: the client cannot tell whether it ran), and its 503 came as late
    as the server's own deadline, where Client's default gave up at the same 60 s with a final "no complete answer"
    and never resent it. Ended here, a held request gets its 503 with half the time left, and one let in at the last
    moment still has its run's time."""
    run_s = options.run_timeout_s
    if not run_s:
        return options.request_timeout_s / 2
    if options.max_batch_size > 1:
        run_s += options.batch_wait_ms / 1000
    return options.request_timeout_s - run_s  # positive: ServeOptions keeps the run within --request-timeout-s


def replica_slots(max_batch_size: int) -> int:
    """The requests one program replica takes at once (Ray Serve's max_ongoing_requests); the HTTP proxy lets in as
    many as all replicas take (proxy.FairAdmission), and holds the others, one client address at a time."""
    return max(8, 2 * max_batch_size)


def build_app(package_path: str, options: ServeOptions = ServeOptions()):
    """The Ray Serve application (a bound deployment) that serves one package with these options, for
    users who run it themselves (serve.run, or a Serve config). Raises what check_package raises."""
    path = os.path.abspath(package_path)
    digest = package_sha256(path)  # before the check: every replica loads these bytes or refuses
    return _bind(path, options, replica_actor_options(path, options), digest)


class StopRequested(BaseException):
    """SIGTERM (or another of STOP_AT_ONCE) arrived while serve_package was starting the application (or before ``Server.wait`` took the
    signal over). A BaseException, as KeyboardInterrupt is: it must reach the caller through ``except
    Exception``. ``signal``: its number."""

    def __init__(self, number: int):
        super().__init__(f"stopped by {signal.Signals(number).name}")
        self.signal = number


# The signals that stop serving at once (no drain: see Server.shutdown): every signal whose default action ends the
# process and which another process or the terminal sends to ask for an end, or a limit sends. Under its default
# action serve ended with no stop and no line, Ray's GCS and raylet went with it, and Ray's dashboard agent and
# runtime-env agent (~220 MB) were left running, orphaned, for about a minute (measured for SIGHUP, SIGUSR1,
# SIGUSR2, SIGQUIT and SIGALRM). SIGHUP is a hang-up: the terminal that ran `aotcuda serve` closed (its whole process
# group, the local Ray's GCS and raylet with it, gets it), or another process sent it (logrotate's postrotate, many
# supervisors). SIGQUIT is Ctrl-\ (to the group too) or a supervisor's stop (nginx's and gunicorn's word for one); its
# default action also writes a core dump, of a driver that only waits here, which is given up: `py-spy dump --pid` or
# `gcore` take one of a serving process without ending it. SIGUSR1 and SIGUSR2 mean nothing to serve (Ray's driver
# takes neither), SIGALRM a timer none of it sets, SIGPWR a power failure (init), SIGXCPU the CPU-time limit
# (RLIMIT_CPU; SIGKILL follows at the hard limit). Left to their own handling, on purpose: SIGPIPE and SIGXFSZ (Python
# ignores them, and a write fails with EPIPE or EFBIG where it can be handled: command._say), SIGPROF and SIGVTALRM
# (profilers' timers), the faults a process's own code raises (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP,
# SIGSYS: a Python handler runs only after the faulting instruction, which repeats; Ray's handler dumps the stack),
# and SIGIO, SIGSTKFLT and the real-time signals, which libraries use on purpose (glibc reserves the first ones).
STOP_AT_ONCE = tuple(getattr(signal, name) for name in
                     ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPWR", "SIGXCPU")
                     if hasattr(signal, name))


def _stop_on_sigterm(held: list[int] | None = None) -> None:
    """From here on SIGTERM, SIGHUP and the others of STOP_AT_ONCE raise StopRequested in the main thread. ray.init installs a
    fatal-signal handler in this (driver) process that dumps a stack and aborts on SIGTERM: an orchestrator that
    stopped a server which had just answered its readiness probe got exit -6 and no "stopped" line (a new user's
    report). Each signal is also appended to ``held``, for the caller to look at once the call it interrupted has
    returned: a StopRequested raised where Python ignores exceptions (a callback of os.register_at_fork, a __del__)
    is printed as "Exception ignored" and lost."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(number, _frame):
        if held is not None:
            held.append(number)
        raise StopRequested(number)

    _taken_over(STOP_AT_ONCE, stop)


def _taken_over(signals, handler) -> dict:
    """Install ``handler`` for each of ``signals`` but those ignored now, which stay ignored (set to SIG_IGN again,
    under whatever Ray's C++ put beneath Python's table); return the handlers before, for signal.signal to put back.

    Why: a signal ignored when serve starts was ignored on purpose by whoever started it, and its children inherit
    that: nohup (SIGHUP, so that serving outlives the terminal), ``trap '' HUP``, a shell's ``&`` without job control
    (SIGINT and SIGQUIT: a Ctrl-C at the terminal is for the job in front). Taken over, ``nohup aotcuda serve`` stopped
    when its terminal hung up ("stopped (SIGHUP)", breaker-serving), as a program that honours nohup never does
    (Python itself keeps an ignored SIGINT ignored; C programs test ``signal(SIGHUP, SIG_IGN) != SIG_IGN`` first)."""
    previous = {}
    for number in signals:
        ignored = signal.getsignal(number) is signal.SIG_IGN
        previous[number] = signal.signal(number, signal.SIG_IGN if ignored else handler)
    return previous


@contextlib.contextmanager
def _stops_held_through_ray_init():
    """While ray.init runs: the signals of STOP_AT_ONCE are recorded in the list yielded (the caller stops Serve and
    Ray once ray.init has returned: StopRequested), and Ray's own SIGTERM handler is not installed.

    Why: ray.init sets a SIGTERM handler that raises SystemExit wherever the main thread is
    (ray/_private/worker.py: ``sigterm_handler``, ``sys.exit(signum)``), until _stop_on_sigterm replaces it after
    ray.init. A SIGTERM 8 s into `aotcuda serve` (ray.init running) raised it inside logging's lock release, where
    Python prints "Exception ignored" and goes on: serve started and served as if no SIGTERM had come; 10 s in it ended
    serve with exit 15, no "stopped" line and no ray.shutdown, and Ray's dashboard and runtime-env agents were left
    running, orphaned (breaker-serving). The other signals of STOP_AT_ONCE took their default action there (the end,
    with Ray half started). Only the main thread may set handlers: elsewhere, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    held: list[int] = []
    previous = _taken_over(STOP_AT_ONCE, lambda number, _frame: held.append(number))
    try:
        from ray._private import utils as ray_utils
    except ImportError:  # another Ray: its handler stays, as before
        ray_utils = None
    rays_own = getattr(ray_utils, "set_sigterm_handler", None)
    if rays_own is not None:
        ray_utils.set_sigterm_handler = lambda _handler: None
    try:
        yield held
    except BaseException:
        for number, handler in previous.items():  # nothing runs: the caller's handlers back (_stop_on_sigterm's else)
            signal.signal(number, handler)
        raise
    finally:
        if rays_own is not None:
            ray_utils.set_sigterm_handler = rays_own


class Server:
    """A running application: ``url``, ``wait()`` (until Ctrl-C or a signal of STOP_AT_ONCE), ``shutdown()``."""

    def __init__(self, url: str, started_ray: bool, package: tuple[str, str] | None = None,
                 stops: list[int] | None = None):
        self.url, self._started_ray, self._stopped = url, started_ray, False
        self._package = package  # (path, SHA-256) of the package served: what a replica that fails to start is told
        # the signals of STOP_AT_ONCE that came since ray.init (serve_package's handlers append them): one whose
        # StopRequested was lost where Python ignores exceptions still stops wait() at once
        self._stops = stops if stops is not None else []

    def wait(self, say_start_failure: Callable[[str, str], None] | None = None) -> int:
        """Block until SIGINT or a signal of STOP_AT_ONCE, then shut down (STOP_AT_ONCE: at once, see ``shutdown``); return the
        signal's number. Meanwhile, with ``say_start_failure``, hand it (message, hint) once for each spell of
        replicas that fail to start (start_failures.py: Serve starts them again and again, and says why only in its
        log and to /healthz)."""
        stop, received = threading.Event(), []
        if say_start_failure is not None:
            self._watch_start_failures(say_start_failure, stop)

        def on_signal(number, _frame):
            received.append(number)
            stop.set()

        previous = _taken_over((signal.SIGINT, *STOP_AT_ONCE), on_signal)  # those ignored at start stay ignored
        if self._stops:  # asked before wait() took the signals over, and its StopRequested lost
            on_signal(self._stops[0], None)
        try:
            while not stop.wait(0.5):
                pass
        finally:
            stop.set()  # the watch of start failures too, whatever ended the loop
            # The handlers stay through the shutdown. A Ctrl-C in a terminal reaches the whole process group:
            # Ray's GCS and raylet end with it, and Ray's driver then interrupts the main thread
            # (_thread.interrupt_main) while Serve is being stopped; with the default handler back, that
            # was a KeyboardInterrupt ("Aborted!", exit 1, found by a new user); with ours it is recorded.
            try:
                self.shutdown(drain=not received or received[0] not in STOP_AT_ONCE)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return received[0]

    def _watch_start_failures(self, say: Callable[[str, str], None], stop: threading.Event) -> None:
        """Look at the program's replicas until ``stop`` is set, in a thread (start_failures.StartFailureWatch)."""
        if self._package is None:  # a Server of a start that failed: nothing is served
            return
        from aotcuda.serving.health import look

        def look_at_the_replicas() -> tuple[bool, str]:
            seen = look(APP_NAME, PROGRAM_DEPLOYMENT_NAME)
            return seen.ready, seen.failure

        watch = StartFailureWatch(StartFailureNotice(*self._package), look_at_the_replicas, say)
        threading.Thread(target=watch.run, args=(stop,), name="aotcuda-start-failures", daemon=True).start()

    def shutdown(self, drain: bool = True) -> None:
        """Stop serving (idempotent). On a Ray instance this process started: delete the applications
        (Serve's graceful stop of each replica: requests in flight finish), then stop Ray, which ends Serve's
        controller and proxy with it. On a cluster it joined: delete only its applications, leaving the
        cluster's others. (Not serve.shutdown(): it kills the controller while its own graceful_shutdown
        task is pending, and the raylet prints "Task ServeController.graceful_shutdown failed" on a clean stop.)

        ``drain=False`` (SIGTERM) skips the graceful stop on a Ray instance this process started, and stops
        Ray at once, which ends Serve's actors with it. Why: that instance's GCS and raylet run in this
        process's group, so a SIGTERM sent to the group (``timeout``, ``kill -- -PGID``, systemd) ends them
        too, and Serve's graceful shutdown then waits 30 s for a controller that is gone ("Controller failed
        to shut down within 30.0s"); a stop asked by SIGTERM wants no wait anyway.
        """
        if self._stopped:
            return
        self._stopped = True
        import ray
        from ray import serve
        from ray.serve.exceptions import RayServeException

        with _ray_logs_quieted():  # Serve's "Deleting app" lines
            try:
                if drain or not self._started_ray:
                    for name in (HEALTH_APP_NAME, APP_NAME):
                        try:
                            serve.delete(name)
                        except RayServeException:  # no Serve instance: start-up failed before serve.start
                            break
            finally:
                if self._started_ray:
                    ray.shutdown()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()


def local_ray_init_options(options: ServeOptions, joining: bool = False) -> dict:
    """The ray.init options of the Ray instance serve_package starts (``joining``: it joins RAY_ADDRESS).

    A local instance puts its node on loopback whatever ``options.host`` says: nothing joins it, so its
    GCS, raylet, workers and agents listen on 127.0.0.1 only, and only the HTTP proxy listens on the host
    asked for. No dashboard unless ``options.dashboard``; enough CPUs for every replica even on a small
    machine (they mostly wait)."""
    init = {"include_dashboard": options.dashboard, "logging_level": "WARNING", "log_to_driver": False}
    if not joining:
        init["_node_ip_address"] = RAY_NODE_ADDRESS
        init["num_cpus"] = max(os.cpu_count() or 1, int(options.replicas * options.cpus_per_replica + 0.999))
    return init


def private_ray_folder() -> str:
    """A new folder of this user's alone (0700) for the files of the Ray instance serve_package starts: its
    sessions' sockets, logs and runtime resources.

    Why: Ray's default is /tmp/ray, a name anyone can make first, and Ray makes it and every folder of a session
    writable by all (``try_make_directory_shared``: chmod 0777, not sticky) so that users can share it. Measured
    (review 12): during an ``aotcuda serve``, uid 65534 moved the live session's ``sockets`` folder (the object
    store's socket, which every new worker connects to and reads pickled objects from) away and made its own; the
    replica Ray started after one died never answered. Ray opens the folder it is given to all as well, so it gets
    ``ray`` inside a 0700 folder, which nobody else can pass through. Kept after the server stops, as Ray keeps
    /tmp/ray (the replicas' logs are there: ``ray/session_latest/logs/serve``)."""
    where = os.environ.get("RAY_TMPDIR") or None
    _check_private_enough(where or tempfile.gettempdir())
    try:
        return os.path.join(tempfile.mkdtemp(prefix="aotcuda_ray_", dir=where), "ray")
    except OSError as exc:
        raise ServingConfigError(f"cannot make a folder for Ray's files in {where or tempfile.gettempdir()!r} "
                                 f"({exc.strerror or exc}); point RAY_TMPDIR (or TMPDIR) to a folder you can write") from None


def _check_private_enough(where: str) -> None:
    """ServingConfigError where another user could rename the 0700 folder made in ``where`` away and put their own at
    its path (a folder others may write into that is not sticky, or one owned by another user): Ray, which is given
    that path, would then make its session, sockets included, in their folder. Measured (the breaker, 2026-12-06):
    with RAY_TMPDIR a 0777 folder, uid 65534 moved the folder serve had made and made a 0777 one at its path.
    AOTCUDA_TRUST_SHARED_FOLDERS=1 takes it, as for extraction."""
    from aotcuda.shared_folders import temporary_folder_problem

    problem = temporary_folder_problem(where)
    if problem:
        raise ServingConfigError(f"will not keep Ray's files in {where!r}: it {problem}, so another user could "
                                 "replace the folder Ray's sockets are made in; nothing was started. Point RAY_TMPDIR "
                                 "(or TMPDIR) to a folder of your own (e.g. mkdir -m 700 ~/ray-tmp), or, where only "
                                 "users you trust can write there, set AOTCUDA_TRUST_SHARED_FOLDERS=1")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _loopback_node_kept():
    """Ray 2.60's ray.init replaces a loopback ``_node_ip_address`` with this machine's outward address
    (ray/_private/worker.py: ``services.resolve_ip_for_localhost``), and the servers of a node that is not
    on 127.0.0.1 listen on every interface (the C++ gRPC servers of the GCS, raylet and workers bind
    127.0.0.1 only when the node address is "127.0.0.1", else 0.0.0.0; the agents and metrics servers
    follow the node address too). Ray keeps the loopback address only when its multi-node clusters are
    off (``ray_constants.ENABLE_RAY_CLUSTER``, from RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER when ray is
    imported; services.get_node_ip_address). A local instance is no cluster: turn them off while ray.init
    runs, then restore. Ray's other readers of the flag are ``ray start``'s checks; serve_package checks
    the address Ray kept afterwards, so a Ray that changes this fails loudly instead of listening widely."""
    from ray._private import ray_constants

    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):  # another Ray: the check after ray.init judges it
        yield
        return
    saved, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


# Ray's loggers in this (driver) process kept to what a user needs from serve_package and Server.shutdown: the
# levels while they run (a level the user set higher stays). ray.serve: its INFO lines ("Started Serve", "Application
# ... is ready", "Deleting app", and "Connecting to existing Serve app ... New http_options ... will not be applied",
# said on the instance serve_package just started, which reads as if the port were ignored); its warnings still
# show. The token-authentication notice ("Set RAY_AUTH_MODE=disabled to opt out", from ray.init): token
# authentication is what keeps each replica's gRPC port closed (docs/serving.md, "Ports"), so the one thing it
# offers is the one thing not to do.
QUIETED_RAY_LOGGERS = {"ray.serve": "WARNING", "ray._private.authentication.authentication_token_setup": "ERROR"}


@contextlib.contextmanager
def _ray_logs_quieted():
    """QUIETED_RAY_LOGGERS at their levels while the block runs, then as they were. Importing ray.serve sets its
    logger to INFO, so a block must not be the first to import it (serve_package and shutdown import it before)."""
    import logging

    loggers = [(logging.getLogger(name), logging.getLevelName(level)) for name, level in QUIETED_RAY_LOGGERS.items()]
    saved = [(logger, logger.level) for logger, _ in loggers]
    for logger, level in loggers:
        logger.setLevel(max(level, logger.level))
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _ray_init_said(ray, init: dict) -> None:
    """ray.init(**init), with Ray's refusal of a socket path too long for a Unix socket told with its fix (the
    breaker's RAY_TMPDIR of about 90 characters ended serve with Ray's `OSError: validate_socket_filename failed:
    AF_UNIX path length cannot exceed 107 bytes: ...` alone). A Unix socket path holds 108 bytes with its NUL on
    Linux (104 on macOS); Ray 2.60's lie `session_<date>_<pid>/sockets/plasma_store` deep in its files' folder."""
    try:
        ray.init(**init)
    except OSError as exc:
        if "AF_UNIX path length" not in str(exc):
            raise
        with contextlib.suppress(Exception):  # whatever of Ray had started
            ray.shutdown()
        folder = init.get("_temp_dir") or os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
        raise ServingConfigError(f"Ray could not start: its files' folder {folder!r} is {len(folder)} characters, and "
                                 "Ray's session and socket names add about 64 more, past the 107 a Unix socket path "
                                 f"may hold ({exc}); nothing was started. Point RAY_TMPDIR (or TMPDIR) to a short "
                                 "folder of your own, of 18 characters or fewer (serve adds aotcuda_ray_XXXXXXXX/ray "
                                 "to it): e.g. mkdir -m 700 ~/rt && export RAY_TMPDIR=~/rt") from None


def _init_ray(init: dict, overrides: dict | None) -> None:
    """ray.init with ``init`` updated by the caller's ``overrides``; a loopback node address stays loopback
    (else ServingConfigError, with Ray stopped)."""
    import ray

    init = {**init, **(overrides or {})}
    asked = init.get("_node_ip_address")
    if not asked or not _is_loopback(asked):
        _ray_init_said(ray, init)
        return
    with _loopback_node_kept():
        _ray_init_said(ray, init)
    got = ray.util.get_node_ip_address()
    if not _is_loopback(got):
        ray.shutdown()
        raise ServingConfigError(f"Ray {ray.__version__} put its node on {got}, not {asked}: its GCS, raylet and "
                                 "workers would listen there. aotcuda keeps a local Ray on loopback with a "
                                 "workaround this Ray version does not honour (docs/serving.md, 'Ports')")


def serve_package(package_path: str, options: ServeOptions = ServeOptions(), *,
                  ray_init_options: dict | None = None) -> Server:
    """Serve a package; return once every replica has loaded it.

    Joins the Ray cluster named by RAY_ADDRESS when it is set, else starts a local Ray instance sized to
    hold every replica. Raises PackageError for a package without a readable signature, and what the
    replicas raise (e.g. ServingConfigError) when they fail to start.
    """
    try:
        import ray
        from ray import serve  # before _ray_logs_quieted: importing it sets its logger to INFO

        from aotcuda.serving.proxy import CALLBACK_VARIABLE, proxy_environment  # needs starlette (Ray Serve's)
    except ModuleNotFoundError as error:
        # a missing module (an ImportError too): pytest.importorskip skips on it; any other ImportError (an
        # install that is there but broken) propagates as it is
        raise ModuleNotFoundError("aotcuda serve needs Ray Serve: pip install 'aotcuda[serve]' (from a clone: "
                                  "pip install -e '.[serve]')", name=error.name) from error

    with _ray_logs_quieted():
        path = os.path.abspath(package_path)
        # Every replica loads these bytes or refuses (the path may be given another file while replicas start, or
        # when one is replaced): read before the check, so that a file changed from then on, during the check too,
        # is refused by every replica.
        digest = package_sha256(path)
        actor_options = replica_actor_options(path, options)  # before Ray starts: a bad package fails at once
        started_ray = not ray.is_initialized()
        held: list[int] = []  # the stops asked while ray.init ran
        if started_ray and not os.environ.get("RAY_ADDRESS"):
            check_port_free(options.host, options.port)  # a Ray this process starts: nothing else serves here
        elif started_ray:
            check_reachable(os.environ["RAY_ADDRESS"])  # ray.init retried a cluster nothing answers at for minutes
        if started_ray:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray would report usage to its vendor
            # Serve's controller gives a starting HTTP proxy 5 s to answer, then kills it, and serve.start
            # fails with "ActorDiedError ... killed by ray.kill" (seen on the 2-core CI machine under load); it
            # gives a running one 10 s per health check, and killed it after three misses while it held requests
            # (issue 26 item 13). The workers of a Ray started here inherit this process's environment, the
            # controller's included.
            for name, value in RAY_SERVE_ENVIRONMENT.items():
                os.environ.setdefault(name, str(value))
            # The HTTP proxy reads each request's body from the client, within these options' limits (proxy.py).
            # A proxy callback the user set wins (theirs may return proxy.middlewares() among its own); the limits
            # are this call's.
            for name, value in proxy_environment(options.body_timeout_s, options.max_request_bytes,
                                                 options.max_pending_bytes,
                                                 options.replicas * replica_slots(options.max_batch_size),
                                                 hold_timeout_s(options),
                                                 request_timeout_s=options.request_timeout_s).items():
                if name == CALLBACK_VARIABLE:
                    os.environ.setdefault(name, value)
                else:
                    os.environ[name] = value
            joining = bool(os.environ.get("RAY_ADDRESS"))
            init = local_ray_init_options(options, joining=joining)
            ours = None
            if not joining and "_temp_dir" not in (ray_init_options or {}):
                init["_temp_dir"] = private_ray_folder()
                ours = os.path.dirname(init["_temp_dir"])
            if not joining and not (ray_init_options or {}).get("address"):  # a new local instance: a token of its
                use_own_token(ours)  # own, not ~/.ray/auth_token, which other local users may read (ray_token.py)
            with _stops_held_through_ray_init() as held:
                _init_ray(init, ray_init_options)
        try:
            _stop_on_sigterm(held)  # after ray.init; Server.wait takes the signals over later
            if held:  # asked while Ray started: Ray is up, so it is stopped now, at once
                raise StopRequested(held[0])
            _check_cluster_gpus(options.replicas * actor_options["num_gpus"])
            _start_serve(serve, options, checked_port=started_ray and not os.environ.get("RAY_ADDRESS"))
            # Both applications in one deployment, not one serve.run after the other: the program's is mounted at
            # "/", so its replicas answer /healthz and /predict as soon as they run, and a second serve.run kept this
            # call from returning for as long as the health check's replica took to start (~3 s on 2 cores), so
            # `aotcuda serve` printed its "serving" line after requests had been answered.
            # The replicas tell the health check's deployment of a run past the deadline (health.HealthWord).
            program = _bind(path, options, actor_options, digest, (HEALTH_APP_NAME, HEALTH_DEPLOYMENT_NAME))
            serve.run_many([serve.RunTarget(program, name=APP_NAME, route_prefix="/"),
                            serve.RunTarget(_bind_health(), name=HEALTH_APP_NAME, route_prefix="/healthz")])
            if held:  # its StopRequested was raised where Python ignores exceptions (_stop_on_sigterm)
                raise StopRequested(held[0])
        except BaseException as error:
            Server("", started_ray).shutdown(drain=not isinstance(error, StopRequested))
            raise
        return Server(f"http://{options.host}:{options.port}", started_ray, (path, digest), stops=held)
