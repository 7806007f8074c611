"""Per-call cost of the index-range check (runtime/index_ranges.py): the check alone, and whole calls with
and without it.

    python benchmarks/index_ranges.py [--device cpu|cuda] [--package PATH] [--calls N]

Rows: ``IndexRangeChecks.check`` on one int64 input of 32, 1,024, 65,536 and 1,048,576 ids (one range,
[0, 127]); then calls of an embedding + RMSNorm package (vocabulary 128, width 64; ``--package`` reuses one,
else it is lowered first, ~40 s on a CPU) on ids of shape (2, 16) and (2, 512), loaded with
``check_index_ranges=True`` and ``False``, the two interleaved. Times are medians (and the best) of batches
of 100 calls, wall time (ended by a synchronize on CUDA), in µs per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "runtime"))


def _timed(function, device: str, batches: int) -> tuple[float, float]:
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(100):
            function()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / 100 * 1e6)
    return statistics.median(times), min(times)


def check_alone(device: str, batches: int) -> None:
    from aotcuda.runtime.index_ranges import IndexRangeChecks

    signature = {"inputs": [{"name": "ids", "index_ranges": [{"min": 0, "max": 127, "reason": "embedding"}]}]}
    checks = IndexRangeChecks.from_signature(signature, 1, torch.device(device))
    print("| the check alone, ids | µs median / best |\n|---|---|")
    for count in (32, 1024, 65536, 1 << 20):
        ids = torch.randint(0, 128, (count,), device=device)
        median, best = _timed(lambda: checks.check([ids], {}), device, batches)
        print(f"| {count:,} | {median:.1f} / {best:.1f} |")


def whole_calls(device: str, package: str | None, batches: int) -> None:
    import aotcuda
    from test_index_ranges import lower_embed_norm

    if package is None:
        package = lower_embed_norm(os.path.join(tempfile.mkdtemp(), "embed_norm.pt2"), device)
        print(f"(package: {package})")
    checked, unchecked = aotcuda.load(package), aotcuda.load(package, check_index_ranges=False)
    print("\n| ids | checked µs median / best | unchecked µs median / best | difference (medians) |\n|---|---|---|---|")
    for shape in ((2, 16), (2, 512)):
        ids = torch.randint(0, 128, shape, device=device)
        rows = {}
        for _ in range(3):  # interleaved: both see the same machine load
            for name, program in (("checked", checked), ("unchecked", unchecked)):
                rows.setdefault(name, []).append(_timed(lambda: program(ids), device, max(batches // 3, 1)))
        (c_med, c_best), (u_med, u_best) = (min(rows[n]) for n in ("checked", "unchecked"))
        print(f"| {shape} | {c_med:.1f} / {c_best:.1f} | {u_med:.1f} / {u_best:.1f} | {c_med - u_med:+.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--package")
    parser.add_argument("--batches", type=int, default=30)
    args = parser.parse_args()
    check_alone(args.device, args.batches)
    whole_calls(args.device, args.package, args.batches)


if __name__ == "__main__":
    main()
