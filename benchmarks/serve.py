"""Serving throughput and latency: the demo block behind `aotcuda serve`, by replicas and batch size.

    python benchmarks/serve.py [--device cpu|cuda] [--replicas 1 2] [--batch-sizes 1 8] [--clients 16]
                               [--requests 400] [--seq 16] [--cuda-graphs off on] [--json out.json]

One Ray instance (loopback) for the whole run; for each (replicas, max batch size) the package is
deployed, warmed up with one request per client, then `--requests` requests of batch 1 are sent by
`--clients` concurrent HTTP clients (aotcuda.serving.Client, keep-alive off, safetensors bodies).
Reports requests/s and p50/p99 latency (ms, client side, request written → response read) and checks
every response against eager. On CUDA each replica takes one GPU: more replicas than GPUs is refused;
`--cuda-graphs off on` measures each configuration without and with the replicas' CUDA graphs.
Prints a markdown table last.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import relative_error  # noqa: E402


def lower_block(device: str, seq: int, folder: str) -> tuple[str, torch.nn.Module]:
    import aotcuda
    from aotcuda.models import attention_block

    torch.manual_seed(0)
    model, (x,) = attention_block(device=device, dtype=torch.float32, batch=2, seq=seq)
    path = os.path.join(folder, "block.pt2")
    aotcuda.lower(model, (x,), device=device, package_path=path,
                  dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}})
    return path, model.cpu()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(url: str, model, seq: int, clients: int, requests: int) -> dict:
    from aotcuda.serving import Client

    client = Client(url, retries=0, timeout_s=120)
    inputs = [torch.randn(1, seq, 256) for _ in range(requests)]
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda x: client.predict({"x": x}), inputs[:clients]))  # warm-up

        def timed(x):
            start = time.perf_counter()
            (y,) = client.predict({"x": x})
            return time.perf_counter() - start, y

        started = time.perf_counter()
        results = list(pool.map(timed, inputs))
        elapsed = time.perf_counter() - started
    with torch.no_grad():
        worst = max(relative_error(y, model(x)) for x, (_, y) in zip(inputs, results))
    latencies = [seconds * 1e3 for seconds, _ in results]
    return {"requests_per_s": requests / elapsed, "p50_ms": statistics.median(latencies),
            "p99_ms": percentile(latencies, 0.99), "max_rel_error": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--cuda-graphs", nargs="+", choices=["off", "on"], default=["off"],
                        help="replicas run the package without / with CUDA graphs (CUDA only)")
    parser.add_argument("--json")
    opts = parser.parse_args()
    import ray

    from aotcuda.serving import ServeOptions, serve_package

    folder = tempfile.mkdtemp(prefix="aotcuda-serve-bench-")
    path, model = lower_block(opts.device, opts.seq, folder)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             num_cpus=max(os.cpu_count() or 1, max(opts.replicas)))
    rows = []
    try:
        for replicas, batch_size, graphs in itertools.product(opts.replicas, opts.batch_sizes, opts.cuda_graphs):
            options = ServeOptions(replicas=replicas, port=opts.port, max_batch_size=batch_size,
                                   batch_wait_ms=opts.batch_wait_ms, cuda_graphs=graphs == "on")
            with serve_package(path, options) as server:
                row = {"replicas": replicas, "max_batch_size": batch_size, "cuda_graphs": graphs,
                       **measure(server.url, model, opts.seq, opts.clients, opts.requests)}
            rows.append(row)
            print(row, flush=True)
    finally:
        ray.shutdown()
    meta = {"torch": torch.__version__, "device": opts.device, "cpus": os.cpu_count(),
            "gpu": torch.cuda.get_device_name() if opts.device == "cuda" else None, "clients": opts.clients,
            "requests": opts.requests, "seq": opts.seq, "batch_wait_ms": opts.batch_wait_ms}
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"\n{meta}\n")
    print("| replicas | max batch | CUDA graphs | requests/s | p50 ms | p99 ms | max rel. error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['replicas']} | {r['max_batch_size']} | {r['cuda_graphs']} | {r['requests_per_s']:.0f} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_rel_error']:.1e} |")


if __name__ == "__main__":
    main()
