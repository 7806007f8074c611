"""A CPU package's call time by OpenMP thread count, median and 90th percentile, on a machine shared with others.

    python3 benchmarks/scripts/cpu_threads_tail.py [--threads 2 1] [--calls 300] [--package P.pt2]

Lowers (once, unless --package) a small spectral filter (aotcuda.models.spectral_filter: rfft(x, 2n) ·
rfft(taps, 2n) → irfft, [..:n]) for x [8, 100] float32, and times calls of it at each thread count
(torch.set_num_threads; the generated code's ``#pragma omp parallel`` regions follow it). Run it beside load on
the cores (a test run, a compile) to see the tail a parallel region gets when one of its threads is descheduled:
each region waits for its slowest thread. Run each thread count in its own process too (OMP_NUM_THREADS=k,
OMP_WAIT_POLICY=PASSIVE): the OpenMP runtime's spin-wait policy is read at start. Prints one line per thread count.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import aotcuda
from aotcuda.models.spectral_filter import SpectralFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads(), 1])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--package", help="a package of SpectralFilter lowered before (skips the compile)")
    args = parser.parse_args()
    x = torch.randn(8, 100)
    path = args.package or aotcuda.lower(SpectralFilter().eval(), (x,), device="cpu",
                                         package_path=f"{tempfile.mkdtemp()}/filter.pt2").package_path
    program = aotcuda.load(path)
    for threads in args.threads:
        torch.set_num_threads(threads)
        for _ in range(20):
            program(x)
        times = []
        for _ in range(args.calls):
            started = time.perf_counter()
            program(x)
            times.append((time.perf_counter() - started) * 1e6)
        times.sort()
        print(f"threads {threads}: median {statistics.median(times):.0f} us, p90 {times[int(0.9 * len(times))]:.0f} us "
              f"(load average {open('/proc/loadavg').read().split()[0]})")
    print(f"package: {path}")


if __name__ == "__main__":
    main()
