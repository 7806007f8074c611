"""Whether the Ray cluster RAY_ADDRESS names answers, asked before ray.init joins it.

ray.init retries a cluster it cannot reach for a minute or more, printing nothing of use (a mistyped
``RAY_ADDRESS=notahost:6379``: `aotcuda serve` was still waiting at 90 s). A host:port that nothing answers on
within ``CONNECT_S`` is refused at once, naming the variable and the fix. Only the forms that name a host and
port are checked (``host:port``, ``ray://host:port``, ``[v6]:port``); ``auto``, ``local`` and other schemes are
Ray's to read. The check opens a TCP connection and closes it; a cluster behind it that is not Ray's is still
ray.init's to find out.
"""

from __future__ import annotations

import socket
import threading

from aotcuda.errors import ServingConfigError

CONNECT_S = 10.0  # seconds to resolve the host and connect: a cluster's head answers in milliseconds


def host_and_port(address: str) -> tuple[str, int] | None:
    """(host, port) of an address that names them, else None."""
    text = address.strip()
    if text.startswith("ray://"):
        text = text[len("ray://"):]
    elif "://" in text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout_s: float = CONNECT_S) -> None:
    """Raise ServingConfigError where ``address`` (RAY_ADDRESS's value) names a host:port that cannot be resolved
    or connected to within ``timeout_s`` seconds."""
    named = host_and_port(address)
    if named is None:
        return
    problem = _unreachable(*named, timeout_s)
    if problem is not None:
        raise ServingConfigError(
            f"RAY_ADDRESS={address!r} names a Ray cluster that does not answer ({problem}); start the cluster "
            "(ray start --head), correct RAY_ADDRESS, or unset it to serve on a Ray that aotcuda serve starts here")


def _unreachable(host: str, port: int, timeout_s: float) -> str | None:
    """Why host:port cannot be reached, or None where a TCP connection was made. The host is resolved in a thread
    of its own: getaddrinfo takes no timeout, and a resolver that does not answer held it for the resolver's own
    retries."""
    found: list = []

    def resolve() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            found.append(error)

    resolver = threading.Thread(target=resolve, name="aotcuda-ray-address", daemon=True)
    resolver.start()
    resolver.join(timeout_s)
    if not found:
        return f"{host!r} was not resolved within {timeout_s:g} s"
    if isinstance(found[0], OSError):
        return f"{host!r} cannot be resolved: {found[0].strerror or found[0]}"
    last = None
    for family, kind, proto, _, sockaddr in found[0]:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(timeout_s)
                probe.connect(sockaddr)
            return None
        except OSError as error:
            last = error
    reason = "timed out" if isinstance(last, TimeoutError) else (getattr(last, "strerror", None) or str(last))
    return f"connecting to {host} port {port}: {reason}"
