"""`aotcuda serve` as a user runs it: a process that serves until Ctrl-C, then shuts Ray down cleanly."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

from serving_cases import RAY_INIT_REACHED, SEQ, serve_without_ray, what_serve_hands_ray_init

serving = pytest.importorskip("aotcuda.serving")

PORT = 18766  # 187xx: the serving tests' ports on a shared machine


def test_aotcuda_serve_answers_then_stops_cleanly_on_ctrl_c(served_block, tmp_path):
    path, model = served_block
    env = {key: value for key, value in os.environ.items() if key != "AOTI_RUNTIME_CHECK_INPUTS"}  # see
    env["RAY_USAGE_STATS_ENABLED"] = "0"                    # serving_cases.server_environment
    command = [sys.executable, "-m", "aotcuda", "serve", path, "--replicas", "1", "--port", str(PORT),
               "--max-batch-size", "4", "--batch-wait-ms", "2"]
    log = open(tmp_path / "serve.log", "w+")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            log.seek(0)
            if "serving " in log.read():  # printed once serve_package returned: Ctrl-C now means "stop"
                break
            time.sleep(1)
        else:
            log.seek(0)
            pytest.fail(f"aotcuda serve did not become healthy (exit {process.poll()}):\n{log.read()[-3000:]}")
        assert urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=10).status == 200
        x = torch.randn(3, SEQ, 256)
        (y,) = serving.Client(f"http://127.0.0.1:{PORT}", retries=0).predict({"x": x})
        with torch.no_grad():
            expected = model(x)
        assert ((y - expected).norm() / expected.norm()).item() < 1e-5
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
        log.seek(0)
        assert code == 0, log.read()[-4000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log.seek(0)
    output = log.read()
    assert f"serving {path} at http://127.0.0.1:{PORT}" in output and "stopped" in output
    assert "Traceback" not in output, output[-3000:]
    # Ray's noise on a clean start and stop: a raylet line about Serve's controller, an INFO line that reads
    # as if --port were ignored, Ray's colour escapes
    for noise in ("graceful_shutdown failed", "will not be applied", "\x1b[", "(raylet)", "Token authentication"):
        assert noise not in output, f"{noise!r} in the output of a clean run:\n{output[-3000:]}"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=2)


def test_serving_a_program_that_cannot_batch_with_batching_fails_at_once_with_the_reason(served_block, tmp_path):
    """Checked from the package's signature before Ray starts: no replica retries, no wait. (The package
    is the served block with its signature's batch dim made static: only the signature is read.)"""
    from aotcuda.errors import ServingConfigError
    from aotcuda.package_format import write_signature
    from aotcuda.runtime.package import read_signature

    path = str(tmp_path / "static.pt2")
    shutil.copy(served_block[0], path)
    signature = read_signature(path)
    for spec in signature["inputs"] + signature["outputs"]:
        spec["shape"][0] = 2
    write_signature(path, signature)
    # before Ray starts: read from what the command did (serve_without_ray); the time only bounds a slow check (a
    # loaded CI machine takes tens of seconds to start a Python that imports torch, so the bound is no measure of it)
    started = time.monotonic()
    result = serve_without_ray(path, "--max-batch-size", "4", "--port", str(PORT + 1), timeout=120)
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert "cannot be batched" in result.stderr and "max batch size 1" in result.stderr
    assert "hint: on the command line, leave out --max-batch-size" in result.stderr
    assert "hint: to batch, lower it again with `aotcuda lower ... --dynamic NAME:0:1:MAX:batch`" in result.stderr
    assert time.monotonic() - started < 90


def test_cuda_graphs_for_a_cpu_package_are_refused_before_ray_starts(served_block):
    """A replica would fail only after Ray started, with Ray's generic "Deploying application failed"."""
    from aotcuda.errors import ServingConfigError
    from aotcuda.serving.server import ServeOptions, check_package

    with pytest.raises(ServingConfigError, match="cuda_graphs=True needs a CUDA package.*lowered for cpu"):
        check_package(served_block[0], ServeOptions(cuda_graphs=True))
    assert check_package(served_block[0], ServeOptions()) == "cpu"


def test_a_port_in_use_is_named_in_our_words_before_ray_starts(served_block):
    """Before: Ray started, its proxy failed to bind, and the command printed
    'error: RayTaskError(RuntimeError): \\x1b[36mray::ProxyActor.ready()...' after ~30 s."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        started = time.monotonic()  # Ray's start is read from what the command did, as above, not from < 30 s
        result = serve_without_ray(served_block[0], "--port", str(port), timeout=120)
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert f"port {port} on 127.0.0.1 is in use; choose another with --port" in result.stderr
    assert "Ray" not in result.stderr and "\x1b" not in result.stderr and "\\x1b" not in result.stderr
    assert time.monotonic() - started < 90


# `aotcuda serve` with a listener bound the moment its port check has passed: another process that takes the port
# in the seconds Ray takes to start (the check cannot hold it for Ray's proxy, another process)
_TAKEN_AFTER_THE_CHECK = """
import runpy, socket, sys
from aotcuda.serving import server
checked, taken = server.check_port_free, []
def check_then_taken(host, port):
    checked(host, port)
    squatter = socket.socket()
    squatter.bind((host, port))
    squatter.listen()
    taken.append(squatter)
server.check_port_free = check_then_taken
sys.argv = ["aotcuda", *sys.argv[1:]]
runpy.run_module("aotcuda", run_name="__main__")
"""


def test_a_port_taken_while_ray_starts_is_named_in_our_words(served_block):
    """Before: the port passed its check, another process listened there while Ray started, and the command ended
    21 s later with 'error: RayTaskError(RuntimeError): ray::ProxyActor.ready() ... Failed to bind to address', the
    message the check was made to replace (breakproc, 2026-12-07)."""
    port = 18650  # breakproc's range on a shared machine
    result = subprocess.run([sys.executable, "-c", _TAKEN_AFTER_THE_CHECK, "serve", served_block[0], "--port",
                             str(port)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 1, result.stderr[-2000:]
    assert (f"port {port} on 127.0.0.1 was free when serve checked it, but another process started listening there "
            "while Ray started" in result.stderr), result.stderr[-2000:]
    assert "RayTaskError" not in result.stderr and "\x1b" not in result.stderr
    with socket.socket() as probe:  # Ray was stopped: nothing of it holds the port or runs on
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def test_a_ray_address_nothing_answers_at_is_named_in_our_words_before_ray_init(served_block):
    """Before: ``RAY_ADDRESS=notahost:1 aotcuda serve P`` waited on ray.init's own retries, printing nothing of use,
    and was still waiting at 90 s (the breaker's trial)."""
    with socket.socket() as closed:  # a port of this machine that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()  # before ray.init: read from what the command did, as above
    result = serve_without_ray(served_block[0], "--port", str(PORT), timeout=120,
                               env={**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}"})
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert f"RAY_ADDRESS='127.0.0.1:{port}' names a Ray cluster that does not answer" in result.stderr
    assert "unset it to serve on a Ray that aotcuda serve starts here" in result.stderr
    assert time.monotonic() - started < 90


@pytest.mark.parametrize("address, named", [
    ("127.0.0.1:6379", ("127.0.0.1", 6379)), ("ray://head.example:10001", ("head.example", 10001)),
    ("[::1]:6379", ("::1", 6379)), (" host:1 ", ("host", 1)), ("auto", None), ("local", None),
    ("anyscale://cluster", None), ("host", None), ("host:port", None), (":6379", None)])
def test_the_ray_addresses_checked_are_those_naming_a_host_and_port(address, named):
    from aotcuda.serving.cluster_address import host_and_port

    assert host_and_port(address) == named


def test_a_ray_address_that_answers_or_names_no_port_is_left_to_ray():
    from aotcuda.serving.cluster_address import check_reachable

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_reachable(f"127.0.0.1:{listening.getsockname()[1]}")
    check_reachable("auto")


def test_a_ray_address_whose_host_cannot_be_resolved_is_named():
    from aotcuda.errors import ServingConfigError
    from aotcuda.serving.cluster_address import check_reachable

    unresolved = r"RAY_ADDRESS='no-such-host\.invalid:6379'.*(cannot be resolved|was not resolved)"
    with pytest.raises(ServingConfigError, match=unresolved):
        check_reachable("no-such-host.invalid:6379", timeout_s=20)


def test_foreign_error_text_is_shown_without_its_colour_escapes(capsys):
    from aotcuda.cli import _clean_errors

    def fails():
        raise RuntimeError("\x1b[36mray::ProxyActor.ready()\x1b[39m (pid=1) failed: \x1b[1mbind\x1b[0m")

    with pytest.raises(SystemExit):
        _clean_errors(fails)()
    shown = capsys.readouterr().err
    assert "RuntimeError: ray::ProxyActor.ready() (pid=1) failed: bind" in shown
    assert "\x1b" not in shown and "\\x1b" not in shown


def test_a_program_that_writes_its_state_is_served_unbatched_by_one_replica(served_block, tmp_path):
    """A new user served the docs' Rotate example (its angle advances at every call) with two replicas and got
    0.5, 0.5, 1.0, 1.0, ... for eager's 0.5, 1.0, 1.5, ...; a batch would advance it once for all its requests.
    lower() records the state a program writes; serving refuses both, before Ray starts, saying why."""
    from aotcuda.errors import ServingConfigError
    from aotcuda.package_format import write_signature
    from aotcuda.runtime.package import read_signature
    from aotcuda.serving.server import ServeOptions, check_package

    stateful = tmp_path / "stateful.pt2"
    shutil.copy(served_block[0], stateful)
    write_signature(stateful, {**read_signature(str(stateful)), "state_written": ["angle"]})
    for options, says in ((ServeOptions(max_batch_size=4), "its state would advance once a batch"),
                          (ServeOptions(replicas=2), "an answer would depend on the replica")):
        with pytest.raises(ServingConfigError, match=f"writes its state at every call \\('angle'\\).*{says}"):
            check_package(str(stateful), options)
    assert check_package(str(stateful), ServeOptions()) == "cpu"
    assert check_package(served_block[0], ServeOptions(replicas=2, max_batch_size=4)) == "cpu"  # no state


def test_batching_a_state_writing_program_without_a_batch_dim_names_the_state_not_a_relowering(served_block,
                                                                                               tmp_path):
    """docs/usage.md's Rotate served with --max-batch-size 2: its input angle has no batch dim, and the refusal
    said "not every input and output has the same dynamic dim 0" with the hint to lower it again with a batch
    dim, which cannot help (a program that writes its state is never batched). Now the state comes first."""
    from click.testing import CliRunner

    from aotcuda.cli import main
    from aotcuda.package_format import write_signature
    from aotcuda.runtime.package import read_signature

    stateful = tmp_path / "rotate_like.pt2"
    shutil.copy(served_block[0], stateful)
    signature = read_signature(str(stateful))
    signature["inputs"][0]["shape"][0] = 2  # an input without the batch dim, as Rotate's angle
    write_signature(stateful, {**signature, "state_written": ["state"]})
    result = CliRunner().invoke(main, ["serve", str(stateful), "--max-batch-size", "2", "--port", str(PORT + 2)])
    assert result.exit_code == 1, result.output
    assert "writes its state at every call ('state')" in result.output and "never batched" in result.output
    assert "dim 0" not in result.output and "lower it again" not in result.output
    assert "hint: on the command line, leave out --max-batch-size" in result.output


def test_serving_md_lists_every_option_of_aotcuda_serve():
    """Every flag of `aotcuda serve` has a row in docs/serving.md's option table (--allow-unchecked-indices was
    added with its refusal)."""
    from pathlib import Path

    import click

    from aotcuda.serving.command import serve_command

    table = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text().split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `--")]
    for param in serve_command.params:
        if isinstance(param, click.Option):
            assert any(f"`{param.opts[0]}" in row for row in rows), f"docs/serving.md has no row for {param.opts[0]}"


def test_serving_md_lists_every_serve_options_field_from_python():
    """A new user found docs/serving.md's "From Python" showing two ServeOptions fields of eighteen."""
    import dataclasses
    from pathlib import Path

    from aotcuda.serving.server import ServeOptions

    text = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    section = text[text.index("## From Python"):].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for field in dataclasses.fields(ServeOptions):
        assert any(f"`{field.name}`" in row.split("|")[1] for row in rows), f"no row for ServeOptions.{field.name}"


def test_a_replica_loads_the_package_serve_checked_or_refuses(served_block, tmp_path, monkeypatch):
    """Replicas load the package by its path, each when it starts: a second replica, one that replaces a replica
    that died or ran past its deadline, one on another node. Another process that put another file at the path
    meanwhile (or a node holding another copy) made those replicas serve another model beside the first ones'
    (review 12, the file-system breaker). serve now reads the package's SHA-256 before its check and binds it to
    the replicas, and each refuses a file of other bytes before anything of it is used."""
    import zipfile

    from aotcuda.errors import PackageError
    from aotcuda.runtime.package_checks import package_sha256
    from aotcuda.serving import server
    from aotcuda.serving.deployment import ProgramReplica

    path = tmp_path / "served.pt2"
    shutil.copy(served_block[0], path)
    digest = package_sha256(path)
    monkeypatch.setattr(server, "_bind", lambda path, options, actor_options, package_sha256: package_sha256)
    assert server.build_app(str(path)) == digest  # what serve binds to every replica
    x = torch.randn(2, SEQ, 256)
    expected = served_block[1](x)
    assert torch.allclose(ProgramReplica(str(path), package_sha256=digest).program(x), expected, atol=1e-4)

    other = tmp_path / "other.pt2"  # the same model with one more entry: other bytes, as any other package
    with zipfile.ZipFile(served_block[0]) as source, zipfile.ZipFile(other, "w") as target:
        for info in source.infolist():
            target.writestr(info, source.read(info))
        target.writestr(f"{source.namelist()[0].split('/')[0]}/extra.txt", b"x")
    os.replace(other, path)  # as another process would, after serve's check
    with pytest.raises(PackageError, match=r"served.pt2' is not the package that was checked when serving started: "
                                           r"its SHA-256 is [0-9a-f]{16}\.\.\., the one checked [0-9a-f]{16}\.\.\. "
                                           r"\(the file was replaced or changed since.*nothing was loaded"):
        ProgramReplica(str(path), package_sha256=digest)
    ProgramReplica(str(path))  # without a digest (a user's own deployment): what is at the path


BROKEN_STDOUT_SERVE = """
import signal, sys
from aotcuda.serving import server

class Served:  # serve_package's Server, as it is once the replicas run; wait() returns at SIGTERM
    url = "http://127.0.0.1:1"
    def wait(self, say_start_failure=None):
        print("served", file=sys.stderr)
        return signal.SIGTERM

server.serve_package = lambda package, options: Served()
from aotcuda.cli import main
main(["serve", sys.argv[1]])
"""


def test_serve_goes_on_when_its_stdout_is_a_pipe_nobody_reads(served_block):
    """Review 12 (the file-system breaker): `aotcuda serve pkg.pt2 | true` (a log collector that died, a journal that
    restarted) ended right after Ray had started: its "serving ..." line raised `error: BrokenPipeError: [Errno 32]
    Broken pipe`, and the process exited (Ray shut down at exit). Status lines that cannot be written are dropped now;
    the server serves until it is stopped, and stops cleanly."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: every write gets EPIPE (Python ignores SIGPIPE)
    try:
        done = subprocess.run([sys.executable, "-c", BROKEN_STDOUT_SERVE, served_block[0]], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "served" in done.stderr and "error" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


RAY_TEMP_DIR_CHILD = what_serve_hands_ray_init('{**init, **(overrides or {})}.get("_temp_dir")', 18858)


@pytest.mark.parametrize("overrides", [{}, {"_temp_dir": "/somewhere/chosen"}])
def test_the_ray_serve_starts_keeps_its_files_where_no_other_user_reaches_them(served_block, overrides):
    """Review 12 (the file-system breaker): a local Ray kept its files in /tmp/ray, which Ray opens to every user
    (chmod 0777, not sticky, each session's folders too): during an `aotcuda serve`, uid 65534 moved the live session's
    `sockets` folder (the object store's socket, which new workers connect to and read pickles from) and made its own,
    and the replica Ray started after one died never answered. Now the instance gets `ray` inside a new 0700 folder;
    a `_temp_dir` the caller passes is theirs."""
    import json
    import stat

    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}  # a fresh server's
    done = subprocess.run([sys.executable, "-c", RAY_TEMP_DIR_CHILD, served_block[0], json.dumps(overrides)],
                          capture_output=True, text=True, timeout=120, env={**env, "RAY_ADDRESS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    folder = json.loads(done.stdout.strip().splitlines()[-1])
    if overrides:
        assert folder == "/somewhere/chosen"
        return
    parent = os.path.dirname(folder)
    info = os.lstat(parent)
    assert os.path.basename(folder) == "ray" and os.path.basename(parent).startswith("aotcuda_ray_")
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
    token = os.path.join(parent, "auth_token")  # the instance's own Ray token, for the dashboard (serving/ray_token.py)
    assert stat.S_IMODE(os.lstat(token).st_mode) == 0o600
    os.remove(token)
    os.rmdir(parent)


def test_options_that_do_not_fit_are_named_by_the_flags_the_user_wrote(monkeypatch):
    """A new user's report: `aotcuda serve` said "body_timeout_s must be a finite number" and "max_pending_bytes
    (500000) must be at least max_request_bytes", names they never wrote. ServeOptions from Python keeps its fields."""
    from click.testing import CliRunner

    from aotcuda.serving import server as server_module
    from aotcuda.serving.command import serve_command

    monkeypatch.setattr(server_module, "serve_package", lambda *args: pytest.fail("the options were taken"))
    for flags, says in (
            (["--body-timeout-s", "nan"], "--body-timeout-s must be a finite number ≥ 0.1, got nan"),
            (["--request-timeout-s", "inf", "--run-timeout-s", "0"], "--request-timeout-s must be a finite number"),
            (["--max-request-bytes", "1000000", "--max-pending-bytes", "500000"],
             "--max-pending-bytes (500000) must be at least --max-request-bytes (1000000)")):
        result = CliRunner().invoke(serve_command, [__file__, *flags])
        assert result.exit_code == 2 and says in result.output, result.output
        assert "_timeout_s" not in result.output and "_bytes" not in result.output, result.output
    with pytest.raises(ValueError, match=r"^max_pending_bytes \(500000\) must be at least max_request_bytes"):
        server_module.ServeOptions(max_request_bytes=1_000_000, max_pending_bytes=500_000)


def test_a_batch_wait_no_request_could_be_answered_within_is_refused(monkeypatch):
    """--max-batch-size 4 --batch-wait-ms 1e9 (or 1e300) was taken: a request alone in its batch waits that long for
    others before it runs, so Ray's proxy answered it 408 at --request-timeout-s, never run, while the server looked
    healthy. The wait and the run's deadline must now fit within the request's timeout when batching."""
    from click.testing import CliRunner

    from aotcuda.serving import server as server_module
    from aotcuda.serving.command import serve_command

    for options, says in ((dict(max_batch_size=4, batch_wait_ms=1e9), r"batch_wait_ms \(1e\+09 ms\) and run_timeout_s "
                           r"\(30 s\) must together be less than request_timeout_s \(60 s\)"),
                          (dict(max_batch_size=4, batch_wait_ms=1e300, run_timeout_s=None),
                           r"batch_wait_ms \(1e\+300 ms\) must be less than request_timeout_s \(60 s\)"),
                          (dict(max_batch_size=2, batch_wait_ms=30_000), r"must together be less than")):
        with pytest.raises(ValueError, match=says):
            server_module.ServeOptions(**options)
    assert server_module.ServeOptions(max_batch_size=4, batch_wait_ms=29_000).batch_wait_ms == 29_000
    assert server_module.ServeOptions(batch_wait_ms=1e9).max_batch_size == 1  # no batching: no wait
    monkeypatch.setattr(server_module, "serve_package", lambda *args: pytest.fail("the options were taken"))
    result = CliRunner().invoke(serve_command, [__file__, "--max-batch-size", "4", "--batch-wait-ms", "1e9"])
    assert result.exit_code == 2 and "--batch-wait-ms (1e+09 ms) and --run-timeout-s (30 s) must together be less " \
        "than --request-timeout-s (60 s)" in result.output, result.output


def test_byte_limits_the_proxys_environment_cannot_carry_are_refused():
    """The proxy reads --max-request-bytes and --max-pending-bytes from its environment as switches, which refuse an
    integer past what a float holds (tests/test_switches.py): such a value is refused before Ray starts."""
    from aotcuda.serving.server import ServeOptions

    for name in ("max_request_bytes", "max_pending_bytes"):
        with pytest.raises(ValueError, match=rf"{name} has 310 digits, past what the HTTP proxy's environment carries"):
            ServeOptions(**{name: 10 ** 309})
    assert ServeOptions(max_request_bytes=10 ** 300, max_pending_bytes=10 ** 300).max_request_bytes == 10 ** 300


def test_rays_folder_is_never_made_where_another_user_could_replace_it(tmp_path, monkeypatch):
    """Review 12 gave Ray `ray` inside a new 0700 folder, made in RAY_TMPDIR (or TMPDIR) whatever that is: in a
    folder others may write into that is not sticky, uid 65534 moved the 0700 folder away and made a 0777 one at its
    path (measured by the breaker, 2026-12-06), where Ray then makes its session and sockets. Such a folder is
    refused before anything starts, as extraction refuses it; AOTCUDA_TRUST_SHARED_FOLDERS=1 takes it."""
    from aotcuda.errors import ServingConfigError
    from aotcuda.serving.server import private_ray_folder

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, not sticky
    monkeypatch.setenv("RAY_TMPDIR", str(shared))
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    with pytest.raises(ServingConfigError, match=r"will not keep Ray's files in '.*shared': it is writable by other "
                                                 r"users and not sticky \(mode 0o777\), so another user could replace"):
        private_ray_folder()
    assert list(shared.iterdir()) == []  # nothing made there
    shared.chmod(0o1777)  # sticky, as /tmp: each user's entries stay their own
    assert os.path.dirname(private_ray_folder()).startswith(str(shared))
    shared.chmod(0o777)
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
    assert os.path.dirname(private_ray_folder()).startswith(str(shared))


def test_a_ray_folder_too_deep_for_unix_sockets_is_told_with_its_fix(tmp_path, monkeypatch):
    """The breaker (2026-12-06): a RAY_TMPDIR of about 90 characters ended serve with Ray's own `OSError:
    validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes: ...`, no fix said (Ray's sockets lie
    some 64 characters deep in its files' folder). Now a ServingConfigError names the folder, its length and the fix,
    with nothing of Ray left running; Ray refuses before it starts a process (0.2 s here)."""
    import psutil
    import ray

    from aotcuda.errors import ServingConfigError
    from aotcuda.serving import server

    deep = tmp_path / ("r" * 80)
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("RAY_TMPDIR", str(deep))
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with pytest.raises(ServingConfigError, match=r"Ray could not start: its files' folder '.*/aotcuda_ray_[^/]+/ray' is "
                                                 r"\d+ characters.*AF_UNIX path length.*Point RAY_TMPDIR \(or TMPDIR\) "
                                                 r"to a short folder of your own, of 18 characters or fewer"):
        server._init_ray({"_temp_dir": server.private_ray_folder(), "num_cpus": 1, "include_dashboard": False}, None)
    assert not ray.is_initialized()
    assert {child.pid for child in psutil.Process().children(recursive=True)} - before == set()


def test_the_serving_line_shows_a_package_name_as_escapes(monkeypatch, tmp_path):
    """`aotcuda serve` printed `serving <package> at ...` raw: a package named with ESC [ 2 J (another user's, by a glob)
    cleared the terminal (breakcall, 2026-12-07), as the other commands' success lines did."""
    from click.testing import CliRunner

    from aotcuda.serving import server as server_module
    from aotcuda.serving.command import serve_command

    class Served:  # a server that started, and stops at once as on Ctrl-C
        url = "http://127.0.0.1:18850"

        def wait(self, say_start_failure=None):
            return signal.SIGINT

    evil = tmp_path / "evil\x1b[2J\x1b[31m.pt2"
    evil.write_bytes(b"not read: serve_package is a stand-in")
    monkeypatch.setattr(server_module, "serve_package", lambda *args: Served())
    result = CliRunner().invoke(serve_command, [str(evil)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "evil\\x1b[2J\\x1b[31m.pt2 at http://127.0.0.1:18850" in result.output, \
        result.output


def test_a_torch_save_file_is_named_as_such_by_serve_as_by_load(tmp_path):
    """A new user (nu40): `aotcuda serve inputs.pt` said "has no aotcuda signature ... serve a package written by
    aotcuda.lower", while run, inspect and aotcuda.load on the same file say it is a torch.save file; serve's check
    (before Ray starts) now takes load's choice of the model, and so its words."""
    import aotcuda
    from aotcuda.errors import PackageError

    saved = tmp_path / "inputs.pt"
    torch.save({"x": torch.ones(2)}, saved)
    with pytest.raises(PackageError) as loaded:
        aotcuda.load(str(saved))
    said_by_load = str(loaded.value)
    assert "it is a torch.save file (inputs, outputs or a state dict), not a package" in said_by_load
    result = serve_without_ray(str(saved), "--port", "18900", timeout=120)
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert f"error: {said_by_load}" in " ".join(result.stderr.split()), result.stderr[-2000:]
