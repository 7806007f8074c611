"""`aotcuda serve` says a replica that fails to start, once a spell, with the fix (serving/start_failures.py).

A new user's trial: the package was replaced at its path after serve checked it; each replica Ray Serve started in
place of one that died refused it, and was started again, for good, while `aotcuda serve` printed nothing (/healthz
said why, to whoever asked). Serve's status is stood in for here: making Serve retry a replica takes a Ray cluster,
a replica's death and Serve's back-off, minutes on this 2-core machine; the words Serve gives are health.look's,
tested in test_run_deadline.py::test_healthz_says_why_a_replica_failed_to_start."""

from __future__ import annotations

import os
import signal
import sys
import threading
import types

import pytest
from click.testing import CliRunner

pytest.importorskip("ray.serve")

from aotcuda.runtime.package_checks import package_sha256  # noqa: E402
from aotcuda.serving import health, start_failures  # noqa: E402
from aotcuda.serving.server import Server  # noqa: E402
from aotcuda.serving.start_failures import StartFailureNotice  # noqa: E402

def _write_zip(path, data: bytes) -> None:
    """A small zip at ``path`` holding ``data``: package_sha256 reads an archive, its layout checked first."""
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", data)


REFUSAL = ("aotcuda.errors.PackageError: '/srv/model.pt2' is not the package that was checked when serving started: "
           "its SHA-256 is 9f2c..., the one checked 41aa...")


def test_a_spell_of_failed_starts_is_said_once_and_a_later_spell_again(tmp_path):
    package = tmp_path / "model.pt2"
    _write_zip(package, b"the package served")
    notice = StartFailureNotice(str(package), package_sha256(package))
    assert notice.said(False, "") is None  # starting, nothing failed
    message, hint = notice.said(False, REFUSAL)
    assert message.startswith("a replica failed to start, and Ray Serve starts it again") and message.endswith(REFUSAL)
    assert hint == ("the replicas that still run serve on meanwhile (GET /healthz); fix the cause, then restart "
                    "aotcuda serve")
    # Serve's retries, every few seconds, with the same cause or another: nothing more until every replica runs
    assert [notice.said(False, failure) for failure in (REFUSAL, REFUSAL, "", "RuntimeError: other")] == [None] * 4
    assert notice.said(True, "") is None
    assert notice.said(False, REFUSAL) is not None  # a new spell


@pytest.mark.parametrize("change", ["replaced", "removed"])
def test_the_fix_for_a_package_replaced_at_its_path_is_told_from_the_file(tmp_path, change):
    package = tmp_path / "model.pt2"
    _write_zip(package, b"the package served")
    notice = StartFailureNotice(str(package), package_sha256(package))
    if change == "replaced":
        _write_zip(tmp_path / "new.pt2", b"another package")
        os.replace(tmp_path / "new.pt2", package)
    else:
        package.unlink()
    _, hint = notice.said(False, "RuntimeError: whatever the replica said")  # the fix is not read from its words
    assert hint == (f"the package at {package} is not the one serve checked at its start (replaced or changed since), "
                    "and no new replica will load it: publish the new package under a new path and serve that, or "
                    "restart aotcuda serve to serve what is at this path now")


def test_wait_says_a_replica_failing_to_start_once_while_serve_retries_it(tmp_path, monkeypatch):
    """Server.wait looks at the deployment while it waits for a signal (in a thread: a look blocks): a failure Serve
    reports at every look is said once; a look that fails (Serve busy) is passed over."""
    package = tmp_path / "model.pt2"
    _write_zip(package, b"the package served")
    looks, said = [], []

    def failing(app_name, deployment_name):
        looks.append((app_name, deployment_name))
        if len(looks) == 1:
            raise TimeoutError("the controller is busy")
        return health.Look("UNHEALTHY", {"RUNNING": 1, "STARTING": 1}, False, REFUSAL)

    monkeypatch.setattr(health, "look", failing)
    monkeypatch.setattr(start_failures, "LOOK_S", 0.05)
    ray = types.ModuleType("ray")  # shutdown's Ray and Serve, recorded
    ray.serve, ray.shutdown = types.SimpleNamespace(delete=lambda name: None), lambda: None
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.serve", ray.serve)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        server = Server("http://127.0.0.1:1", True, (str(package), package_sha256(package)))
        assert server.wait(say_start_failure=lambda message, hint: said.append((message, hint))) == signal.SIGINT
    finally:
        timer.cancel()
    assert len(looks) >= 5 and set(looks) == {("aotcuda", "ProgramReplica")}, looks
    assert len(said) == 1 and said[0][0].endswith(REFUSAL), said


def test_serve_prints_the_failure_and_its_fix_on_stderr(monkeypatch):
    """The command's side: the warning and its hint on stderr, the replica's text with its control characters
    escaped (it quotes an exception, which may quote a package's names)."""
    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command

    class Served:
        url = "http://127.0.0.1:1"

        def wait(self, say_start_failure=None):
            say_start_failure("a replica failed to start: \x1b[2Jcleared", "publish it under a new path")
            return signal.SIGINT

    monkeypatch.setattr(server_module, "serve_package", lambda path, options: Served())
    result = CliRunner().invoke(serve_command, [__file__])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["warning: a replica failed to start: \\x1b[2Jcleared",
                                          "hint: publish it under a new path"], result.stderr
