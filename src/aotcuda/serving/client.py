"""A small HTTP client of `aotcuda serve`: inputs in, outputs out, retrying only what is known to be safe.

    client = Client("http://127.0.0.1:8000")
    outputs = client.predict({"x": x})          # [output_0, output_1, ...] as CPU tensors

Retry rule: a request is sent again (up to ``retries`` times) only when the server cannot have run it:
the connection was never made (refused, unreachable, connect timeout: nothing was sent), or the answer is a
503 with ``Retry-After`` (Ray Serve's proxy refusing it before any replica took it; the wait is the header's,
capped at ``max_retry_after_s``). Anything after the request was sent is final: a read timeout (the server
may still be running it), a connection closed without an answer, a 5xx without the X-Aotcuda-Error header
(the replica that held the request died: resending the request a replica died on can kill the next one,
and resending one that is still running doubles the load), and every answer a replica gave itself
(400, 408, 500).
"""

from __future__ import annotations

import http.client
import time
import urllib.parse

import torch

from aotcuda.errors import AotcudaError

__all__ = ["Client", "ServingError"]

ERROR_HEADER = "X-Aotcuda-Error"


class ServingError(AotcudaError):
    """The request failed. Attributes: ``status`` (HTTP code, None without an answer), ``retriable`` (the
    server cannot have run it), ``message``, ``retry_after_s`` (the server's Retry-After, when it sent one)."""

    def __init__(self, status: int | None, message: str, retriable: bool, retry_after_s: float | None = None):
        self.status, self.message, self.retriable, self.retry_after_s = status, message, retriable, retry_after_s
        super().__init__(f"HTTP {status}: {message}" if status else message)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the delta-seconds form; a date or garbage counts as absent)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


class Client:
    """POST /predict with safetensors bodies. ``timeout_s`` bounds each attempt (seconds)."""

    def __init__(self, url: str, *, timeout_s: float = 60.0, retries: int = 3, backoff_s: float = 0.5,
                 max_retry_after_s: float = 30.0):
        self.url, self.timeout_s, self.retries, self.backoff_s = url.rstrip("/"), timeout_s, retries, backoff_s
        self.max_retry_after_s = max_retry_after_s
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url must be http://HOST[:PORT], got {url!r}")
        self._host, self._port, self._path = parts.hostname, parts.port or 80, parts.path + "/predict"

    def predict(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """The flat outputs for these named inputs. Raises ServingError (after the retries, if retriable)."""
        import safetensors.torch as safetensors_torch

        body = safetensors_torch.save({name: t.detach().cpu().contiguous() for name, t in inputs.items()})
        for attempt in range(self.retries + 1):
            try:
                answer = self.post(body)
            except ServingError as error:
                if not error.retriable or attempt == self.retries:
                    raise
                wait = error.retry_after_s if error.retry_after_s is not None else self.backoff_s * (attempt + 1)
                time.sleep(min(wait, self.max_retry_after_s))
                continue
            outputs = safetensors_torch.load(answer)
            return [outputs[f"output_{i}"] for i in range(len(outputs))]
        raise AssertionError("unreachable")

    def post(self, body: bytes) -> bytes:
        """One attempt on a fresh connection: the response body of a 200, else ServingError saying whether
        the server cannot have run the request (``retriable``)."""
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        try:
            try:
                connection.connect()
            except OSError as error:  # refused, unreachable, connect timeout: nothing was sent
                raise ServingError(None, f"could not connect to {self.url}: {error}", retriable=True) from None
            try:
                connection.request("POST", self._path, body=body, headers={"Content-Type": "application/octet-stream"})
                response = connection.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException) as error:
                raise ServingError(None, f"no answer from {self.url} after the request was sent ({type(error).__name__}: "
                                   f"{error}); not resent: the server may have run it, or may still run it",
                                   retriable=False) from None
        finally:
            connection.close()
        if response.status == 200:
            return answer
        text = answer.decode(errors="replace")
        retry_after = _retry_after(response.headers.get("Retry-After"))
        if response.status == 503 and retry_after is not None and response.headers.get(ERROR_HEADER) is None:
            raise ServingError(503, text, retriable=True, retry_after_s=retry_after)
        if response.status >= 500 and response.headers.get(ERROR_HEADER) is None:
            text = (f"{text.strip() or response.reason} (from Ray's proxy, not the program: the replica that held "
                    "the request may have died on it; not resent)")
        raise ServingError(response.status, text, retriable=False)
