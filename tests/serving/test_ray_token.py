"""The Ray instance `aotcuda serve` starts takes a token of its own, not ~/.ray/auth_token (serving/ray_token.py):
another local user who reads that file must not get in. Written as that user would: read the file, call the GCS."""

from __future__ import annotations

import glob
import os
import secrets
import stat
import subprocess
import sys

import pytest

serving = pytest.importorskip("aotcuda.serving")
grpc = pytest.importorskip("grpc")

from serving_cases import what_serve_hands_ray_init  # noqa: E402  (after the skips: it imports nothing of Ray)

PORT = 18651  # breakproc's range on a shared machine

_SERVE_AND_SAY = """
import os, sys
from aotcuda.serving.server import ServeOptions, serve_package
server = serve_package(sys.argv[1], ServeOptions(port=int(sys.argv[2]), replicas=1))
import ray
print(ray.get_runtime_context().gcs_address, flush=True)
print(os.environ.get("RAY_AUTH_TOKEN"), flush=True)
sys.stdin.read()
server.shutdown()
"""


def _gcs_answers(address: str, token: str) -> grpc.StatusCode:
    """The status of a GCS call made with ``token``, as Ray's clients send it."""
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId")
        try:
            call(b"", timeout=20, metadata=(("authorization", f"Bearer {token}"),))
        except grpc.RpcError as refused:
            return refused.code()
    return grpc.StatusCode.OK


def _home_with_a_token_others_read(tmp_path) -> tuple[str, str]:
    """A home folder (0755, as many distributions make them) holding the ~/.ray/auth_token an earlier Ray wrote:
    0644 in a 0755 folder."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    token = secrets.token_hex(32)
    (home / ".ray" / "auth_token").write_text(token)
    for path, mode in ((home, 0o755), (home / ".ray", 0o755), (home / ".ray" / "auth_token", 0o644)):
        os.chmod(path, mode)
    return str(home), token


def test_serves_ray_refuses_the_token_file_other_users_can_read(served_block, tmp_path):
    """Before (breakproc, 2026-12-07): Ray used ~/.ray/auth_token (it writes it 0644 itself where none is there): a
    process with the token read from that file called the serving instance's GCS (here: OK), and with ray.init on it
    ran a task as the serving user (uid 0 on this machine)."""
    home, file_token = _home_with_a_token_others_read(tmp_path)
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}
    env["HOME"] = home
    server = subprocess.Popen([sys.executable, "-c", _SERVE_AND_SAY, served_block[0], str(PORT)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = server.stdout.readline().strip()
        own_token = server.stdout.readline().strip()
        assert address, "the server did not start"
        assert _gcs_answers(address, file_token) == grpc.StatusCode.UNAUTHENTICATED
        assert _gcs_answers(address, secrets.token_hex(32)) == grpc.StatusCode.UNAUTHENTICATED
        assert _gcs_answers(address, own_token) == grpc.StatusCode.OK  # the check itself can pass
        # the instance's token is in no file of the home and on no command line (which every user may read)
        assert os.listdir(os.path.join(home, ".ray")) == ["auth_token"]
        assert open(os.path.join(home, ".ray", "auth_token")).read() == file_token
        import tempfile

        # for the dashboard's login page: a copy in serve's private folder of Ray's files, readable by this user alone
        copies = [path for path in glob.glob(os.path.join(tempfile.gettempdir(), "aotcuda_ray_*", "auth_token"))
                  if open(path).read() == own_token]
        assert len(copies) == 1 and stat.S_IMODE(os.stat(copies[0]).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(copies[0])).st_mode) == 0o700
        for command_line in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(command_line, "rb") as file:
                    assert own_token.encode() not in file.read(), command_line
            except OSError:  # a process that ended meanwhile
                pass
    finally:
        server.communicate(timeout=120)


_WOULD_RAY_WRITE_A_TOKEN = """
import os
from aotcuda.serving.ray_token import use_own_token
assert use_own_token()
from ray._private.authentication.authentication_token_setup import ensure_token_if_auth_enabled
ensure_token_if_auth_enabled()  # what ray.init does first for a new local instance
print(os.path.exists(os.path.expanduser("~/.ray/auth_token")))
"""


def test_no_token_file_is_written_for_the_instance(tmp_path):
    """Ray writes ~/.ray/auth_token (0644, in a 0755 ~/.ray) where it finds no token; with the instance's own token
    in the environment it finds one and writes nothing."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}
    env["HOME"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", _WOULD_RAY_WRITE_A_TOKEN], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "False"
    assert not os.path.exists(tmp_path / ".ray")


def test_a_token_the_user_chose_is_kept(monkeypatch):
    from aotcuda.serving.ray_token import use_own_token

    for chosen in ({"RAY_AUTH_TOKEN": "a" * 64}, {"RAY_AUTH_TOKEN_PATH": "/somewhere/token"},
                   {"RAY_AUTH_MODE": "disabled"}):
        for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in chosen.items():
            monkeypatch.setenv(name, value)
        assert use_own_token() is False
        assert {name: os.environ.get(name) for name in chosen} == chosen
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    assert use_own_token() is True
    first = os.environ["RAY_AUTH_TOKEN"]
    assert len(first) == 64 and set(first) <= set("0123456789abcdef") and os.environ["RAY_AUTH_MODE"] == "token"


_WHAT_RAY_INIT_GETS = what_serve_hands_ray_init(
    '{"address": (overrides or {}).get("address"), "token": os.environ.get("RAY_AUTH_TOKEN")}', 18652)


@pytest.mark.parametrize("overrides", [{}, {"address": "10.0.0.7:6379"}])
def test_only_a_new_local_instance_gets_a_token_of_its_own(served_block, overrides, tmp_path):
    """A cluster the caller joins (ray_init_options' address, as RAY_ADDRESS) holds its own token: a new one sent to
    it would be refused."""
    import json

    env = {name: value for name, value in os.environ.items() if not name.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", _WHAT_RAY_INIT_GETS, served_block[0], json.dumps(overrides)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert (got["token"] is None) == bool(overrides), got
