"""Which stop each signal asks of `aotcuda serve` (Server.wait), with Ray and Serve replaced by recorders:
SIGINT (Ctrl-C) deletes the applications gracefully (requests in flight finish), then stops Ray; SIGTERM stops Ray at once. SIGTERM sent to the
process group also ends the local Ray's GCS and raylet, and Serve's graceful shutdown then waited 30 s for a
controller that was gone (the command took ~40 s to exit). Previous signal handlers come back."""

from __future__ import annotations

import os
import signal
import sys
import threading
import types

import pytest

from aotcuda.serving.server import APP_NAME, HEALTH_APP_NAME, Server


@pytest.fixture
def recorded(monkeypatch):
    """Fake `ray` and `ray.serve` modules that record the calls Server.shutdown makes."""
    calls = []
    serve = types.SimpleNamespace(shutdown=lambda: calls.append("serve.shutdown"),
                                  delete=lambda name: calls.append(f"serve.delete {name}"))
    ray = types.ModuleType("ray")
    ray.serve, ray.shutdown = serve, lambda: calls.append("ray.shutdown")
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.serve", serve)
    return calls


@pytest.mark.parametrize("number, started_ray, expected", [
    (signal.SIGINT, True, [f"serve.delete {HEALTH_APP_NAME}", f"serve.delete {APP_NAME}", "ray.shutdown"]),
    (signal.SIGTERM, True, ["ray.shutdown"]),
    # a cluster it joined: only its applications
    (signal.SIGINT, False, [f"serve.delete {HEALTH_APP_NAME}", f"serve.delete {APP_NAME}"]),
    (signal.SIGTERM, False, [f"serve.delete {HEALTH_APP_NAME}", f"serve.delete {APP_NAME}"]),
])
def test_each_signal_stops_serving_as_documented(recorded, number, started_ray, expected):
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    timer = threading.Timer(0.2, os.kill, (os.getpid(), number))
    timer.start()
    try:
        assert Server("http://127.0.0.1:1", started_ray).wait() == number
    finally:
        timer.cancel()
    assert recorded == expected
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_shutdown_is_idempotent(recorded):
    server = Server("http://127.0.0.1:1", started_ray=True)
    server.shutdown(drain=False)
    server.shutdown()
    assert recorded == ["ray.shutdown"]


def test_a_start_that_fails_before_serve_runs_stops_ray_and_keeps_its_own_error(monkeypatch):
    """Found on the H200: more replicas than GPUs is refused before serve.start, and the clean-up's
    serve.delete then raised "There is no Serve instance running" in place of the ServingConfigError."""
    import ray
    from ray import serve
    from ray.serve.exceptions import RayServeException

    from aotcuda.serving.server import Server

    stopped = []

    def no_serve_instance(name):
        raise RayServeException("There is no Serve instance running on this Ray cluster.")

    monkeypatch.setattr(serve, "delete", no_serve_instance)
    monkeypatch.setattr(ray, "shutdown", lambda: stopped.append(True))
    Server("", started_ray=True).shutdown()
    assert stopped == [True]


def test_ray_interrupting_the_main_thread_during_the_stop_is_not_an_abort(monkeypatch):
    """Found by a new user: Ctrl-C in a terminal (SIGINT to the process group) ended `aotcuda serve` with
    "Aborted!" and exit 1: Ray's GCS and raylet got the signal too, and Ray's driver interrupted the main
    thread (_thread.interrupt_main) while Serve was being stopped, after wait() had put the default handler
    back. The stop now runs under wait()'s own handlers."""
    import _thread
    import os
    import signal
    import threading

    import ray
    from ray import serve

    from aotcuda.serving.server import Server

    stopped = []
    monkeypatch.setattr(serve, "delete", lambda name: _thread.interrupt_main())  # as Ray's driver does
    monkeypatch.setattr(ray, "shutdown", lambda: stopped.append(True))
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    assert Server("", started_ray=True).wait() == signal.SIGINT
    assert stopped == [True]


def test_sigterm_while_the_replicas_start_stops_cleanly_not_with_rays_abort(monkeypatch):
    """A new user's orchestrator sent SIGTERM as soon as /healthz answered, before `aotcuda serve` printed its
    "serving" line: the handler ray.init installs in the driver dumped a stack and aborted (exit -6). From
    ray.init on, SIGTERM raises StopRequested; the command stops Serve and Ray and says so, exit 0."""
    from click.testing import CliRunner

    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command
    from aotcuda.serving.server import StopRequested, _stop_on_sigterm

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    try:
        _stop_on_sigterm()
        with pytest.raises(StopRequested) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # the handler runs at the next bytecode boundary
                pass
        assert caught.value.signal == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGHUP, before[1])  # _stop_on_sigterm takes SIGHUP too

    def starting(path, options):
        raise StopRequested(signal.SIGTERM)

    monkeypatch.setattr(server_module, "serve_package", starting)
    result = CliRunner().invoke(serve_command, [__file__])
    assert result.exit_code == 0 and "stopped (SIGTERM) while starting: Serve and Ray are down" in result.output

    stops = []

    class Started:
        url = "http://127.0.0.1:1"

        def wait(self, say_start_failure=None):
            raise StopRequested(signal.SIGTERM)  # the signal came before wait() took it over

        def shutdown(self, drain=True):
            stops.append(drain)

    monkeypatch.setattr(server_module, "serve_package", lambda path, options: Started())
    result = CliRunner().invoke(serve_command, [__file__])
    assert result.exit_code == 0 and "stopped (SIGTERM): Serve and Ray are down" in result.output
    assert stops == [False]



@pytest.fixture
def serve_calls(monkeypatch):
    """serve_package on a Ray that is already there, with Ray Serve's calls recorded and the package's check
    skipped: [call, ...], where serve.run_many records its targets and the levels of Ray's loggers then."""
    import logging

    import ray
    from ray import serve

    import aotcuda.serving.server as server_module

    calls = []

    def run_many(targets, **options):
        levels = {name: logging.getLevelName(logging.getLogger(name).level)
                  for name in server_module.QUIETED_RAY_LOGGERS}
        calls.append(("serve.run_many", [(target.name, target.route_prefix) for target in targets], levels))

    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # nothing starts
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(serve, "start", lambda **options: calls.append("serve.start"))
    monkeypatch.setattr(serve, "run", lambda target, **options: calls.append(f"serve.run {options['name']}"))
    monkeypatch.setattr(serve, "run_many", run_many)
    monkeypatch.setattr(server_module, "replica_actor_options", lambda path, options: {"num_cpus": 1, "num_gpus": 0})
    monkeypatch.setattr(server_module, "_stop_on_sigterm", lambda held=None: None)
    return calls


def _stand_in_package(folder) -> str:
    """A small zip for serve_package's SHA-256 (which checks an archive's layout first); the package's own check is
    skipped by serve_calls."""
    import zipfile

    path = folder / "stand_in.pt2"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", b"a stand-in package")
    return str(path)


def test_both_applications_are_deployed_at_once_so_the_serving_line_is_not_late(serve_calls, tmp_path):
    """A new user saw `aotcuda serve` print its "serving" line ~3 s after /healthz answered ok and /predict
    served, and a Ctrl-C in between said "before serving". The program's application is mounted at "/", so its
    replicas answer both routes as soon as they run; serve_package then started the health check's application
    in a second serve.run and waited for its replica. Now one run_many deploys both, and Serve waits for them
    together (measured with Ray: the line came 3.1 s after the first ok before, 0.7 s after)."""
    from aotcuda.serving.server import ServeOptions, serve_package

    server = serve_package(_stand_in_package(tmp_path), ServeOptions(port=18799))
    assert server.url == "http://127.0.0.1:18799"
    assert [call[:2] if isinstance(call, tuple) else call for call in serve_calls] == \
        ["serve.start", ("serve.run_many", [(APP_NAME, "/"), (HEALTH_APP_NAME, "/healthz")])]


def test_serve_package_keeps_rays_info_lines_and_token_notice_out_as_the_command_does(serve_calls, tmp_path):
    """A new user's serve_package printed Serve's INFO lines and Ray's "Set RAY_AUTH_MODE=disabled to opt out"
    (which docs/serving.md says not to do), where `aotcuda serve` printed none: only the command quieted them.
    Now serve_package (and Server.shutdown) do, while they run; the levels the user had come back after."""
    import logging

    from aotcuda.serving.server import QUIETED_RAY_LOGGERS, ServeOptions, serve_package

    serve_logger = logging.getLogger("ray.serve")
    before = {name: logging.getLogger(name).level for name in QUIETED_RAY_LOGGERS}
    serve_logger.setLevel(logging.INFO)  # as importing ray.serve leaves it
    try:
        serve_package(_stand_in_package(tmp_path), ServeOptions(port=18799))
        assert serve_calls[-1][2] == QUIETED_RAY_LOGGERS  # {"ray.serve": "WARNING", ...: "ERROR"}
        assert serve_logger.level == logging.INFO
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


REPLICA_STOPPED_BY_SERVE = """
import os, sys
from ray import serve
from aotcuda.serving import deployment

serve.get_replica_context = lambda: object()  # as in a replica of Ray Serve
replica = deployment.ProgramReplica(sys.argv[1])
print(sorted(name for name in os.listdir(os.environ["TMPDIR"]) if name.startswith("aotcuda")), flush=True)
replica.__del__()  # Serve's graceful stop
os._exit(0)  # then Serve kills the process: no exit handler runs
"""


def test_a_replica_stopped_gracefully_leaves_no_folder_in_tmpdir(served_block, tmp_path):
    """A new user's report: every stop of `aotcuda serve` left folders as large as the package in TMPDIR (a clean
    Ctrl-C one `aotcuda_libraries_*`: the replica's pinned library), until a later load there swept them. Serve
    calls the replica's __del__, then kills its process, so its exit handlers never removed the pinned folder."""
    import subprocess

    temp = tmp_path / "tmp"
    temp.mkdir()
    environment = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", REPLICA_STOPPED_BY_SERVE, served_block[0]], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = done.stdout.strip().splitlines()[-1]
    assert "aotcuda_libraries_" in loaded and "'aotcuda-" in loaded, loaded  # what the load made
    assert sorted(os.listdir(temp)) == [], "left in TMPDIR after the stop"


@pytest.fixture
def hang_up_caught():
    """A SIGHUP handler that does nothing, for the test's length: where serving does not take SIGHUP over (the code
    before), the hang-up must fail the test, not end the test run."""
    before = signal.signal(signal.SIGHUP, lambda *_: None)
    yield
    signal.signal(signal.SIGHUP, before)


@pytest.mark.parametrize("started_ray, expected", [
    (True, ["ray.shutdown"]),
    (False, [f"serve.delete {HEALTH_APP_NAME}", f"serve.delete {APP_NAME}"]),
])
def test_a_hang_up_stops_serving_at_once_as_sigterm_does(recorded, hang_up_caught, started_ray, expected):
    """SIGHUP (the terminal that ran `aotcuda serve` closed, or another process sent it: logrotate, supervisors) took
    its default action: serve ended with no stop and no line, and Ray's dashboard and runtime-env agents (~220 MB)
    stayed, orphaned, for about a minute. It stops as SIGTERM does: Ray at once (the hang-up reaches Ray's processes in the
    group too)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    hang_up = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGHUP))
    fallback = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))  # a wait that did not take SIGHUP ends here
    hang_up.start()
    fallback.start()
    try:
        assert Server("http://127.0.0.1:1", started_ray).wait() == signal.SIGHUP
    finally:
        hang_up.cancel()
        fallback.cancel()
    assert recorded == expected
    assert {sig: signal.getsignal(sig) for sig in before} == before


# The other signals whose default action ends a process, which a person, a supervisor or a limit sends to ask for an end
# (the serving breaker, 2026-12-06: each took its default action, as SIGHUP did).
OTHER_ENDING_SIGNALS = [getattr(signal, name) for name in ("SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPWR",
                                                            "SIGXCPU") if hasattr(signal, name)]


@pytest.fixture
def ending_signals_caught():
    """Handlers that do nothing for the test's length: where serving does not take a signal over (the code before),
    it must fail the test, not end the test run (SIGQUIT would dump a core)."""
    before = {number: signal.signal(number, lambda *_: None) for number in OTHER_ENDING_SIGNALS}
    yield
    for number, handler in before.items():
        signal.signal(number, handler)


@pytest.mark.parametrize("number", OTHER_ENDING_SIGNALS, ids=lambda number: signal.Signals(number).name)
def test_every_signal_whose_default_ends_the_process_stops_serving_at_once(recorded, ending_signals_caught, number):
    """Measured on a one-replica `aotcuda serve` (kill -USR1, -USR2, -QUIT, -ALRM to its pid): each ended it at once
    (exit -10, -12, -3, -14) with no stop and no line, and Ray's dashboard and runtime-env agents were left in its
    group, orphaned. Each now stops as SIGTERM does: Ray at once."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, number)}
    sent = threading.Timer(0.2, os.kill, (os.getpid(), number))
    fallback = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))  # a wait that did not take it ends here
    sent.start()
    fallback.start()
    try:
        assert Server("http://127.0.0.1:1", started_ray=True).wait() == number
    finally:
        sent.cancel()
        fallback.cancel()
    assert recorded == ["ray.shutdown"]
    assert {sig: signal.getsignal(sig) for sig in before} == before


@pytest.mark.parametrize("number", [signal.SIGHUP, *OTHER_ENDING_SIGNALS],
                         ids=lambda number: signal.Signals(number).name)
def test_those_signals_while_the_replicas_start_stop_at_once_with_their_name(monkeypatch, hang_up_caught,
                                                                             ending_signals_caught, number):
    """SIGHUP and the other ending signals, from ray.init on (StopRequested) and before Server.wait took them over:
    the command stops Serve and Ray at once and names the signal, exit 0 (main: no StopRequested; a drain)."""
    from click.testing import CliRunner

    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command
    from aotcuda.serving.server import StopRequested, _stop_on_sigterm

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, *OTHER_ENDING_SIGNALS)}
    try:
        _stop_on_sigterm()
        with pytest.raises(StopRequested) as caught:
            os.kill(os.getpid(), number)
            for _ in range(100):  # the handler runs at the next bytecode boundary
                pass
        assert caught.value.signal == number
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)

    stops = []

    class Started:
        url = "http://127.0.0.1:1"

        def wait(self, say_start_failure=None):
            raise StopRequested(number)  # the signal came before wait() took it over

        def shutdown(self, drain=True):
            stops.append(drain)

    monkeypatch.setattr(server_module, "serve_package", lambda path, options: Started())
    result = CliRunner().invoke(serve_command, [__file__])
    name = signal.Signals(number).name
    assert result.exit_code == 0 and f"stopped ({name}): Serve and Ray are down" in result.output
    assert stops == [False]


def test_sigpipe_and_the_faults_are_left_to_their_own_handling():
    """SIGPIPE is ignored by Python (a write to a closed pipe fails with EPIPE, which command._say handles), and a
    fault's handler would run only after the instruction that faults again: neither is taken over."""
    from aotcuda.serving.server import STOP_AT_ONCE

    left = {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
            signal.SIGABRT, signal.SIGPROF, signal.SIGVTALRM}
    assert not left & set(STOP_AT_ONCE)
    assert {signal.SIGTERM, signal.SIGHUP, *OTHER_ENDING_SIGNALS} == set(STOP_AT_ONCE)


@pytest.fixture
def stop_handlers_kept():
    """The handlers of SIGINT and STOP_AT_ONCE put back after the test, whatever it installed."""
    from aotcuda.serving.server import STOP_AT_ONCE

    before = {number: signal.getsignal(number) for number in (signal.SIGINT, *STOP_AT_ONCE)}
    yield
    for number, handler in before.items():
        signal.signal(number, handler)


def test_signals_ignored_when_serve_started_stay_ignored(recorded, stop_handlers_kept):
    """`nohup aotcuda serve P &` then a hang-up (the terminal closed; breaker-serving, on a one-replica serve):
    "stopped (SIGHUP): Serve and Ray are down", where nohup had asked that SIGHUP be ignored; a shell's `&` ignores
    SIGINT and SIGQUIT for its background jobs the same way (Python keeps an ignored SIGINT ignored). A signal
    ignored when serving starts stays ignored: from ray.init on (_stop_on_sigterm) and in Server.wait; SIGTERM still
    stops."""
    from aotcuda.serving.server import _stop_on_sigterm

    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_IGN)
    _stop_on_sigterm()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN
    sent = [threading.Timer(0.2, os.kill, (os.getpid(), number)) for number in (signal.SIGHUP, signal.SIGINT)]
    stop = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    for timer in (*sent, stop):
        timer.start()
    try:
        assert Server("http://127.0.0.1:1", started_ray=True).wait() == signal.SIGTERM
    finally:
        for timer in (*sent, stop):
            timer.cancel()
    assert recorded == ["ray.shutdown"]
    assert all(signal.getsignal(number) is signal.SIG_IGN for number in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT))


@pytest.fixture
def ray_started_by_serve(monkeypatch, tmp_path):
    """serve_package as it starts a local Ray, with ray.init, Serve's calls and ray.shutdown recorded (the package's
    check, the port's and Ray's folder skipped): the calls, and where a test puts what ray.init and serve.run_many do
    (``calls.during_init``, ``calls.during_run``)."""
    import ray
    from ray import serve

    import aotcuda.serving.server as server_module

    calls = types.SimpleNamespace(made=[], during_init=lambda: None, during_run=lambda: None)

    def init(init, overrides):
        calls.during_init()
        calls.made.append("ray.init")

    def run_many(targets, **options):
        calls.during_run()
        calls.made.append("serve.run_many")

    monkeypatch.setattr(os, "environ", dict(os.environ))  # serve_package sets Ray's and the proxy's variables
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.made.append("ray.shutdown"))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(serve, "start", lambda **options: calls.made.append("serve.start"))
    monkeypatch.setattr(serve, "delete", lambda name: calls.made.append(f"serve.delete {name}"))
    monkeypatch.setattr(serve, "run_many", run_many)
    monkeypatch.setattr(server_module, "_init_ray", init)
    monkeypatch.setattr(server_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(server_module, "private_ray_folder", lambda: str(tmp_path / "ray"))
    monkeypatch.setattr(server_module, "replica_actor_options", lambda path, options: {"num_cpus": 1, "num_gpus": 0})
    calls.package = _stand_in_package(tmp_path)
    return calls


def _signalled(number):
    os.kill(os.getpid(), number)
    for _ in range(1000):  # the handler runs at the next bytecode boundary
        pass


def test_a_stop_asked_while_ray_init_runs_stops_serve_and_ray_once_it_returns(ray_started_by_serve,
                                                                              stop_handlers_kept):
    """ray.init sets a SIGTERM handler that raises SystemExit wherever the main thread is (ray/_private/worker.py).
    Measured on `aotcuda serve` of a Linear package (breaker-serving): SIGTERM 8 s in was raised inside logging's
    at-fork lock release ("Exception ignored ... SystemExit: 15") and serve went on to serve; 10 s in, serve ended
    with exit 15, no "stopped" line and no ray.shutdown, Ray's dashboard and runtime-env agents left orphaned. Now
    the stops that come while ray.init runs are held (Ray's handler never set) and acted on once it returns: Ray is
    stopped at once, Serve never started."""
    from aotcuda.serving.server import StopRequested, serve_package
    from ray._private import utils as ray_utils

    rays_own = ray_utils.set_sigterm_handler

    def rays_init():  # what ray.init does first, then a SIGTERM while it starts Ray's processes
        ray_utils.set_sigterm_handler(lambda number, _frame: sys.exit(number))
        _signalled(signal.SIGTERM)
        _signalled(signal.SIGUSR1)

    ray_started_by_serve.during_init = rays_init
    with pytest.raises(StopRequested) as stopped:
        serve_package(ray_started_by_serve.package)
    assert stopped.value.signal == signal.SIGTERM
    assert ray_started_by_serve.made == ["ray.init", "ray.shutdown"]
    assert ray_utils.set_sigterm_handler is rays_own  # Ray's own again, for a caller that starts Ray itself
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)  # serve's, to the end


def test_a_stop_whose_stop_requested_python_ignored_still_stops_serving(ray_started_by_serve, stop_handlers_kept):
    """A StopRequested raised where Python ignores exceptions (a __del__, a callback of os.register_at_fork) is printed
    as "Exception ignored" and lost: serve went on as if no signal had come (breaker-serving, SIGTERM during ray.init,
    before its handler was held). serve_package's handlers also record each stop: one lost while the replicas start
    is raised when serve.run_many returns, and Server.wait returns at once for one lost after."""
    from aotcuda.serving.server import StopRequested, serve_package

    class StoppedInItsFinalizer:
        def __del__(self):
            _signalled(signal.SIGTERM)

    ray_started_by_serve.during_run = lambda: StoppedInItsFinalizer()  # made and dropped: __del__ runs at once
    with pytest.raises(StopRequested) as stopped:
        serve_package(ray_started_by_serve.package)
    assert stopped.value.signal == signal.SIGTERM
    assert ray_started_by_serve.made == ["ray.init", "serve.start", "serve.run_many", "ray.shutdown"]

    ray_started_by_serve.made.clear()
    ray_started_by_serve.during_run = lambda: None
    server = serve_package(ray_started_by_serve.package)
    StoppedInItsFinalizer()  # after serve_package returned, before wait() took the signals over
    fallback = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))  # a wait that missed it ends here
    fallback.start()
    try:
        assert server.wait() == signal.SIGTERM
    finally:
        fallback.cancel()
    assert ray_started_by_serve.made == ["ray.init", "serve.start", "serve.run_many", "ray.shutdown"]
