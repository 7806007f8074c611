"""The Ray Serve deployment: one loaded Program per replica, HTTP routes, request batching.

Routes (the deployment is the application's HTTP ingress, mounted at ``/``):
  POST /predict   body: safetensors of the inputs by name → 200 with safetensors of ``output_<i>``;
                  400 with the reason as text for a bad request (not safetensors, missing input, wrong
                  dtype or shape, a value outside an index's range: the runtime's own InputError message);
                  408 for a body that trickles; 500 when the program fails; 503 when a body the proxy had
                  read did not reach the replica (RAY_BODY_DELAY_S), when the request's run passed
                  run_timeout_s (RunTimeoutError), or, with Retry-After, when the request waited behind such a
                  run and never ran (BusyError; serving/deadline.py). Each carries the header
                  X-Aotcuda-Error (the error's class): a 5xx without it comes from Ray's proxy (e.g. the
                  request's replica died on it: not safe to resend, see client).
  GET  /healthz   200 "ok" once every replica of the deployment runs (Ray Serve's own replica states),
                  503 with the states otherwise, or as soon as a replica says its run is past run_timeout_s.
                  `aotcuda serve` answers it from a deployment of its own (health.HealthCheck), so that it never
                  waits behind /predict requests; the replicas tell it of such runs (health.HealthWord).
  GET  /stats     this replica's counters as JSON (requests, batches, rows, largest batch, rejected),
                  its Serve replica id, pid, device, the physical GPU ids Ray gave it, and the batch dim's
                  name when it batches (docs/serving.md lists every field).
  HEAD on /healthz and /stats answers as GET, without the body. Another method on one of these paths gets 405
  with ``Allow`` (health.ROUTES); any other path 404.

Each request's inputs are checked on their own, before batching, with the runtime's checks
(``aotcuda.runtime.checks.check_inputs``): a bad request gets its own 400 and never joins a batch. A batch
that fails as a whole (the container reports an error) is run again request by request, so that one
request's failure stays its own.

A body is read within ``body_timeout_s`` and at most ``max_request_bytes`` long (body.read_body): a body
over the limit is refused by its Content-Length before it is read, a chunked one as soon as it passes the
limit, and one that trickles gets 408, so that slow clients cannot hold every replica slot. A Ray that
serve_package starts reads it in its HTTP proxy, from the client (proxy.WholeBody), before a replica is
asked; the replica then waits at most RAY_BODY_DELAY_S for the body's way from the proxy (503 after). Behind a
proxy without that middleware, the replica times the body itself, as the proxy would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
from collections import Counter

import torch

try:
    import ray
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
except ModuleNotFoundError as error:  # pragma: no cover - the error message is the point
    # a missing module (an ImportError too): pytest.importorskip skips on it; any other ImportError (an
    # install that is there but broken) propagates as it is
    raise ModuleNotFoundError("aotcuda.serving needs Ray Serve: pip install 'aotcuda[serve]' (from a clone: "
                              "pip install -e '.[serve]')", name=error.name) from error

from aotcuda.errors import AotcudaError, InputError, terminal_safe
from aotcuda.package_tags import key_file_path
from aotcuda.runtime.bool_bytes import bool_positions, check_bool_bytes
from aotcuda.runtime.checks import check_inputs
from aotcuda.runtime.libraries import remove_pinned_folder
from aotcuda.runtime.program import load
from aotcuda.serving.batching import (combine, graph_rows_reason, index_records, serving_plan, split_rows,
                                      tensor_size_records)
from aotcuda.serving.body import (ERROR_HEADER, BusyError, LateBodyError, RequestError, SlowBodyError, read_body, shown,
                                  without_server_paths)
from aotcuda.serving.codec import (check_answer_bytes, check_answer_size, check_tensor_sizes, decode_inputs,
                                   encode_outputs)
from aotcuda.serving.deadline import RunTimeoutError, RunWatch
from aotcuda.serving.health import (WORD_WAIT_S, HealthWord, SharedLook, health_answer, no_route, replica_name,
                                    wrong_method)
from aotcuda.serving.proxy import read_by_proxy
from aotcuda.serving.web_pages import route_of

__all__ = ["ProgramReplica"]

_CPU = torch.device("cpu")
OCTET_STREAM = "application/octet-stream"
# ERROR_HEADER marks the answers a replica gave itself (400, 408, 500, 503): a 5xx without it came from Ray's
# proxy, e.g. for a request whose replica died on it, which a client must not resend (aotcuda.serving.client).
# Seconds a replica waits for a body that the HTTP proxy has already read whole: the body's way is an actor call
# back to the proxy (Ray's delay: seconds on a busy machine), not the client's sending. With Ray's default
# request_timeout_s (60) the proxy gives up on the request first; this frees the slot if the proxy is stuck.
RAY_BODY_DELAY_S = 60.0
# The most characters of an error's text an answer carries: the runtime's messages are a few hundred.
MAX_ERROR_CHARS = 2000
# Seconds a waiting request is told to wait before sending again (Retry-After) when it never ran because the
# replica is being replaced: Ray routes the resent request to another replica, or to this one's replacement, which
# took 11 s to answer on 2 cores; at 1 s, Client's three retries were spent in 6 s (a breaker's report).
RETRY_AFTER_S = 3


class ProgramReplica:
    """One replica: loads the package once and answers the routes above.

    Args:
        package_path: the .pt2 package; it must be readable at this path on the replica's node.
        device: where to run (default: the package's device type; on a GPU replica, the GPU Ray gave it).
        cuda_graphs: capture the program in CUDA graphs (CUDA packages only).
        max_batch_size: most requests in one batch (1: no batching).
        batch_wait_ms: how long a batch waits for more requests after its first (milliseconds).
        max_request_bytes: larger request bodies are refused with 400.
        max_response_bytes: a request whose outputs, computed from its inputs' shapes, would be larger is refused
            with 400 before the program runs (codec.check_answer_size).
        max_tensor_bytes: a request for which the program would make a larger tensor (an output or an intermediate,
            from the signature's "tensor_sizes" and the request's shapes) is refused with 400 before it runs.
        body_timeout_s: a request body still arriving after this many seconds is refused with 408 (timed here
            only for a request the HTTP proxy did not read: see ``_body``).
        run_timeout_s: a request whose run takes longer gets 503, and the replica is replaced (its process ends,
            which is the only way to stop the run); None: no deadline (serving/deadline.py).
        allow_unbounded_outputs: serve a program with an output dim computed from an input's values and no upper
            bound (batching.serving_plan refuses it otherwise).
        allow_unchecked_indices: serve a program with an input whose values reach an index that lowering could not
            bound (``Program.index_unchecked``; batching.serving_plan refuses it otherwise).
        package_sha256: the SHA-256 of the package serve checked at its start: a replica started later (a second
            one, one that replaces a replica that died, one on another node) refuses a file with other bytes at
            the path, so that every replica serves one model; None: whatever is at the path.
        health_deployment: (application, deployment) of the health.HealthCheck that answers /healthz (serve_package
            deploys one): the replica tells it when its run passes run_timeout_s, so that /healthz answers 503 at
            once rather than after Serve's three failed health checks; None: no such deployment (this replica's own
            /healthz route still says its own run).
        signing_key_file: load the package only if it is signed with the key in this file, read on this replica's
            node (None: the file AOTCUDA_SIGNING_KEY_FILE names in the replica's environment, if any).

    Raises ServingConfigError (see batching.serving_plan) when the options do not fit the program;
    PackageError when the package does not load.
    """

    def __init__(self, package_path: str, *, device: str | None = None, cuda_graphs: bool = False,
                 max_batch_size: int = 1, batch_wait_ms: float = 5.0, max_request_bytes: int = 256 << 20,
                 max_response_bytes: int = 1 << 30, max_tensor_bytes: int = 1 << 30, body_timeout_s: float = 30.0,
                 run_timeout_s: float | None = 30.0, allow_unbounded_outputs: bool = False,
                 allow_unchecked_indices: bool = False, package_sha256: str | None = None,
                 health_deployment: tuple[str, str] | None = None, signing_key_file: str | None = None):
        self.watch = RunWatch(run_timeout_s)
        self.health_word = HealthWord(*health_deployment) if health_deployment else None
        # A request is never a trusted caller: the index-range check stays on whatever AOTCUDA_CHECK_INDEX_RANGES says
        # in the replica's environment (off, one bad token id ended the replica), unless the deployer accepted that
        # with allow_unchecked_indices
        self.program = load(package_path, device=device, cuda_graphs=cuda_graphs, package_sha256=package_sha256,
                            check_index_ranges=None if allow_unchecked_indices else True,
                            signing_key=key_file_path(signing_key_file))
        # the records of the signature the program loaded, not of a second read of the file (another process may
        # have replaced it in between)
        signature = self.program.signature or {}
        ranges, _ = index_records(signature, package_path)
        self.plan = serving_plan(self.program.input_specs, self.program.output_specs, max_batch_size, package_path,
                                 allow_unbounded_outputs=allow_unbounded_outputs,
                                 data_dependent_sizes=signature.get("data_dependent_sizes"), index_ranges=ranges,
                                 index_unchecked=self.program.index_unchecked,
                                 allow_unchecked_indices=allow_unchecked_indices,
                                 state_written=signature.get("state_written"),
                                 rows_mixed=signature.get("rows_mixed"), rows_found=graph_rows_reason(signature))
        self.max_batch_size, self.max_request_bytes, self.body_timeout_s = max_batch_size, max_request_bytes, body_timeout_s
        self.max_response_bytes, self.max_tensor_bytes = max_response_bytes, max_tensor_bytes
        self.tensor_sizes = tensor_size_records(signature.get("tensor_sizes"), package_path,
                                                signature.get("dim_names"))
        self.names = [spec.name for spec in self.program.input_specs] if self.program.input_specs \
            else list(self.program.input_names)
        self.fixed = dict(self.program.constant_inputs)  # arguments fixed at lowering: no part of a request
        self.bools = bool_positions(self.program.input_specs)  # checked here, on the CPU, for a CUDA program too
        self.predict_batch.set_max_batch_size(max_batch_size)
        self.predict_batch.set_batch_wait_timeout_s(batch_wait_ms / 1000)
        self.counters: Counter = Counter()
        self._looks = SharedLook()  # its own /healthz route's looks at Serve (build_app: no HealthCheck deployment)
        # {id(request's inputs): (inputs, slot)} for the requests of the batch under way: Ray's batching drops a
        # request cancelled before its batch starts, but one cancelled after has only this way to its slot
        self._slots: dict[int, tuple[list, concurrent.futures.Future]] = {}
        # One thread runs the program: calls never overlap, and the event loop stays free for requests.
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aotcuda-program")

    # --- routes ------------------------------------------------------------------------------------

    async def __call__(self, request: Request) -> Response:
        path, method = route_of(request.url.path), request.method  # as the proxy's checks read it
        refused = wrong_method(method, path)  # the methods each route takes: health.ROUTES
        if refused is not None:
            return refused
        if path == "/predict":
            return await self._predict(request)
        if path == "/healthz":
            context = serve.get_replica_context()
            overrunning = [replica_name(context)] if self.watch.overrun_s() is not None else []
            return await health_answer(context.app_name, context.deployment, overrunning, self._looks)
        if path == "/stats":
            return Response(json.dumps(self.stats()), media_type="application/json")
        return no_route(method, path)

    async def _predict(self, request: Request) -> Response:
        self.counters["requests"] += 1
        try:
            return await self._answer(request)
        except asyncio.CancelledError:  # the client left, or Ray's proxy timed the request out (a queued job is dropped)
            self.counters["cancelled"] += 1
            raise

    async def _answer(self, request: Request) -> Response:
        try:
            body = await self._body(request)
            inputs = await asyncio.to_thread(self.checked_inputs, body)  # decoding never blocks the event loop
        except (InputError, LateBodyError) as error:
            self.counters["rejected"] += 1
            return _error_response(error, getattr(error, "http_status", 400))
        if self.max_batch_size > 1:
            outputs = await self._in_a_batch(inputs)
        else:
            try:
                outputs = await self._alone(inputs)
            except (RunTimeoutError, BusyError) as error:
                outputs = error
        if isinstance(outputs, (RunTimeoutError, BusyError)):
            self.counters["timed_out" if isinstance(outputs, RunTimeoutError) else "not_run"] += 1
            await self._health_told_of_overrun()
            return _error_response(outputs, 503)
        if isinstance(outputs, InputError):  # the request's values (e.g. a token id out of range): the client's
            self.counters["rejected"] += 1
            return _error_response(outputs, 400)
        if isinstance(outputs, Exception):
            return _error_response(outputs, 500, f"{type(outputs).__name__}: ")
        try:  # what check_answer_size could not bound before the run (a value-sized dim with no max)
            check_answer_bytes(outputs, self.max_response_bytes)
        except RequestError as error:
            self.counters["rejected"] += 1
            return _error_response(error, 400)
        # a 1 GiB answer takes a second to encode: off the event loop, as decoding is
        return Response(await asyncio.to_thread(encode_outputs, outputs), media_type=OCTET_STREAM)

    async def _body(self, request: Request) -> bytes:
        """The request's body: the client's time is bounded by the proxy when it read the body (the mark in
        the scope), else here."""
        if not read_by_proxy(request.scope):
            return await read_body(request, self.max_request_bytes, self.body_timeout_s)
        try:
            return await read_body(request, self.max_request_bytes, RAY_BODY_DELAY_S)
        except SlowBodyError:
            raise LateBodyError(f"the request body, read whole by Ray Serve's HTTP proxy, did not reach the replica "
                                f"within {RAY_BODY_DELAY_S:g} s (Ray's delay, not the client's; the program did not "
                                "run)") from None

    def checked_inputs(self, body: bytes) -> list[torch.Tensor]:
        """One request's flat inputs, decoded and checked against the program's signature (on the CPU:
        the device is the server's business, not the client's), and the sizes of the answer and of the tensors
        its shapes give.
        Raises InputError."""
        inputs = decode_inputs(body, self.names, self.max_request_bytes, self.fixed)
        _, bindings = check_inputs(inputs, self.program.input_specs, self.names, _CPU, self.program.num_inputs)
        check_bool_bytes(inputs, self.bools, self.names)
        check_answer_size(self.program.output_specs, bindings, self.max_response_bytes)
        check_tensor_sizes(self.tensor_sizes, bindings, self.max_tensor_bytes)
        return inputs

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.005)
    async def predict_batch(self, requests: list[list[torch.Tensor]]) -> list:
        """Run checked requests as few batches as their shapes allow; one result (outputs or the
        exception) per request, in order. Each request has its own slot (a Future the program thread settles as
        soon as that request's run ends), so that on a run past the deadline the requests already answered keep
        their answers, the ones in the run get RunTimeoutError and the ones not yet run get BusyError."""
        slots = [concurrent.futures.Future() for _ in requests]
        self._slots.update((id(request), (request, slot)) for request, slot in zip(requests, slots))
        try:
            self._executor.submit(self._run_batched, requests, slots)
            return await asyncio.gather(*(self._slot_result(slot) for slot in slots))
        finally:
            for request in requests:
                self._slots.pop(id(request), None)

    async def _in_a_batch(self, inputs: list[torch.Tensor]):
        """predict_batch's answer for one request; when the request is cancelled (its client left, Ray's proxy timed
        it out) after its batch started, its slot is given up too (RunWatch.give_up), so that its run, not started,
        never starts: Ray cancels only the caller, and the batch ran such a request anyway, after the others of its
        batch (breaker 2: a request cancelled while the first of its batch ran alone for a second ran all the same;
        session 25: one whose slot was held, after its batch's call failed, ran all the same)."""
        try:
            return await self.predict_batch(inputs)
        except asyncio.CancelledError:
            request, slot = self._slots.get(id(inputs), (None, None))
            if request is inputs:  # pending, or held after its batch's call failed: either way its run never starts
                self.watch.give_up(slot, BusyError("the request was cancelled before its run started"))
            raise

    async def _slot_result(self, slot: concurrent.futures.Future):
        try:
            return await self.watch.wait(slot)
        except Exception as error:  # RunTimeoutError, BusyError, or what broke the program thread: this request's
            return error
        except asyncio.CancelledError as cancelled:
            if slot.cancelled() and not asyncio.current_task().cancelling():
                return cancelled  # its request was cancelled (_in_a_batch), not the batch: the others go on
            raise

    # --- running (in the program thread) ------------------------------------------------------------

    async def _alone(self, inputs: list[torch.Tensor]):
        """One request's outputs (or its AotcudaError) from a call of its own on the program thread, under the run
        deadline: raises RunTimeoutError or BusyError (RunWatch.wait), or what broke the program thread. Its slot is
        a Future of its own, not the executor's, so that its program call can name it (RunWatch.call)."""
        slot = concurrent.futures.Future()
        self._executor.submit(self._run_slot, inputs, slot)
        return await self.watch.wait(slot)

    def _run_slot(self, inputs: list[torch.Tensor], slot: concurrent.futures.Future) -> None:
        if not slot.set_running_or_notify_cancel():  # its request was cancelled, or given up, while it waited
            return
        try:
            _unless_settled(slot.set_result, self._run_one(inputs, slot))
        except BaseException as error:  # what broke outside the call too: the request's answer, not a hang
            _unless_settled(slot.set_exception, _as_answer(error))

    def _run_one(self, inputs: list[torch.Tensor], slot: concurrent.futures.Future):
        self._count_batch(1, inputs[0].shape[0] if inputs and inputs[0].dim() else 1)
        return self._run_alone(inputs, slot)

    def _run_batched(self, requests: list[list[torch.Tensor]], slots: list[concurrent.futures.Future]) -> None:
        """Settle each request's slot with its outputs (or its AotcudaError). A slot turns running only when its
        request's run starts; a slot its request cancelled (its client left, its deadline passed before it ran)
        is skipped. Whatever else breaks here is every unsettled slot's answer: no request waits for good."""
        try:
            for batch in self.plan.chunks(requests):
                self._run_chunk(requests, slots, [i for i in batch if not slots[i].cancelled()])
        except BaseException as error:
            for slot in slots:
                _unless_settled(slot.set_exception, _as_answer(error))

    def _run_chunk(self, requests: list[list[torch.Tensor]], slots: list[concurrent.futures.Future],
                   batch: list[int]) -> None:
        if len(batch) > 1 and not self._batch_fits(combine([requests[i] for i in batch])[0]):
            for index in batch:  # each request fits alone (checked_inputs), and runs as its own call
                if slots[index].set_running_or_notify_cancel():
                    _unless_settled(slots[index].set_result, self._run_one(requests[index], slots[index]))
            return
        batch = [i for i in batch if slots[i].set_running_or_notify_cancel()]
        if not batch:
            return
        flat, counts = combine([requests[i] for i in batch])
        self._count_batch(len(batch), sum(counts))
        try:
            pieces = split_rows(self._execute(flat, [slots[i] for i in batch]), counts)
        except AotcudaError as error:
            if len(batch) == 1:  # the call was this request's own: its answer, not a reason to run it again
                _unless_settled(slots[batch[0]].set_result, error)
                return
            # Keep one request's failure its own: each runs alone. Their slots are running (the batch's call was
            # theirs), so they are held until their own call starts: a request whose waiter gave up meanwhile (a
            # call before it passed the deadline) was answered BusyError and is not run; one answered RunTimeoutError
            # (the batch's call passed the deadline) is not held at all.
            self.watch.hold([slots[i] for i in batch])
            try:
                for index in batch:
                    if self.watch.take_held(slots[index]):
                        _unless_settled(slots[index].set_result, self._run_alone(requests[index], slots[index]))
            finally:  # none left held when a run raised (_run_batched answers them with its error)
                for index in batch:
                    self.watch.take_held(slots[index])
            return
        for index, piece in zip(batch, pieces):
            _unless_settled(slots[index].set_result, piece)

    def _batch_fits(self, flat: list[torch.Tensor]) -> bool:
        """Whether a batch's call makes no tensor past max_tensor_bytes: each request was checked alone, and the
        tensors of a batch grow with its rows (8 requests of 1 GiB each would make 8 GiB in one call)."""
        try:
            _, bindings = check_inputs(flat, self.program.input_specs, self.names, _CPU, self.program.num_inputs)
            check_tensor_sizes(self.tensor_sizes, bindings, self.max_tensor_bytes)
        except InputError:
            return False
        return True

    def _run_alone(self, inputs: list[torch.Tensor], slot: concurrent.futures.Future):
        try:
            return self._execute(inputs, [slot])
        except AotcudaError as error:
            return error

    def _execute(self, inputs: list[torch.Tensor], slots: list[concurrent.futures.Future]) -> list[torch.Tensor]:
        """One program call, the run of ``slots`` (the requests it answers), timed by the run deadline: a batch's
        requests run alone one after another each get the whole deadline. The outputs come back on the CPU, so that
        a CUDA program's kernels end within the call (and its deadline), not in the event loop's encoding."""
        device = self.program.device

        def run():
            outputs = self.program.execute([t.to(device, non_blocking=True) for t in inputs])
            return [t.cpu() for t in outputs]

        return self.watch.call(slots, run)

    def _count_batch(self, requests: int, rows: int) -> None:
        self.counters["batches"] += 1
        self.counters["batched_requests"] += requests
        self.counters["rows"] += rows
        self.counters["largest_batch"] = max(self.counters["largest_batch"], requests)

    # --- state -------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """This replica's counters, its process id and device."""
        context = serve.get_replica_context()
        return {"replica": replica_name(context),
                "pid": os.getpid(), "device": str(self.program.device),
                # the physical GPUs Ray gave this replica (its "cuda:0" is the first of them)
                "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
                # the batch dim as the user named it at lowering, not torch's symbol (s52: a user's report)
                "batching": (self.plan.dim_name or "dim 0") if self.max_batch_size > 1 else None,
                **{key: self.counters[key] for key in
                   ("requests", "rejected", "timed_out", "not_run", "cancelled", "batches", "batched_requests", "rows",
                    "largest_batch")}}

    def check_health(self) -> None:
        """Ray Serve's periodic health check: a closed Program, or a run past run_timeout_s, means the replica must
        be replaced."""
        if self.program.closed:
            raise RuntimeError("the replica's Program is closed")
        try:
            self.watch.check()
        except RunTimeoutError:
            self._tell_health(True)  # again: each word counts health.OVERRUN_WORD_S
            raise
        self._tell_health(False)  # said once, when a run past the deadline has ended

    def _tell_health(self, overrun: bool):
        """Tell HealthCheck (health.HealthWord.tell); the word's DeploymentResponse, or None when none was sent."""
        return None if self.health_word is None else self.health_word.tell(overrun)

    async def _health_told_of_overrun(self) -> None:
        """Tell HealthCheck that this replica is to be replaced (a run past the deadline), and wait for it to have
        taken the word, at most WORD_WAIT_S, before a 503 for that run leaves: /healthz says so from then on, not
        three failed Serve checks later; not waited for, the word could come after the client's next GET /healthz."""
        said = self._tell_health(True)
        if said is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(said), WORD_WAIT_S)
        except Exception:  # HealthCheck slow or gone: the 503 goes now, and Serve's states say it later
            pass

    def __del__(self) -> None:
        program = getattr(self, "program", None)
        watch = getattr(self, "watch", None)
        # Program.close waits for the call in flight, which may never end (a run past its deadline, or any run with
        # no deadline): Serve's graceful stop then waited for it until it killed the process (20 s). The process
        # ends with the replica anyway, freeing what close would.
        if program is not None and (watch is None or watch.running_s() is None):
            program.close()  # removes the extracted package
            if _in_a_serve_replica():  # Serve kills the process next, before its exit handlers could run
                remove_pinned_folder()


def _in_a_serve_replica() -> bool:
    """Whether this process is a replica of Ray Serve (whose process holds this one program), not a process that
    made a ProgramReplica itself (a test, which may hold other programs of the same library)."""
    try:
        serve.get_replica_context()
    except Exception:  # noqa: BLE001 - RayServeException outside a replica
        return False
    return True


def _as_answer(error: BaseException) -> Exception:
    """What broke the program thread, as a request's answer: an Exception as it is; a BaseException that is not one
    (SystemExit from code a program call reached, a KeyboardInterrupt) as a RuntimeError that names it. Such an
    error used to pass the thread's handlers, and the executor's work item kept it where nobody reads it: the
    requests it left unsettled waited for good (with no run_timeout_s). Raised in the event loop as it is, it would
    end Ray's replica, not answer the request."""
    if isinstance(error, Exception):
        return error
    return RuntimeError(f"the program thread was stopped by {error!r} (a BaseException) in the run of this request "
                        "or of its batch; the replica serves the next request")


def _unless_settled(settle, answer) -> None:
    """``settle(answer)`` (a slot's set_result or set_exception), unless the slot has its answer already: its waiter
    answered it RunTimeoutError when its run passed the deadline (RunWatch.wait), or it was settled before what broke
    the program thread, or cancelled."""
    try:
        settle(answer)
    except concurrent.futures.InvalidStateError:
        pass


def _error_response(error: Exception, status: int, prefix: str = "") -> Response:
    """An error's answer, its text bounded: a message may echo the request (a shape of 480,000 dims made a
    1.44 MB 400), and what a client sent must not decide how much the server writes back. A client reads what
    concerns its request, not the deployer's host: the error's ``client_text`` where it has one (an index range's
    op without the lowering host's file, line and source), and no absolute path (the package's, a temporary
    folder's, a source file's); the whole message goes to the replica's log, its control characters escaped
    (errors.terminal_safe): it may quote the request (safetensors' refusal quotes a dtype as sent), and a request's
    ESC sequences and newlines wrote into the log, lines of its own included (break41)."""
    headers = {ERROR_HEADER: type(error).__name__}
    if isinstance(error, BusyError):  # nothing of the request ran: the client may send it again
        headers["Retry-After"] = str(RETRY_AFTER_S)
    text = prefix + (getattr(error, "client_text", None) or str(error))
    public = without_server_paths(text)
    if public != prefix + str(error):
        _log.info("answered %d to a request, said in full: %s", status,
                  terminal_safe(shown(prefix + str(error), MAX_ERROR_CHARS)))
    return PlainTextResponse(shown(public, MAX_ERROR_CHARS), status_code=status, headers=headers)


_log = logging.getLogger("ray.serve")  # a replica's log: Ray Serve writes this logger's records there
