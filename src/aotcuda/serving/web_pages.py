"""Requests a web page could have sent, refused by the HTTP proxy before it reads a body (``proxy.WholeBody``).

A web page the server's user opens can send requests to a loopback server (the browser is on the same host): a POST
with ``Content-Type: text/plain`` (or a form, or none) is a "simple request", which a browser sends without asking the
server first, and through DNS rebinding (a name of the page's that then resolves to 127.0.0.1) the page also reads
the answers (the breaker, 2026-12-06: a POST with ``Origin: http://evil.example`` got 200, and ``Host:
evil.example:18602`` read /stats). So a POST /predict must say ``Content-Type: application/octet-stream`` (415 else; a
browser asks the server before sending that, which it never allows), and a request arriving over a loopback address
must name the server in its Host header: localhost, a loopback address, this machine's name, or a name of
AOTCUDA_SERVE_ALLOWED_HOSTS (421 else).

A request with an ``Origin`` header was sent by a web page (a browser adds it to every cross-origin request and to every
POST, same-origin ones included, whatever the page's ``mode``), and this server serves no page: it is refused 403 unless
the origin is one of AOTCUDA_SERVE_ALLOWED_ORIGINS (the deployer's own web app; ``*``: any), whatever address the
request arrived over (the breaker, 2026-12-06, evening: a POST /predict with ``Origin: http://evil.example`` and the
octet-stream type got 200; the Host check covers loopback only, and a listener on the network takes any Host).

The routes are read as the replica reads them (``route_of``: without trailing slashes): the media-type check compared
the path with "/predict" exactly, and a page's ``text/plain`` POST to ``/predict/`` was run (200; the breaker).
"""

from __future__ import annotations

import ipaddress
import re

from aotcuda.serving.body import ForeignOriginError, MediaTypeError, RequestError, WrongHostError

ALLOWED_HOSTS_VARIABLE = "AOTCUDA_SERVE_ALLOWED_HOSTS"
ALLOWED_ORIGINS_VARIABLE = "AOTCUDA_SERVE_ALLOWED_ORIGINS"
OCTET_STREAM = "application/octet-stream"


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def host_refusal(scope, allowed: frozenset[str]) -> WrongHostError | None:
    """WrongHostError for a request that arrived over a loopback address (``scope["server"]``, the address of the
    connection's own end) naming a host other than localhost, a loopback address or one of ``allowed`` ("*": any;
    WholeBody adds this machine's own name): a web page's DNS rebinding names the page's own host. None otherwise (a
    request without a Host header: no browser sends one)."""
    server, host = scope.get("server"), _header(scope, b"host")
    if not server or host is None or "*" in allowed or not _is_loopback(str(server[0])):
        return None
    name = _host_name(host)
    if name == "localhost" or name in allowed or _is_loopback(name):
        return None
    return WrongHostError(f"this server listens on a loopback address and the request names the host "
                          f"{shown_text(host)} (a web page's DNS rebinding names its own); name localhost or the "
                          f"server's address, or let the server take that name: {ALLOWED_HOSTS_VARIABLE}="
                          f"{shown_text(name)} (comma-separated names; * for any) in the environment of aotcuda serve")


_ABSOLUTE_FORM = re.compile(rb"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)", re.DOTALL)


def in_origin_form(scope) -> dict | RequestError:
    """``scope`` as if its request target were in origin form (``/predict``), or RequestError (400) for a target that
    is neither that nor an absolute http(s) URL.

    Why (break41, 2026-12-07): ``POST http://127.0.0.1:8000/predict HTTP/1.1`` is valid HTTP/1.1 (RFC 9112 3.2.2: a
    server MUST accept the absolute form), but uvicorn's h11 protocol puts the whole URL in the scope's path, and Ray's
    router answered it with its own 404, without aotcuda's error header. The URL's path becomes the scope's path, and
    its authority the Host header (RFC 9112 3.2.2: the server MUST ignore the received Host and use the target's), so
    host_refusal checks the name the target gives, as it checks a Host."""
    root = (scope.get("root_path") or "").encode("latin-1")
    raw = scope.get("raw_path") or (scope.get("path") or "").encode("utf-8", "surrogateescape")
    target = raw[len(root):] if raw.startswith(root) else raw
    if target.startswith(b"/") or target in (b"", b"*"):  # origin form; asterisk form (OPTIONS *): Ray's to answer
        return scope
    absolute = _ABSOLUTE_FORM.fullmatch(target)
    if (absolute is None or absolute[1].lower() not in (b"http", b"https") or not absolute[2] or b"@" in absolute[2]
            or absolute[3][:1] not in (b"", b"/")):  # "http://h#x", "http://h?x": no path (a fragment is no part of one)
        return RequestError(f"the request target {shown_text(target.decode('latin-1'))} is neither a path (/predict) "
                            "nor an absolute http URL (http://host:port/predict); send the request to the path")
    path = absolute[3] or b"/"
    from urllib.parse import unquote  # as uvicorn reads a path

    headers = [(key, value) for key, value in scope.get("headers") or () if key.lower() != b"host"]
    return {**scope, "raw_path": root + path, "path": root.decode("latin-1") + unquote(path.decode("ascii", "replace")),
            "headers": [(b"host", absolute[2]), *headers]}


def _host_name(host: str) -> str:
    """The name of a Host header: without its port, brackets (``[::1]:8000``) or a final dot, in lower case."""
    name = host.strip().lower()
    if name.startswith("[") and "]" in name:
        name = name[1:name.index("]")]
    elif name.count(":") == 1:  # name:port (an IPv6 address without brackets has more colons, and no port)
        name = name.rsplit(":", 1)[0]
    return name.rstrip(".")


def route_of(path: str) -> str:
    """The route a request's path names, as the replica reads it (deployment.ProgramReplica.__call__): without its
    trailing slashes ("/predict/" is /predict). The proxy's checks of a route read it so too: compared as sent, a
    page's text/plain POST to /predict/ passed the media-type check and ran."""
    return path.rstrip("/") or "/"


def origin_refusal(scope, allowed: frozenset[str]) -> ForeignOriginError | None:
    """ForeignOriginError for a request whose Origin header names an origin other than those ``allowed`` ("*": any;
    compared as scheme://host[:port], in lower case, without a final slash); ``null`` (a sandboxed frame, a file://
    page, a redirect's) is allowed only by "*" or by being listed. None for a request without one: programs (curl,
    aotcuda.serving.Client, a balancer's health check) send none; a browser sends it with every cross-origin
    request and every POST, and this server has no page of its own that could be the origin."""
    origin = _header(scope, b"origin")
    if origin is None or "*" in allowed:
        return None
    name = origin.strip().lower().rstrip("/")
    if name in allowed:
        return None
    return ForeignOriginError(f"the request was sent by a web page (Origin {shown_text(origin)}), and this server "
                              "serves programs, not pages: a page the server's user opens could otherwise drive it. "
                              "Send it from a program (no Origin header), or let the server take that page's "
                              f"requests: {ALLOWED_ORIGINS_VARIABLE}={shown_text(name)} (comma-separated origins, "
                              "scheme://host[:port]; * for any) in the environment of aotcuda serve")


def media_type_refusal(scope) -> MediaTypeError | None:
    """MediaTypeError for a POST /predict whose Content-Type is not application/octet-stream (parameters aside): a
    web page posts text/plain, a form, or nothing, without asking the server first; a safetensors body is bytes.
    The path is read as the replica reads it (``route_of``: /predict/ too)."""
    if scope.get("method") != "POST" or route_of(scope.get("path") or "") != "/predict":
        return None
    given = _header(scope, b"content-type")
    if given is not None and given.split(";", 1)[0].strip().lower() == OCTET_STREAM:
        return None
    said = "no Content-Type" if given is None else f"Content-Type {shown_text(given)}"
    return MediaTypeError(f"POST /predict takes a safetensors body sent as Content-Type: {OCTET_STREAM}, and the "
                          f"request has {said}; send that header (aotcuda.serving.Client does; curl: -H "
                          f"'Content-Type: {OCTET_STREAM}' --data-binary @inputs.safetensors)")


def shown_text(text: str) -> str:
    """A client's text quoted in an answer: at most 100 characters, printable."""
    return repr(text[:100] + ("..." if len(text) > 100 else ""))
