"""What `aotcuda serve` says of a replica that fails to start: once, on stderr, with the fix.

Ray Serve starts a replica again in place of one whose constructor raised, for as long as the cause lasts. A package
replaced at its path after serve checked it is such a cause: every new replica refuses it (each loads only the bytes
serve checked, runtime/package.py), so a replica that died or ran past its deadline is started again every few
seconds, for good. Serve says why in its controller's log, inside serve's private Ray folder, and /healthz says it to
whoever asks (health.look); serve itself said nothing. Server.wait looks at the deployment every LOOK_S and says the
first failure of each spell: a line per retry would bury the terminal, and the cause does not change between them.
"""

from __future__ import annotations

import threading
from typing import Callable

from aotcuda.errors import PackageError, clipped
from aotcuda.runtime.package_checks import package_sha256

# Seconds between serve's looks at the deployment: each asks Serve's controller (serve.status()); a failure is said
# this long after Serve's first retry at the most.
LOOK_S = 5.0


class StartFailureNotice:
    """Decides what serve says of replicas that fail to start, from its looks at the deployment: the first failure of
    a spell, with the fix; nothing more until every replica runs again (then a later failure is a new spell). The fix
    for a package replaced at the path is told from the file itself (its SHA-256 against the one served), never read
    from the words of the error."""

    def __init__(self, package_path: str, served_sha256: str):
        self.package_path, self.served_sha256 = package_path, served_sha256
        self._said = False

    def said(self, ready: bool, failure: str) -> tuple[str, str] | None:
        """(message, hint) to say now, or None, given a look: ``ready`` (every replica runs) and ``failure`` (why
        Serve's latest replica failed to start, "" for none)."""
        if ready:
            self._said = False
            return None
        if not failure or self._said:
            return None
        self._said = True
        return (f"a replica failed to start, and Ray Serve starts it again while the cause lasts (said once; "
                f"GET /healthz says it too): {clipped(failure, 2000)}", self._fix())

    def _fix(self) -> str:
        try:
            replaced = package_sha256(self.package_path) != self.served_sha256  # in the watch's thread: may be long
        except PackageError:  # gone, or unreadable: not the package served either
            replaced = True
        if replaced:
            return (f"the package at {self.package_path} is not the one serve checked at its start (replaced or "
                    "changed since), and no new replica will load it: publish the new package under a new path and "
                    "serve that, or restart aotcuda serve to serve what is at this path now")
        return ("the replicas that still run serve on meanwhile (GET /healthz); fix the cause, then restart "
                "aotcuda serve")


class StartFailureWatch:
    """Looks at the deployment (``look``: () -> (ready, failure)) every LOOK_S until ``stop`` is set, and hands
    what ``notice`` decides to ``say`` (message, hint). It runs in a thread of its own (``run``): a look asks Serve's
    controller (serve.status()) and blocks, for long where the controller is gone (a Ctrl-C in a terminal ends the
    local Ray's processes too), and Server.wait's loop must answer signals meanwhile. A look that fails (Serve busy
    or shutting down) is passed over: the next one tries again, and serving goes on either way."""

    def __init__(self, notice: StartFailureNotice, look: Callable[[], tuple[bool, str]],
                 say: Callable[[str, str], None]):
        self.notice, self.look, self.say = notice, look, say

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(LOOK_S):
            try:
                ready, failure = self.look()
            except Exception:
                continue
            said = self.notice.said(ready, failure)
            if said is not None and not stop.is_set():  # not while serving stops, its replicas with it
                self.say(*said)
