"""A run past run_timeout_s (serving/deadline.py): its request gets 503, the requests waiting behind it get 503 with
Retry-After, and the replica fails its health check until the run ends; with Ray, Serve then replaces the replica,
process and run with it. Found by a breaker: a while_loop whose trip count is a request's input (n = 2**62) held a
replica for good, whatever the size limits."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import types

import pytest
import torch

safetensors_torch = pytest.importorskip("safetensors.torch", reason="aotcuda[serve] is not installed")
deployment = pytest.importorskip("aotcuda.serving.deployment", reason="aotcuda[serve] is not installed")

from aotcuda.serving import deadline as deadline_module  # noqa: E402
from aotcuda.serving.deadline import RunTimeoutError  # noqa: E402
from aotcuda.serving.server import ServeOptions  # noqa: E402
from serving_cases import RepeatedHalving, get, loopback_ray, posted, replica_stats, server_environment  # noqa: E402

PORT = 18767  # 187xx: the serving tests' ports on a shared machine
# Seconds a forced hand-over between two runs may take on a busy machine: spent in full where the watch keeps the
# hand-over out of its look (the fixed code), so that the test cannot pass by a slow hand-over.
HAND_OVER_S = 2.0


async def predict(replica, inputs: dict[str, torch.Tensor]):
    """POST /predict to a replica, its body read by the HTTP proxy: (status, headers, answer body)."""
    answer = await posted(replica, safetensors_torch.save(inputs))
    return answer.status_code, answer.headers, answer.body


def iterations_lasting(replica, seconds: float) -> int:
    """A trip count for which the halving loop runs at least about ``seconds`` on this machine (measured: machines
    differ). The quickest of three probes: a probe slowed by another process would make a count that runs shorter
    once the machine is free again, and the tests need the run to outlast what they do meanwhile."""
    probe, quickest = 200_000, float("inf")
    for _ in range(3):
        started = time.perf_counter()
        replica.program(torch.randn(4), torch.tensor(probe))
        quickest = min(quickest, time.perf_counter() - started)
    return max(probe, int(probe * seconds / quickest))


def run_batch(replica, xs: list[torch.Tensor]) -> list:
    """The answers of one batch of requests {"x": x} for each x, through the batch handler as Serve calls it (Serve's
    batching needs a replica context)."""
    handle_batch = type(replica).predict_batch.__wrapped__
    return asyncio.run(handle_batch(replica, [replica.checked_inputs(safetensors_torch.save({"x": x})) for x in xs]))


def healthz(route) -> tuple[int, bytes]:
    """A deployment's answer to GET /healthz (HealthCheck, or a ProgramReplica's own route), called without Ray."""
    from starlette.requests import Request

    scope = {"type": "http", "method": "GET", "path": "/healthz", "headers": [], "query_string": b""}
    answer = asyncio.run(route(Request(scope)))
    return answer.status_code, answer.body


def serve_reads_every_replica_running(monkeypatch) -> None:
    """Serve's own word, stood in for: the application "aotcuda" runs, and its ProgramReplica's replicas all do."""
    from aotcuda.serving import health

    deployment_status = types.SimpleNamespace(replica_states={"RUNNING": 2})
    app = types.SimpleNamespace(status="ApplicationStatus.RUNNING", deployments={"ProgramReplica": deployment_status})
    monkeypatch.setattr(health.serve, "status", lambda: types.SimpleNamespace(applications={"aotcuda": app}))


def halved(x: torch.Tensor, n: int) -> torch.Tensor:
    with torch.no_grad():
        return RepeatedHalving()(x, torch.tensor(n))


class SteppedClock:
    """deadline.py's clock, stood in for: every read gives ``now``; the next read made on the thread that called
    ``arm(action)`` runs ``action`` first, so that what the program thread does in ``action`` (a run ends, the next
    starts) falls between the watch's reading of its state and what it does next, as a thread switch can make it."""

    def __init__(self):
        self.now = 0.0
        self._armed: tuple[int, object] | None = None

    def arm(self, action) -> None:
        self._armed = (threading.get_ident(), action)

    def monotonic(self) -> float:
        if self._armed is not None and self._armed[0] == threading.get_ident():
            _, action = self._armed
            self._armed = None
            action()
        return self.now


class GatedCalls:
    """replica.program.execute, stood in for: each of the first ``gated`` calls sets its ``started`` event and runs
    only once the test sets its ``go``."""

    def __init__(self, execute, gated: int = 2):
        self.execute, self.count = execute, 0
        self.started = [threading.Event() for _ in range(gated)]
        self.go = [threading.Event() for _ in range(gated)]

    def __call__(self, inputs):
        call, self.count = self.count, self.count + 1
        if call < len(self.started):
            self.started[call].set()
            self.go[call].wait(60)
        return self.execute(inputs)

    def release_all(self) -> None:
        for go in self.go:
            go.set()


def ended_within(replica, seconds: float) -> bool:
    """Whether the replica's program thread finished all it had been given within ``seconds``."""
    try:
        replica._executor.submit(lambda: None).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        return False
    return True


async def answer_of(replica, x: torch.Tensor, batched: bool) -> str:
    """How one request {"x": x} was answered: "outputs", or its error's name (X-Aotcuda-Error, the error a batch's
    slot gave, or the exception the route raised), through the batch handler or the route."""
    try:
        if batched:
            request = replica.checked_inputs(safetensors_torch.save({"x": x}))
            (result,) = await type(replica).predict_batch.__wrapped__(replica, [request])
            return "outputs" if isinstance(result, list) else type(result).__name__
        status, headers, _ = await predict(replica, {"x": x})
        return "outputs" if status == 200 else headers.get("x-aotcuda-error", str(status))
    except Exception as error:
        return type(error).__name__


def test_a_run_past_the_deadline_answers_503_and_fails_the_health_check_until_it_ends(runaway_package):
    replica = deployment.ProgramReplica(runaway_package, run_timeout_s=0.5)
    long_n = iterations_lasting(replica, 4.0)

    async def scenario():
        long = asyncio.create_task(predict(replica, {"x": torch.randn(4), "n": torch.tensor(long_n)}))
        await asyncio.sleep(0.1)  # queued behind the long run
        waiting = asyncio.create_task(predict(replica, {"x": torch.randn(4), "n": torch.tensor(3)}))
        return await long, await waiting, replica.watch.overrun_s()

    (status, headers, text), (waited, waited_headers, waited_text), overrun = asyncio.run(scenario())
    assert (status, headers.get("x-aotcuda-error")) == (503, "RunTimeoutError"), text[:300]
    assert b"run_timeout_s=0.5" in text and "retry-after" not in headers  # not safe to resend: it ran
    assert overrun is not None  # answered while the run goes on, not when it ended
    assert (waited, waited_headers.get("x-aotcuda-error"), waited_headers.get("retry-after")) == (503, "BusyError", "3")
    assert b"nothing of this request ran" in waited_text
    with pytest.raises(RunTimeoutError, match="past run_timeout_s=0.5"):
        replica.check_health()
    for _ in range(600):  # the run ends on its own here (a finite n): the replica is healthy again
        if replica.watch.overrun_s() is None:
            break
        time.sleep(0.1)
    replica.check_health()
    x = torch.randn(4)
    status, _, answer = asyncio.run(predict(replica, {"x": x, "n": torch.tensor(5)}))
    assert status == 200
    torch.testing.assert_close(safetensors_torch.load(answer)["output_0"], halved(x, 5), rtol=1e-5, atol=1e-6)
    stats = {key: replica.counters[key] for key in ("requests", "timed_out", "not_run")}
    assert stats == {"requests": 3, "timed_out": 1, "not_run": 1}


def test_each_request_of_a_batch_past_the_deadline_gets_its_error(served_block):
    """A batch is one run: its requests all get RunTimeoutError; a batch queued behind it, BusyError each. (Serve's
    batching needs a replica context: the batch handler is called as Serve calls it, with a slow call standing in
    for a slow program.)"""
    from aotcuda.serving.body import BusyError

    path, model = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4, run_timeout_s=0.3)
    execute = replica.program.execute

    def slow(inputs):
        time.sleep(1.5)
        return execute(inputs)

    replica.program.execute = slow
    handle_batch = type(replica).predict_batch.__wrapped__
    requests = [replica.checked_inputs(safetensors_torch.save({"x": torch.randn(1, 16, 256)})) for _ in range(3)]

    async def scenario():
        running = asyncio.create_task(handle_batch(replica, requests[:2]))
        await asyncio.sleep(0.1)
        return await running, await handle_batch(replica, requests[2:])

    ran, queued = asyncio.run(scenario())
    assert [type(result) for result in ran] == [RunTimeoutError] * 2 and [type(r) for r in queued] == [BusyError]
    assert ended_within(replica, 60)  # the slow call has ended (a fixed 1.5 s pause could end before it did)

    def a_little_slow(inputs):
        time.sleep(0.55)
        return execute(inputs)

    # The deadline is each program call's: a batch whose requests run alone (here: as if together they passed
    # --max-tensor-bytes) takes 3 x 0.55 s, past 1.5 s, and each of its calls is within it, by 0.95 s (0.2 s of
    # 0.3 s left a loaded machine 0.1 s, and a late call got RunTimeoutError).
    replica = deployment.ProgramReplica(path, max_batch_size=4, run_timeout_s=1.5)
    execute = replica.program.execute
    replica.program.execute, replica._batch_fits = a_little_slow, lambda flat: False
    xs = [torch.randn(1, 16, 256) for _ in range(3)]
    results = run_batch(replica, xs)
    for x, outputs in zip(xs, results):
        assert isinstance(outputs, list), outputs
        with torch.no_grad():
            torch.testing.assert_close(outputs[0], model(x), rtol=1e-5, atol=1e-5)


def test_a_batch_run_call_by_call_keeps_the_answers_it_has_when_a_later_call_overruns(served_block):
    """Found in session 23's review: a batch whose requests ran as calls one after another (together they passed
    --max-tensor-bytes, or the batch failed as a whole) was one job, so when its second call passed the deadline the
    first request, already answered, got RunTimeoutError too, and the third, which never ran, got RunTimeoutError
    (final) instead of BusyError (safe to send again). Each request now has its own slot."""
    from aotcuda.serving.body import BusyError

    path, model = served_block
    # 1 s: the first call (a few ms) ends within it on a loaded machine (0.3 s did not leave that sure); the second
    # sleeps 2 s, past it whatever the machine does
    replica = deployment.ProgramReplica(path, max_batch_size=4, run_timeout_s=1.0)
    execute, calls = replica.program.execute, []

    def second_call_slow(inputs):
        calls.append(len(calls))
        if len(calls) == 2:
            time.sleep(2.0)
        return execute(inputs)

    replica.program.execute, replica._batch_fits = second_call_slow, lambda flat: False
    xs = [torch.randn(1, 16, 256) for _ in range(3)]
    results = run_batch(replica, xs)
    assert [type(result) for result in results] == [list, RunTimeoutError, BusyError], results
    with torch.no_grad():
        torch.testing.assert_close(results[0][0], model(xs[0]), rtol=1e-5, atol=1e-5)
    replica._executor.submit(lambda: None).result(timeout=60)
    assert calls == [0, 1]  # the third request never ran: its slot was taken back while it waited

    # What breaks the program thread outside a program call is every unsettled request's answer, not a hang.
    def broken(flat):
        raise RuntimeError("the batch check broke")

    replica.program.execute, replica._batch_fits = execute, broken
    results = run_batch(replica, xs)
    assert [str(result) for result in results] == ["the batch check broke"] * 3
    replica._batch_fits = lambda flat: True
    results = run_batch(replica, xs)
    for x, outputs in zip(xs, results):  # and the replica answers the next batch
        with torch.no_grad():
            torch.testing.assert_close(outputs[0], model(x), rtol=1e-5, atol=1e-5)


def test_a_batch_that_failed_as_a_whole_runs_alone_and_a_request_not_yet_rerun_gets_busy(served_block):
    """Breaker 2: when a batch's call failed as a whole (an AotcudaError), its requests ran alone one after another,
    but their slots had all been marked running for the batch's call: when the second one's own call passed the
    deadline, the third, whose own call had not started, got RunTimeoutError ("the program ran for more than
    run_timeout_s on this request", final) instead of BusyError, and its call ran after the deadline anyway, its
    answer dropped, keeping the replica's one thread busy."""
    from aotcuda.errors import AotcudaError
    from aotcuda.serving.body import BusyError

    path, model = served_block
    # 1 s: the batch's call and the first alone (a few ms) end within it on a loaded machine; the second alone
    # sleeps 2 s, past it whatever the machine does
    replica = deployment.ProgramReplica(path, max_batch_size=4, run_timeout_s=1.0)
    execute, calls = replica.program.execute, []

    def batch_fails_second_alone_slow(inputs):
        calls.append(inputs[0].shape[0])
        if inputs[0].shape[0] > 1:
            raise AotcudaError("the batch's call failed as a whole")
        if len(calls) == 3:
            time.sleep(2.0)
        return execute(inputs)

    replica.program.execute = batch_fails_second_alone_slow
    xs = [torch.randn(1, 16, 256) for _ in range(3)]
    results = run_batch(replica, xs)
    assert [type(result) for result in results] == [list, RunTimeoutError, BusyError], results
    with torch.no_grad():
        torch.testing.assert_close(results[0][0], model(xs[0]), rtol=1e-5, atol=1e-5)
    replica._executor.submit(lambda: None).result(timeout=60)
    assert calls == [3, 1, 1]  # the third request's own call never ran: it was given up while it waited


@pytest.fixture
def serve_batching(monkeypatch):
    """Ray's own batch wrapper around predict_batch, outside a replica: given the replica context it reads, and a
    queue of its own (made at first use and kept by the function, for that first event loop: back to none after)."""
    import types

    import ray.serve.batching

    context = types.SimpleNamespace(_deployment_config=types.SimpleNamespace(max_ongoing_requests=100))
    monkeypatch.setattr(ray.serve.batching.serve, "get_replica_context", lambda: context)
    monkeypatch.setattr(deployment.ProgramReplica.predict_batch.set_max_batch_size.__self__, "_queue", None)


def test_a_request_cancelled_after_its_batch_started_never_runs(served_block, serve_batching):
    """Breaker 2: Ray's batching drops a request cancelled before its batch starts, but one cancelled after (its client
    left while the batch's first call ran) only had its caller cancelled: its slot stayed pending and it ran after
    the others (here 10 + 6 rows make the first call, at the batch dim's max of 16, and the third's 10 rows a second
    call). Now its slot is cancelled with it, and the others of its batch are answered. (One event loop for both
    deadlines: the wrapper's queue is the function's.)"""
    path, model = served_block
    xs = [torch.randn(rows, 16, 256) for rows in (10, 6, 10)]  # one batch of two calls: 16 rows at most a call

    async def scenario(deadline):
        replica = deployment.ProgramReplica(path, max_batch_size=4, batch_wait_ms=200, run_timeout_s=deadline)
        gate = GatedCalls(replica.program.execute, gated=1)
        calls = []

        def first_call_waits(inputs):
            calls.append(inputs[0].shape[0])
            return gate(inputs)

        replica.program.execute = first_call_waits
        inputs = [replica.checked_inputs(safetensors_torch.save({"x": x})) for x in xs]
        tasks = [asyncio.create_task(replica._in_a_batch(request)) for request in inputs]
        # the batch started (200 ms wait) and its first call runs: waited for, not slept for (a 0.4 s pause beside a
        # 0.5 s call could end, on a loaded machine, before the batch started or after the first call had ended)
        await asyncio.to_thread(gate.started[0].wait, 60)
        tasks[2].cancel()
        await asyncio.wait({tasks[2]})
        gate.release_all()
        answers = [await task for task in tasks[:2]]
        await asyncio.to_thread(replica._executor.submit(lambda: None).result, 60)
        return answers, tasks[2].cancelled(), calls

    async def both():
        return [await scenario(deadline) for deadline in (None, 30.0)]

    for answers, cancelled, calls in asyncio.run(both()):
        assert cancelled
        for x, outputs in zip(xs, answers):
            with torch.no_grad():
                torch.testing.assert_close(outputs[0], model(x), rtol=1e-5, atol=1e-5)
        assert calls == [16], calls  # the third request never ran


@pytest.mark.parametrize("deadline", [None, 30.0])
def test_a_request_cancelled_while_its_failed_batch_reruns_alone_never_runs(served_block, serve_batching, deadline):
    """Found in session 25's review: after a batch's call failed as a whole, its requests wait, held, for their own
    calls; one cancelled then (its client left while the first ran alone) still ran, its answer dropped: cancelling
    its slot failed, since a held slot is running (its batch's call was its). Now a held slot is given up as a
    pending one is, and its batch's others are answered."""
    from aotcuda.errors import AotcudaError

    path, model = served_block
    xs = [torch.randn(1, 16, 256) for _ in range(3)]
    replica = deployment.ProgramReplica(path, max_batch_size=4, batch_wait_ms=200, run_timeout_s=deadline)
    gate = GatedCalls(replica.program.execute, gated=1)
    calls = []

    def batch_fails_first_alone_waits(inputs):
        calls.append(inputs[0].shape[0])
        if inputs[0].shape[0] > 1:
            raise AotcudaError("the batch's call failed as a whole")
        return gate(inputs)

    replica.program.execute = batch_fails_first_alone_waits

    async def scenario():
        inputs = [replica.checked_inputs(safetensors_torch.save({"x": x})) for x in xs]
        tasks = [asyncio.create_task(replica._in_a_batch(request)) for request in inputs]
        await asyncio.to_thread(gate.started[0].wait, 60)  # the batch failed: the first runs alone, the others held
        tasks[2].cancel()
        await asyncio.wait({tasks[2]})
        gate.release_all()
        answers = [await task for task in tasks[:2]]
        await asyncio.to_thread(ended_within, replica, 60)
        return answers, tasks[2].cancelled()

    answers, cancelled = asyncio.run(scenario())
    assert cancelled
    for x, outputs in zip(xs, answers):
        with torch.no_grad():
            torch.testing.assert_close(outputs[0], model(x), rtol=1e-5, atol=1e-5)
    assert calls == [3, 1, 1], calls  # the third request's own call never ran


def test_a_batch_answered_run_timeout_error_does_not_run_again_request_by_request(served_block):
    """Found in session 25's review: a batch whose call passed the deadline (each request answered RunTimeoutError) and
    then failed as a whole was run again request by request: calls whose answers nobody waited for, after the
    deadline, on the replica's one thread, and a second write of the program's state by requests told that their
    run may have written it. A request answered RunTimeoutError is settled: it is not held for a run of its own."""
    from aotcuda.errors import AotcudaError

    path, _ = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4, run_timeout_s=0.3)
    gate = GatedCalls(replica.program.execute, gated=1)
    calls = []

    def batch_overruns_then_fails(inputs):
        calls.append(inputs[0].shape[0])
        outputs = gate(inputs)
        if inputs[0].shape[0] > 1:
            raise AotcudaError("the batch's call failed as a whole")
        return outputs

    replica.program.execute = batch_overruns_then_fails
    results = run_batch(replica, [torch.randn(1, 16, 256) for _ in range(2)])  # answered while the call waits
    assert [type(result) for result in results] == [RunTimeoutError] * 2, results
    gate.release_all()
    assert ended_within(replica, 60)
    assert calls == [2], calls  # the batch's call only


@pytest.mark.parametrize("batched", [False, True])
def test_a_request_whose_run_just_started_is_not_blamed_for_the_run_before_it(served_block, monkeypatch, batched):
    """The defect: a waiter read the current run (past the deadline), then asked its own job; in between that run
    ended, the job was handed the program thread and its run started, so the job was running, and its request got
    RunTimeoutError (final) for the previous run's overrun. Forced: the waiter's clock read ends the previous run and
    starts the next before it answers. Now the watch reads its run, the clock and the job in one step: the request
    whose run had not started when the overrun was seen gets BusyError, and its run never starts."""
    path, _ = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4 if batched else 1, run_timeout_s=1.0)
    clock = SteppedClock()
    monkeypatch.setattr(deadline_module, "time", clock)
    gate = GatedCalls(replica.program.execute)
    replica.program.execute = gate

    def hand_over():
        gate.go[0].set()  # the overrunning run ends; the next one, the waiter's own, starts
        gate.started[1].wait(HAND_OVER_S)

    async def scenario():
        first = asyncio.create_task(answer_of(replica, torch.randn(1, 16, 256), batched))
        await asyncio.to_thread(gate.started[0].wait, 60)
        first.cancel()  # its client left: its run goes on, and the one waiting is the second request
        await asyncio.wait({first})
        second = asyncio.create_task(answer_of(replica, torch.randn(1, 16, 256), batched))
        clock.now = 5.0  # the first run is past its deadline (1 s)
        clock.arm(hand_over)
        answer = await second
        gate.release_all()
        await asyncio.to_thread(ended_within, replica, 60)
        return answer

    assert asyncio.run(scenario()) == "BusyError"
    assert gate.count == 1  # the second request never ran: it was taken back


@pytest.mark.parametrize("batched", [False, True])
def test_a_run_that_ends_at_its_deadline_answers_its_outputs_or_run_timeout_error(served_block, monkeypatch, batched):
    """The same kind: a waiter saw its own run past the deadline, found its job neither cancellable nor held, and
    then found it done (the run had ended meanwhile) and read the result from the event loop's copy of the job,
    which the loop had not made yet: InvalidStateError ("Result is not set."), a 500, for a request that had its
    answer."""
    path, _ = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4 if batched else 1, run_timeout_s=1.0)
    clock = SteppedClock()
    monkeypatch.setattr(deadline_module, "time", clock)
    gate = GatedCalls(replica.program.execute, gated=1)
    replica.program.execute = gate

    def run_ends():
        gate.go[0].set()
        ended_within(replica, HAND_OVER_S)  # its job settled, unless the look at the watch keeps it from ending

    async def scenario():
        waiting = asyncio.create_task(answer_of(replica, torch.randn(1, 16, 256), batched))
        await asyncio.to_thread(gate.started[0].wait, 60)
        clock.now = 5.0
        clock.arm(run_ends)
        answer = await waiting
        await asyncio.to_thread(ended_within, replica, 60)
        return answer

    assert asyncio.run(scenario()) in ("outputs", "RunTimeoutError")


def test_the_health_check_never_fails_for_a_run_that_has_ended(served_block, monkeypatch):
    """The same kind, in the health check: it read the current run's start under the watch's lock and the clock after
    it, so a run that ended between the two, within its deadline, was timed to the later clock, and the replica failed
    its check with no run going on. Forced: the check's clock read ends the run at 0.5 s (deadline 1 s), then reads
    5 s. A check may fail only for a run still going on when it reads the clock."""
    path, _ = served_block
    replica = deployment.ProgramReplica(path, run_timeout_s=1.0)
    clock = SteppedClock()
    monkeypatch.setattr(deadline_module, "time", clock)
    gate = GatedCalls(replica.program.execute, gated=1)
    replica.program.execute = gate
    ended = []

    def run_ends_within_its_deadline():
        gate.go[0].set()
        ended.append(ended_within(replica, HAND_OVER_S))
        clock.now = 5.0

    def health_check() -> Exception | None:
        clock.arm(run_ends_within_its_deadline)
        try:
            replica.check_health()
        except RunTimeoutError as error:
            return error
        return None

    async def scenario():
        running = asyncio.create_task(answer_of(replica, torch.randn(1, 16, 256), False))
        await asyncio.to_thread(gate.started[0].wait, 60)
        clock.now = 0.5
        failed = await asyncio.to_thread(health_check)
        await running
        return failed

    failed = asyncio.run(scenario())
    assert not (ended[0] and failed), f"the check failed after the run had ended: {failed}"
    replica.check_health()  # no run: healthy


@pytest.mark.parametrize("deadline", [None, 30.0])
def test_what_breaks_the_program_thread_outside_a_call_answers_a_request_run_alone(served_block, deadline):
    """A request run alone has a slot of its own now (its call names it: RunWatch.call), not the executor's Future:
    what breaks the program thread outside its call (here the batch count) is still its answer, not a hang, and the
    next request is answered."""
    path, _ = served_block
    replica = deployment.ProgramReplica(path, run_timeout_s=deadline)
    count_batch = replica._count_batch

    def broken(requests, rows):
        raise RuntimeError("the count broke")

    replica._count_batch = broken
    assert asyncio.run(answer_of(replica, torch.randn(1, 16, 256), False)) == "RuntimeError"
    replica._count_batch = count_batch
    assert asyncio.run(answer_of(replica, torch.randn(1, 16, 256), False)) == "outputs"


@pytest.mark.parametrize("deadline", [None, 30.0])
def test_a_request_cancelled_while_it_waits_never_runs(runaway_package, deadline):
    """Found by a breaker: requests whose client left (or whose proxy timed them out) while they waited behind a
    run were run anyway, later: Ray no longer counted them in max_ongoing_requests, so cheap connections queued any
    amount of work behind a replica that looked healthy (8 abandoned 2 s requests delayed a good one 11.5 s)."""
    replica = deployment.ProgramReplica(runaway_package, run_timeout_s=deadline)
    long_n = iterations_lasting(replica, 1.5)

    async def scenario():
        long = asyncio.create_task(predict(replica, {"x": torch.randn(4), "n": torch.tensor(long_n)}))
        await asyncio.sleep(0.1)
        left = [asyncio.create_task(predict(replica, {"x": torch.randn(4), "n": torch.tensor(long_n)}))
                for _ in range(3)]
        await asyncio.sleep(0.2)
        for task in left:
            task.cancel()  # as Ray cancels a request whose client disconnected
        return await long

    status, _, _ = asyncio.run(scenario())
    assert status == 200
    replica._executor.submit(lambda: None).result(timeout=60)  # whatever was queued has run by now
    assert replica.counters["batches"] == 1  # the long run only: the three left behind never ran
    assert replica.counters["cancelled"] == 3  # and /stats counts them


def test_healthz_answers_503_while_a_replica_says_its_run_is_past_the_deadline(monkeypatch):
    """Found in session 25's review: /healthz answered from Serve's replica states alone, which turn only after three
    failed health checks in a row (Ray 2.60's REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD, no setting; 2 s apart
    here): a replica past its deadline read healthy for up to ~6 s. HealthCheck now takes the replicas' own word; a
    word counts OVERRUN_WORD_S, so that one from a replica Serve has ended does not outlive it."""
    from aotcuda.serving import health

    serve_reads_every_replica_running(monkeypatch)
    clock = SteppedClock()
    monkeypatch.setattr(health, "time", clock)
    check = health.HealthCheck("aotcuda", "ProgramReplica")
    assert healthz(check) == (200, b"ok")
    check.report_overrun("r1", True)
    status, text = healthz(check)
    assert status == 503 and b"r1" in text and b"run_timeout_s" in text
    check.report_overrun("r1", False)  # its run ended: healthy again
    assert healthz(check) == (200, b"ok")
    check.report_overrun("r2", True)
    clock.now += health.OVERRUN_WORD_S  # said again at each check while the run goes on: still fresh
    assert healthz(check)[0] == 503
    clock.now += 0.1  # nothing more: the replica is gone, and Serve's states tell the rest
    assert healthz(check) == (200, b"ok")


def starting_again(monkeypatch, message: str):
    """Serve's status, as /healthz reads it, of an unhealthy application whose second replica is being started again
    after failing with ``message``; the deployment's record, whose message a test may change."""
    from aotcuda.serving import health

    deployment = types.SimpleNamespace(replica_states={"RUNNING": 1, "STARTING": 1}, message=message)
    app = types.SimpleNamespace(status="ApplicationStatus.UNHEALTHY", deployments={"ProgramReplica": deployment})
    monkeypatch.setattr(health.serve, "status", lambda: types.SimpleNamespace(applications={"aotcuda": app}))
    return deployment


def test_healthz_says_why_a_replica_failed_to_start(monkeypatch):
    """A new user's trial: the package was replaced at its path after serve checked it, so each replica Ray started
    in place of one that died refused it, and was started again, for good; /healthz said only "not ready:
    application UNHEALTHY, replicas {'RUNNING': 1, 'STARTING': 1}", the reason being in Ray's controller log alone.
    Serve's deployment message ends with the constructor's traceback: /healthz now quotes its last line."""
    from aotcuda.serving import health

    refusal = ("aotcuda.errors.PackageError: '/srv/model.pt2' is not the package that was checked when serving "
               "started (its SHA-256 is 9f2c..., serve checked 41aa...): ")
    message = ("A replica failed to start with exception. Retrying. Error:\nTraceback (most recent call last):\n"
               "  File \"/x/replica.py\", line 1, in _initialize\n    raise error\n" + refusal)
    deployment = starting_again(monkeypatch, message)
    status, text = healthz(health.HealthCheck("aotcuda", "ProgramReplica"))
    shown = refusal.strip().replace("/srv/model.pt2", "<a path on the server>")  # no client reads the server's paths
    assert status == 503 and text.endswith(b"; a replica failed to start: " + shown.encode()), text
    deployment.message = ""  # no failure said: the states alone, as before
    assert healthz(health.HealthCheck("aotcuda", "ProgramReplica"))[1].endswith(b"'STARTING': 1}")


def test_healthz_tells_a_client_why_a_replica_failed_to_start_without_the_servers_paths(monkeypatch):
    """Information a client could read (breakserve3, 2026-12-07): /healthz, open to any client, quoted the last line of
    a replica's start failure as it was, so a package replaced under serve told every client where the deployer keeps
    it (``'/home/alice/models/fraud-v3/model.pt2' is not the package that was checked``), though a replica's own
    answers show no path of the server since the breaker's "the deployer's source in a client's answer". Now the
    reason is said without the path; `aotcuda serve` says it whole on its stderr."""
    from aotcuda.serving import health

    refusal = ("aotcuda.errors.PackageError: '/home/alice/models/fraud-v3/model.pt2' is not the package that was checked "
               "when serving started (its SHA-256 is 9f2c..., serve checked 41aa...); extracted to /tmp/aotcuda-x1/lib.so")
    message = ("A replica failed to start with exception. Retrying. Error:\nTraceback (most recent call last):\n"
               "  File \"/home/alice/.venv/lib/python3.11/site-packages/ray/serve/replica.py\", line 1\n" + refusal)
    deployment = starting_again(monkeypatch, message)
    status, text = healthz(health.HealthCheck("aotcuda", "ProgramReplica"))
    assert status == 503 and b"is not the package that was checked" in text, text
    assert b"/home/alice" not in text and b"/tmp/aotcuda-x1" not in text and b"<a path on the server>" in text, text


def test_a_replica_tells_healthz_when_its_run_passes_the_deadline_and_when_it_ends(served_block, monkeypatch):
    """The replica's side: it tells HealthCheck when it answers a request 503 for a run past the deadline, again at
    each failed health check, and once when the run has ended; its own /healthz route says its own run (build_app,
    where no HealthCheck is deployed). A Serve handle stood in for, calling HealthCheck at once."""
    from aotcuda.serving import health

    serve_reads_every_replica_running(monkeypatch)
    check, said = health.HealthCheck("aotcuda", "ProgramReplica"), []

    def told(replica, overrun):
        said.append(overrun)
        check.report_overrun(replica, overrun)

    handle = types.SimpleNamespace(report_overrun=types.SimpleNamespace(remote=told))
    monkeypatch.setattr(health.serve, "get_deployment_handle", lambda name, app: handle)
    context = types.SimpleNamespace(app_name="aotcuda", deployment="ProgramReplica", replica_tag="r1")
    monkeypatch.setattr(health.serve, "get_replica_context", lambda: context)
    path, _ = served_block
    replica = deployment.ProgramReplica(path, run_timeout_s=0.3, health_deployment=("aotcuda-health", "HealthCheck"))
    replica.check_health()  # Serve's first check: the handle is made, its routing started with a word of no news
    assert said == [False]
    gate = GatedCalls(replica.program.execute, gated=1)
    replica.program.execute = gate
    assert asyncio.run(answer_of(replica, torch.randn(1, 16, 256), False)) == "RunTimeoutError"  # the run goes on
    assert said == [False, True] and healthz(check)[0] == 503
    assert healthz(replica)[0] == 503
    with pytest.raises(RunTimeoutError):
        replica.check_health()
    gate.release_all()
    assert ended_within(replica, 60)
    replica.check_health()
    replica.check_health()
    assert said == [False, True, True, False]  # the end said once
    assert healthz(check) == (200, b"ok") and healthz(replica) == (200, b"ok")


def test_deadlines_that_cannot_work_are_refused():
    """Found by a breaker: a deadline at or past the proxy's request_timeout_s (both 60 s by default) was never seen:
    the proxy answered 408 first; 1e-9 failed every request, 1e-400 turned the deadline off silently, inf and a
    string were taken."""
    from click.testing import CliRunner

    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command
    from aotcuda.serving.deadline import RunWatch

    assert RunWatch(None).overrun_s() is None
    assert ServeOptions().run_timeout_s < ServeOptions().request_timeout_s
    for bad in (0, -1.0, 1e-9, float("nan"), float("inf"), "5", True):
        with pytest.raises(ValueError, match="run_timeout_s must be a"):
            ServeOptions(run_timeout_s=bad)
    with pytest.raises(ValueError, match=r"run_timeout_s \(90 s\) must be less than request_timeout_s \(60 s\)"):
        ServeOptions(run_timeout_s=90)
    assert ServeOptions(run_timeout_s=90, request_timeout_s=120).run_timeout_s == 90
    # nan passes every comparison: --request-timeout-s nan served, and answered every request 408 at once (a breaker)
    for name, bad in (("request_timeout_s", float("nan")), ("request_timeout_s", 1e-320), ("body_timeout_s", float("inf")),
                      ("batch_wait_ms", float("nan")), ("body_timeout_s", "5")):
        with pytest.raises(ValueError, match=f"{name} must be a finite number"):
            ServeOptions(**{name: bad, "run_timeout_s": None})
    seen = []

    def starting(path, options):
        seen.append(options)
        raise KeyboardInterrupt

    with pytest.MonkeyPatch().context() as patched:
        patched.setattr(server_module, "serve_package", starting)
        for flags, expected in (([], (30.0, 60.0)), (["--run-timeout-s", "2.5"], (2.5, 60.0)),
                                (["--run-timeout-s", "0"], (None, 60.0)), (["--run-timeout-s", "0.0"], (None, 60.0)),
                                (["--run-timeout-s", "90", "--request-timeout-s", "120"], (90.0, 120.0))):
            result = CliRunner().invoke(serve_command, [__file__, *flags])
            assert result.exit_code == 0, result.output
            options = seen.pop()
            assert (options.run_timeout_s, options.request_timeout_s) == expected
        for value, message in (("1e-400", "rounds to 0"), ("1e-9", "at least 0.1"), ("inf", "finite"),
                               ("abc", "not a number"), ("90", "must be less than --request-timeout-s (60 s)")):
            result = CliRunner().invoke(serve_command, [__file__, "--run-timeout-s", value])
            assert result.exit_code == 2 and message in result.output, result.output
            assert "ValueError" not in result.output  # a usage error in our words, as every other bad option
    assert not seen


def test_ray_serve_replaces_a_replica_whose_run_never_ends(runaway_package):
    """End to end: n = 2**62 would run for centuries. Its request gets 503, and Ray Serve replaces the replica (a
    new process: the old one, and the run in it, are gone); the next requests are answered."""
    import psutil

    from aotcuda import serving
    from aotcuda.serving.client import Client, ServingError

    options = ServeOptions(port=PORT, run_timeout_s=2.0)
    ray_options = loopback_ray()
    with server_environment(), serving.serve_package(runaway_package, options, ray_init_options=ray_options) as server:
        (before,) = replica_stats(server.url, replicas=1).values()
        client = Client(server.url, timeout_s=60, retries=0)
        started = time.monotonic()
        with pytest.raises(ServingError) as refused:
            client.predict({"x": torch.randn(4), "n": torch.tensor(2**62)})
        assert (refused.value.status, refused.value.retriable) == (503, False), refused.value
        assert "run_timeout_s=2" in refused.value.message
        # /healthz says so once the 503 has come (the replica's word to HealthCheck, taken before the 503 left), not
        # after Serve's three failed checks, 1.8-2.2 s apart (main: 200 for 3.6 s at least after the first)
        health, body = get(server.url + "/healthz")
        assert health == 503 and b"ran past run_timeout_s" in body, (health, body)
        deadline = time.monotonic() + 120  # 3 health checks 2 s apart, Serve's graceful stop, a new replica's load
        while time.monotonic() < deadline:
            now = replica_stats(server.url, replicas=1, tries=1, wait_s=0)
            if now and next(iter(now.values()))["pid"] != before["pid"]:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the replica (pid {before['pid']}) was not replaced within 120 s")
        for _ in range(100):  # Serve kills the old process once its graceful stop returns
            if not psutil.pid_exists(before["pid"]) or psutil.Process(before["pid"]).status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the replaced replica's process {before['pid']} (and its run) still exists")
        x = torch.randn(4)
        (output,) = Client(server.url, timeout_s=60, retries=5).predict({"x": x, "n": torch.tensor(7)})
        torch.testing.assert_close(output, halved(x, 7), rtol=1e-5, atol=1e-6)
        print(f"from the request to the new replica's answer: {time.monotonic() - started:.1f} s")


def test_a_batch_of_one_whose_call_failed_is_not_run_again(served_block):
    """A batch whose call failed as a whole runs its requests alone, to keep one request's failure its own; a batch
    of one request ran that request's call a second time (twice the time, and a second write of a stateful
    program's state) for the same answer."""
    from aotcuda.errors import AotcudaError

    path, _ = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4)
    calls = []

    def fails(inputs):
        calls.append(inputs[0].shape[0])
        raise AotcudaError("the call failed")

    replica.program.execute = fails
    (result,) = run_batch(replica, [torch.randn(1, 16, 256)])
    assert isinstance(result, AotcudaError) and calls == [1], (result, calls)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("deadline", [None, 30.0])
def test_a_base_exception_in_the_program_thread_answers_its_request(served_block, batched, deadline):
    """SystemExit (code a program call reached called sys.exit) is no Exception: it passed the program thread's
    handlers, and the executor kept it where nobody reads it, so the request waited for good without a deadline
    (and until the deadline's BusyError with one). Now it is the request's answer, and the next request runs."""
    path, _ = served_block
    replica = deployment.ProgramReplica(path, max_batch_size=4 if batched else 1, run_timeout_s=deadline)
    execute = replica.program.execute

    def exits(inputs):
        raise SystemExit(3)

    replica.program.execute = exits
    answered = asyncio.run(asyncio.wait_for(answer_of(replica, torch.randn(1, 16, 256), batched), timeout=60))
    assert answered == "RuntimeError", answered
    replica.program.execute = execute
    assert asyncio.run(answer_of(replica, torch.randn(1, 16, 256), batched)) == "outputs"


def test_a_flood_of_health_checks_asks_serve_once_for_many(monkeypatch):
    """breakserve3 (2026-12-07): each GET /healthz asked Serve's controller (serve.status(), a blocking call, in the
    event loop's few threads): 200 connections of one client looping GET /healthz on a one-replica serve got 28
    answers a second, and a balancer's own /healthz took 3.3, 13.4 and 15.3 s (0.05 s alone): past any probe's
    timeout, so the balancer would take a serving node out. Now concurrent checks share one look at Serve, and a
    look serves every check for half a second; a replica's word that its run is past the deadline is read at each
    check, as before. Serve's status stood in for: 0.2 s a call, counted."""
    from starlette.requests import Request

    from aotcuda.serving import health

    calls = []
    deployment_status = types.SimpleNamespace(replica_states={"RUNNING": 1})
    app = types.SimpleNamespace(status="ApplicationStatus.RUNNING", deployments={"ProgramReplica": deployment_status})

    def status():
        calls.append(time.monotonic())
        time.sleep(0.2)
        return types.SimpleNamespace(applications={"aotcuda": app})

    monkeypatch.setattr(health.serve, "status", status)
    check = health.HealthCheck("aotcuda", "ProgramReplica")
    scope = {"type": "http", "method": "GET", "path": "/healthz", "headers": [], "query_string": b""}

    async def flood():
        started = time.monotonic()
        answers = await asyncio.gather(*(check(Request(scope)) for _ in range(200)))
        return answers, time.monotonic() - started

    answers, took = asyncio.run(flood())
    assert [answer.status_code for answer in answers] == [200] * 200
    assert len(calls) <= 2 and took < 1.5, f"{len(calls)} looks at Serve for 200 checks, {took:.1f} s"
    check.report_overrun("r1", True)  # a replica's word is not cached: the next check says it
    status_code, text = healthz(check)
    assert status_code == 503 and b"r1" in text, text
