"""Library kernel vs generated code for the real-valued scans and histograms transformers emits
(cumsum in create_causal_mask and MoE offsets, histc in MoE token counts): the measurement behind the
allow-list policy of docs/usage.md ("Library kernels beyond matmul").

    python benchmarks/scan_kernels.py [--device cpu|cuda] [--sizes 64 1024 16384]

For each op and size: the ATen kernel as eager calls it (what the AOTI package's fallback calls), and
the same result from code Inductor generates (torch.compile of a formulation it can generate code for:
cumsum as a masked row sum over a triangular mask, histc as a one-hot sum; on CUDA also Inductor's own
generated scan for cumsum). Median wall time per call in µs over --calls calls, after warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def timed(fn, *args, calls: int, device: str) -> float:
    for _ in range(5):
        fn(*args)
    samples = []
    for _ in range(calls):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def cumsum_by_mask(x):
    n = x.shape[-1]
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    return (x.unsqueeze(-2) * mask).sum(-1)


def histc_by_one_hot(ids, bins: int):
    return (ids.unsqueeze(-1) == torch.arange(bins, device=ids.device)).sum(0).to(torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 1024, 4096])
    parser.add_argument("--calls", type=int, default=50)
    opts = parser.parse_args()
    device = opts.device
    print(f"torch {torch.__version__}, {device}; median µs per call")
    print(f"{'op':28} {'size':>7} {'library kernel':>15} {'generated':>12}")
    for n in opts.sizes:
        x = torch.randint(0, 2, (2, n), device=device, dtype=torch.int64)
        library = timed(torch.cumsum, x, -1, calls=opts.calls, device=device)
        generated = timed(torch.compile(cumsum_by_mask), x, calls=opts.calls, device=device) if n <= 4096 else float("nan")
        assert torch.equal(torch.compile(cumsum_by_mask)(x), torch.cumsum(x, -1)) if n <= 4096 else True
        print(f"{'cumsum (mask) int64 [2, n]':28} {n:>7} {library:>15.1f} {generated:>12.1f}")
        if device == "cuda":
            scan = timed(torch.compile(lambda t: torch.cumsum(t, -1)), x, calls=opts.calls, device=device)
            print(f"{'cumsum (Inductor scan)':28} {n:>7} {library:>15.1f} {scan:>12.1f}")
        ids = torch.randint(0, 64, (n * 2,), device=device).float()
        library = timed(lambda t: torch.histc(t, bins=64, min=0, max=63), ids, calls=opts.calls, device=device)
        generated = timed(torch.compile(lambda t: histc_by_one_hot(t, 64)), ids, calls=opts.calls, device=device)
        assert torch.equal(torch.compile(lambda t: histc_by_one_hot(t, 64))(ids), torch.histc(ids, bins=64, min=0, max=63))
        print(f"{'histc 64 bins [2n]':28} {n:>7} {library:>15.1f} {generated:>12.1f}")


if __name__ == "__main__":
    main()
