"""A small HTTP client of `aotcuda serve`: inputs in, outputs out, retrying what is safe to retry.

    client = Client("http://127.0.0.1:8000")
    outputs = client.predict({"x": x})          # [output_0, output_1, ...] as CPU tensors

Retry rule: a request is retried (up to ``retries`` times, after ``backoff_s``·attempt seconds) when it got
no answer (connection refused or reset) or a 5xx answer that the replica did not give itself (no
X-Aotcuda-Error header: Ray's proxy answering for a replica that died or restarts). Predictions have no
side effects, so a retry cannot do harm. A 400 (bad request) or a 500 from the program is raised at once.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import torch

from aotcuda.errors import AotcudaError

__all__ = ["Client", "ServingError"]

ERROR_HEADER = "X-Aotcuda-Error"


class ServingError(AotcudaError):
    """The server answered with an error. Attributes: ``status`` (HTTP code), ``retriable``, ``message``."""

    def __init__(self, status: int | None, message: str, retriable: bool):
        self.status, self.message, self.retriable = status, message, retriable
        super().__init__(f"HTTP {status}: {message}" if status else message)


class Client:
    """POST /predict with safetensors bodies. ``timeout_s`` bounds each attempt (seconds)."""

    def __init__(self, url: str, *, timeout_s: float = 60.0, retries: int = 3, backoff_s: float = 0.5):
        self.url, self.timeout_s, self.retries, self.backoff_s = url.rstrip("/"), timeout_s, retries, backoff_s

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
                time.sleep(self.backoff_s * (attempt + 1))
                continue
            outputs = safetensors_torch.load(answer)
            return [outputs[f"output_{i}"] for i in range(len(outputs))]
        raise AssertionError("unreachable")

    def post(self, body: bytes) -> bytes:
        """One attempt: the response body of a 200, else ServingError saying whether a retry may help."""
        request = urllib.request.Request(f"{self.url}/predict", data=body, method="POST",
                                         headers={"Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            from_replica = error.headers.get(ERROR_HEADER) is not None
            raise ServingError(error.code, error.read().decode(errors="replace"),
                               retriable=error.code >= 500 and not from_replica) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            raise ServingError(None, f"no answer from {self.url}: {error}", retriable=True) from None
