"""Where the CPU filter program's time goes: benchmarks/fft.py's spectral filter (rfft → complex weight → irfft,
512 rows) rewritten by the pass and compiled by torch.compile, each kernel of the generated module timed as the
program calls it (every `cpp_fused_*` callable of Inductor's output module wrapped with a timer), beside the whole
call and the library's program, on one thread (as benchmarks/fft.py's Timer runs them; --threads 2 for both
libraries' OpenMP split: fft_rows_cpu runs its blocks of 8 rows over torch.get_num_threads() threads, MKL its rows).

    python3 benchmarks/scripts/fft_cpu_program_kernels.py --sizes 1024 4096 8192 [--calls 40] [--threads 1]

Prints one line a kernel (median µs a call, the kernel's name as Inductor gave it: cpp_fused_fft_rows_cpu_0 is the
r2c, ..._1 the c2r, or the product between them where it is not fused) and the rest of the call (buffers, the
wrapper). Use a fresh TORCHINDUCTOR_CACHE_DIR to compare commits: torch.compile's graph cache does not key on
aotcuda's version (docs/performance.md, "Caveats").
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]
import fft as programs  # noqa: E402  (benchmarks/fft.py)
from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402


def _timed(times: dict, name: str, kernel):
    def run(*args):
        started = time.perf_counter()
        kernel(*args)
        times.setdefault(name, []).append(time.perf_counter() - started)

    return run


def _median_us(fn, calls: int) -> float:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def measure(n: int, rows: int, calls: int) -> None:
    from torch._inductor.codecache import PyCodeCache

    model, x, _, _ = programs.make_case("filter", n, types.SimpleNamespace(signals=rows))
    rewritten = ReplaceComplexWithRealPass(strict=True)(torch.export.export(model, (x,)).run_decompositions())
    before = {id(m) for m in PyCodeCache.modules}
    ours, library = torch.compile(rewritten.module()), torch.compile(model)
    with torch.no_grad():
        ours(x), library(x)
        (module,) = [m for m in PyCodeCache.modules if id(m) not in before and "fft_rows_cpu" in repr(vars(m).keys())]
        times: dict = {}
        for name in [k for k in vars(module) if k.startswith("cpp_fused")]:
            setattr(module, name, _timed(times, name, getattr(module, name)))
        whole = _median_us(lambda: ours(x), calls)
        reference = _median_us(lambda: library(x), calls)
    kernels = {name: statistics.median(samples) * 1e6 for name, samples in times.items()}
    print(f"n = {n}, {rows} rows, {torch.get_num_threads()} threads: the program {whole:.0f} µs a call, the library's {reference:.0f} µs "
          f"({whole / reference:.2f}×)")
    for name, us in kernels.items():
        print(f"  {us:8.0f} µs  {name}")
    print(f"  {whole - sum(kernels.values()):8.0f} µs  the rest of the call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for n in args.sizes:
        measure(n, args.rows, args.calls)


if __name__ == "__main__":
    main()
