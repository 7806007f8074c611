"""Where aotcuda::fft_rows_cpu's time goes: its C++ (kernels/fft_cpu.py kernel_body) built standalone with g++
into a shared library, run through ctypes on [rows, n] float32 rows on one thread, against pocketfft
(torch.fft on one thread), whole and in parts: the loads (g: gather into the planes, and c2r's merge), the
Stockham stages (s), the stores (t: r2c's split and the scatter to the output).

    python3 benchmarks/scripts/fft_cpu_kernel_parts.py --sizes 512 1024 [--rows 512] [--inductor-flags]

--inductor-flags builds with the flags Inductor's C++ builder adds (-fno-tree-loop-vectorize -ffp-contract=off):
the kernel's butterflies are written on GCC vector types so that they stay vector code under them (first
written as `#pragma omp simd` loops, which those flags left scalar: 1074 µs against 262 for the r2c at
n = 512, 512 rows). Each part alone leaves the others' planes as they were: the parts' times add up to about
the whole, not exactly. Needs g++ with -fopenmp (the AVX2 transposes where the CPU has AVX2).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "src"))
from aotcuda.kernels import fft_cpu_source  # noqa: E402

INDUCTOR_FLAGS = ("-fno-tree-loop-vectorize", "-ffp-contract=off")


def build(n: int, kind: str, parts: str, flags: tuple):
    """The kernel of a length-n r2c (or c2r) over contiguous [R, n] rows, keeping only `parts` (g, s, t)."""
    bins = n // 2 + 1
    in_len, out_len = (n, bins) if kind == "r2c" else (bins, n)
    tables, gather, stages, store = fft_cpu_source.kernel_source(n, kind, kind == "c2r", in_len, out_len, 1.0, False)
    keep = {"g": gather, "s": stages, "t": store}
    original = fft_cpu_source.kernel_source
    fft_cpu_source.kernel_source = lambda *a, **k: (tables, *[keep[p] if p in parts else [] for p in "gst"])
    try:
        pair_in, pair_out = kind != "r2c", kind != "c2r"
        pre, body = fft_cpu_source.kernel_body(
            n, kind, kind == "c2r", in_len, out_len, 1.0, False, ["R"], [str(in_len * (2 if pair_in else 1))],
            [str(out_len * (2 if pair_out else 1))], "2" if pair_in else "1", "1" if pair_in else "0",
            "2" if pair_out else "1", "1" if pair_out else "0", "1", "0", "0", "float", True)
    finally:
        fft_cpu_source.kernel_source = original
    source = pre + 'extern "C" void k(const float* X, const float* WIN, float* Y, int64_t R) {\n' + body + "\n}\n"
    folder = tempfile.mkdtemp()
    path, library = os.path.join(folder, "k.cpp"), os.path.join(folder, "k.so")
    pathlib.Path(path).write_text(source)
    subprocess.check_call(["g++", "-O3", "-march=native", *flags, "-fopenmp", "-shared", "-fPIC", path, "-o", library])
    return ctypes.CDLL(library).k


def best_us(fn, calls: int = 30, repeat: int = 7) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--inductor-flags", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    flags = INDUCTOR_FLAGS if args.inductor_flags else ()
    print("| n | kind | whole (µs) | loads | stages | stores | pocketfft (µs) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for kind in ("r2c", "c2r"):
            bins = n // 2 + 1
            x = torch.randn(args.rows, n) if kind == "r2c" else torch.randn(args.rows, bins, 2)
            y = torch.empty(args.rows, bins, 2) if kind == "r2c" else torch.empty(args.rows, n)
            call = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(0), ctypes.c_void_p(y.data_ptr()),
                    ctypes.c_int64(args.rows))
            times = {}
            for parts in ("gst", "g", "s", "t"):
                kernel = build(n, kind, parts, flags)
                times[parts] = best_us(lambda: kernel(*call))
            if kind == "r2c":
                library = best_us(lambda: torch.fft.rfft(x))
            else:
                spectrum = torch.view_as_complex(x)
                library = best_us(lambda: torch.fft.irfft(spectrum, n=n))
            print(f"| {n} | {kind} | {times['gst']:.1f} | {times['g']:.1f} | {times['s']:.1f} | {times['t']:.1f} | "
                  f"{library:.1f} | {times['gst'] / library:.2f}× |")


if __name__ == "__main__":
    main()
