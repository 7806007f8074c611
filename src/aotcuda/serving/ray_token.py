"""The token of the Ray instance ``aotcuda serve`` starts: its own, held in the environment of its processes only.

Why: Ray's token authentication is what keeps a local instance's servers closed to other local users (its GCS, the
raylet, each replica's gRPC port: docs/serving.md, "Ports"), and whoever has the token can submit tasks, which run
as the serving user. Left to itself, Ray 2.60 keeps one token per user in ``~/.ray/auth_token``, made with a plain
``open(path, "w")`` (``authentication_token_setup.generate_and_save_token``): mode 0644 in a 0755 ``~/.ray``, so
every local user who can pass through the home folder (0755 on many distributions) reads it, and it is used again
by every later instance. Measured (breakproc, 2026-12-07): during an ``aotcuda serve``, uid 65534 read the token from
a 0755 home, and a process with it connected to the instance's GCS on 127.0.0.1 and ran a task there as uid 0.

So an instance serve starts gets a fresh token of 256 bits (as Ray makes them) through ``RAY_AUTH_TOKEN``, which
Ray's processes inherit and which ``/proc/PID/environ`` shows to this user alone; nothing is written to a file,
and a token file another user could read is not used. Where the user chose for themselves (``RAY_AUTH_TOKEN``,
``RAY_AUTH_TOKEN_PATH``, or ``RAY_AUTH_MODE`` other than ``token``), it is left as they set it.
"""

from __future__ import annotations

import os
import secrets

TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def use_own_token(private_folder: str | None = None) -> bool:
    """Give the Ray instance this process is about to start a token of its own (the module docstring); True where it
    did, False where the user's choice is kept. Call before ``ray.init``. ``private_folder`` (a 0700 folder of this
    user's: the one serve made for Ray's files) gets a copy in ``auth_token`` (0600), for the user who opens the
    dashboard (``--dashboard``), whose login page asks for it."""
    if any(os.environ.get(name) for name in TOKEN_VARIABLES):
        return False
    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":  # the user turned it off: their choice
        return False
    token = secrets.token_hex(32)
    if private_folder is not None:
        descriptor = os.open(os.path.join(private_folder, TOKEN_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(token)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = token
    _reread_by_ray()
    return True


TOKEN_FILE = "auth_token"


def _reread_by_ray() -> None:
    """Make this process's Ray read the variables again, as Ray's own ``_enable_token_auth`` does: its config was read
    as ray was imported (the mode then: "disabled", and the GCS this process started refused its driver), and its
    loader caches a token an earlier ``ray.init`` of this process loaded. A Ray without them has nothing to re-read."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:
        return
    Config.initialize("")
    reset = getattr(AuthenticationTokenLoader.instance(), "reset_cache", None)
    if reset is not None:
        reset()
