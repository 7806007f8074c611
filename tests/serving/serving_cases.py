"""What the serving tests share: the served block's sizes, loopback Ray options, HTTP and error helpers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import torch

BATCH_MAX, SEQ = 16, 16


def loopback_ray() -> dict:
    """ray.init options for tests: loopback only, small object store."""
    return {"_node_ip_address": "127.0.0.1", "object_store_memory": 128 << 20}


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def replica_stats(url: str, replicas: int = 2, tries: int = 60) -> dict[str, dict]:
    """Each replica's /stats, by replica id (requests are routed to a random replica: ask until all answered)."""
    seen = {}
    for _ in range(tries):
        status, body = get(f"{url}/stats")
        if status == 200:
            stats = json.loads(body)
            seen[stats["replica"]] = stats
        if len(seen) >= replicas:
            break
    return seen
