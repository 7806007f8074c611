"""A deadline on each run of a replica's program (``run_timeout_s``).

A request inside every size limit can still take as long as its values say: a ``while_loop`` whose trip count
is an input (n = 2**62 iterations of a cheap body), or a chain of products at the largest shapes the signature
admits. Without a deadline such a request holds the replica's one program thread for good, and every request
routed to that replica waits behind it. A call into the model container cannot be interrupted from Python (its
C++ loop never returns to the interpreter), so the only way to end such a run is to end its process. So:

- the request whose run passes the deadline gets 503 (RunTimeoutError, final: its run may have written the
  program's state) while the run goes on in the program thread;
- requests waiting behind it that have not started are taken off the thread's queue and get 503 with
  Retry-After (BusyError: nothing of them ran, a client may send them again, and Ray routes them to another
  replica or to this one's replacement);
- the replica's health check fails for as long as that run goes on (``RunWatch.check``), so that Ray Serve
  marks the replica unhealthy after its consecutive failures and replaces it, killing the process and the run
  with it (health.HEALTH_CHECK_PERIOD_S bounds how long that takes). A run that ends before that leaves
  the replica healthy again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import time

from aotcuda.errors import AotcudaError
from aotcuda.serving.body import BusyError

__all__ = ["MIN_RUN_TIMEOUT_S", "RunTimeoutError", "RunWatch", "check_run_timeout"]

# How often a waiting request looks at the running call (seconds): the most a 503 comes after the deadline.
POLL_S = 0.25
# The least deadline (seconds): below the replica's own granularity (POLL_S) a deadline fails every honest request.
MIN_RUN_TIMEOUT_S = 0.1


def is_number(value) -> bool:
    """Whether ``value`` is an int or a float (a bool is neither here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_at_least(value, least: float) -> bool:
    """Whether ``value`` is a finite number ≥ ``least``: nan passes every comparison, so each is asked."""
    return is_number(value) and math.isfinite(value) and value >= least


def check_run_timeout(value) -> None:
    """Raise ValueError unless ``value`` is None (no deadline) or a finite number of seconds ≥ MIN_RUN_TIMEOUT_S."""
    if value is None:
        return
    if not is_number(value):
        raise ValueError(f"run_timeout_s must be a number of seconds, or None for no deadline; got {value!r}")
    if not finite_at_least(value, MIN_RUN_TIMEOUT_S):
        raise ValueError(f"run_timeout_s must be a finite number of seconds, at least {MIN_RUN_TIMEOUT_S:g}; got "
                         f"{value!r} (None, or 0 on the command line, turns the deadline off)")


class RunTimeoutError(AotcudaError):
    """A request whose run passed the server's run_timeout_s (answered with HTTP 503 and no Retry-After: the run
    may have changed the program's state, so the request is not safe to send again as it is)."""

    http_status = 503


class RunWatch:
    """The program thread's current run (its start, and the jobs it answers), for the deadline (``timeout_s``
    seconds; None: none).

    Why one lock for everything read here, the clock included: a look at the current run and what follows from it (a
    request's verdict, a job taken back, a failed health check) must be one step. Otherwise the run can end and the
    next start between the two (the program thread hands over without asking the event loop), and the next run's
    request got RunTimeoutError for the overrun of the run before it; a run timed to a clock read after it had
    ended, within its deadline, failed the health check with no run going on."""

    def __init__(self, timeout_s: float | None):
        check_run_timeout(timeout_s)
        self.timeout_s = timeout_s
        # (time.monotonic() at the current run's start, the jobs whose run it is); None between runs
        self._run: tuple[float, frozenset] | None = None
        self._lock = threading.Lock()
        # Jobs marked running whose own run has not started (a batch's requests, to be run alone after the batch's
        # call failed): on a run past the deadline a waiter takes its job out of here and answers BusyError, and the
        # program thread, finding it gone, does not run it (take_held: whichever comes first, under the lock).
        self._held: set = set()

    def call(self, jobs, function, *args):
        """Run ``function(*args)`` as the current run (one program call, on the program thread), the run of ``jobs``:
        the Futures of the requests it answers, the only ones a deadline past in it answers RunTimeoutError."""
        with self._lock:
            self._run = (time.monotonic(), frozenset(jobs))
        try:
            return function(*args)
        finally:
            with self._lock:
                self._run = None

    def hold(self, jobs) -> None:
        """Mark ``jobs`` (already running) as waiting for a run of their own (program thread). A job already settled
        is not held: its waiter answered it RunTimeoutError (its batch's call passed the deadline), so running it
        again would be a call nobody waits for, after the deadline, and a second write of the program's state."""
        with self._lock:
            self._held.update(job for job in jobs if not job.done())

    def take_held(self, job) -> bool:
        """Take ``job`` out of the held jobs: True for the first to ask (the program thread, before its run; a
        waiter, giving it up), False for the second."""
        with self._lock:
            return self._take_held(job)

    def give_up(self, job: concurrent.futures.Future, error: Exception) -> bool:
        """Take ``job`` back while its own run has not started, so that it never does: a pending job is cancelled, a
        held one settled with ``error`` (its waiter's answer; nobody else settles a held job that is not taken).
        False once its run has started, or it has settled."""
        with self._lock:
            return self._give_up(job, error)

    def running_s(self) -> float | None:
        """How long the current run has taken so far; None between runs."""
        with self._lock:
            return self._running_s()

    def overrun_s(self) -> float | None:
        """How long the current run has taken, if that is past the deadline; None otherwise (or between runs)."""
        with self._lock:
            return self._overrun_s()

    def check(self) -> None:
        """Raise RunTimeoutError while the current run is past the deadline (the replica's health check)."""
        running = self.overrun_s()
        if running is not None:
            raise RunTimeoutError(f"a run has taken {running:.1f} s, past run_timeout_s={self.timeout_s:g}: the "
                                  "replica cannot stop it and must be replaced")

    async def wait(self, job: concurrent.futures.Future):
        """The result of ``job``, or, once the thread's current run is past the deadline: BusyError if ``job``'s own
        run had not started (it never will), RunTimeoutError if the run is ``job``'s (the run goes on, its result is
        dropped). ``job`` is one request's Future that the program thread marks running when it takes it and settles
        when its run ends, its program calls made through ``call`` with it among their jobs (a request run alone, or
        one request's slot of a batch: deployment.ProgramReplica.predict_batch); one held (``hold``: running from a
        batch's failed call, its own call not started) is given up with BusyError, as one not started."""
        waiting = asyncio.wrap_future(job)
        poll_s = None if self.timeout_s is None else min(POLL_S, self.timeout_s)
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=poll_s)
                if done:
                    return waiting.result()
                overdue = self._overdue_answer(job)
                if overdue is not None:
                    waiting.cancel()  # the job's later settling has no reader: no "exception never retrieved"
                    raise overdue
        except asyncio.CancelledError:
            # The request was cancelled (its client left, Ray's proxy timed it out): a job whose run has not started
            # must not run. asyncio.wait does not cancel what it waits for, and the program thread's queue has no
            # bound of its own (Ray's max_ongoing_requests counts requests, not jobs left behind).
            self.give_up(job, BusyError("the request was cancelled before its run started"))
            raise

    # --- under the lock ------------------------------------------------------------------------------

    def _running_s(self) -> float | None:
        return None if self._run is None else time.monotonic() - self._run[0]

    def _overrun_s(self) -> float | None:
        running = self._running_s()
        return running if self.timeout_s is not None and running is not None and running > self.timeout_s else None

    def _take_held(self, job) -> bool:
        if job not in self._held:
            return False
        self._held.discard(job)
        return True

    def _give_up(self, job: concurrent.futures.Future, error: Exception) -> bool:
        if job.cancel():
            return True
        if not self._take_held(job):
            return False
        job.set_exception(error)
        return True

    def _overdue_answer(self, job: concurrent.futures.Future) -> Exception | None:
        """``job``'s answer if the current run is past the deadline, decided in one step with that look (see the
        class): RunTimeoutError if the run is ``job``'s, set on ``job`` too, so that the program thread neither
        answers it nor holds it for a run of its own; BusyError if ``job``'s run has not started, taken back so that
        it never does. None while no run is past the deadline, or when ``job`` has settled (its result is on its way
        to the waiter)."""
        with self._lock:
            if self._overrun_s() is None:
                return None
            if job in self._run[1]:
                error = RunTimeoutError(
                    f"the program ran for more than run_timeout_s={self.timeout_s:g} s on this request; a call into "
                    "the program cannot be interrupted, so the replica is replaced if the run has not ended by the "
                    "next health checks (its result is dropped either way). Lower the request's sizes or values, or "
                    "raise --run-timeout-s")
                try:
                    job.set_exception(error)
                except concurrent.futures.InvalidStateError:  # settled in its run after all: that answer stands
                    return None
                return error
            busy = BusyError(f"this replica's run of an earlier request passed run_timeout_s={self.timeout_s:g} and "
                             "the replica is being replaced; nothing of this request ran, send it again after the "
                             "Retry-After seconds")
            return busy if self._give_up(job, busy) else None
