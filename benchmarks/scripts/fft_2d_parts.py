"""Where a 2-D transform's time goes (issue 30, FreeU): each 1-D transform of fftn over (H, W) alone, and
the whole program, in each form of the pass, against the library, with the CUDA kernels of each and their
share of the time (torch.profiler).

    python3 benchmarks/scripts/fft_2d_parts.py --shape 2x640x64x64        (CUDA; --forms gemm kernel)

Parts: "W" torch.fft.fft(x, dim=-1) (rows contiguous), "H" torch.fft.fft(x, dim=-2) (rows strided by W),
"HW" torch.fft.fftn(x, dim=(-2, -1)), "freeu" fft.py's FreeU program. Each is exported, rewritten by
ReplaceComplexWithRealPass (AOTCUDA_FFT_KERNEL per form) and run under torch.compile; the library row is
torch.compile of the program as written (cuFFT)."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

import torch
from torch.utils import benchmark

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from _common import relative_error  # noqa: E402
from fft import FreeUFourierFilter, _fft_kernel_switch  # noqa: E402

from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402


class Part(torch.nn.Module):
    def __init__(self, part: str):
        super().__init__()
        self.part = part

    def forward(self, x):
        if self.part == "W":
            return torch.view_as_real(torch.fft.fft(x, dim=-1))
        if self.part == "H":
            return torch.view_as_real(torch.fft.fft(x, dim=-2))
        return torch.view_as_real(torch.fft.fftn(x, dim=(-2, -1)))


def median_us(fn, x, min_run_time: float) -> float:
    return benchmark.Timer("fn(x)", globals={"fn": fn, "x": x}).blocked_autorange(min_run_time=min_run_time).median * 1e6


def kernel_table(fn, x, top: int) -> list[tuple[str, float]]:
    """(kernel name, µs a call) of the CUDA kernels of one call, the largest first."""
    if x.device.type != "cuda":
        return []
    fn(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn(x)
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 10) for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2x640x64x64")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parts", nargs="+", default=["W", "H", "HW", "freeu"])
    parser.add_argument("--forms", nargs="+", default=["gemm", "kernel"])
    parser.add_argument("--min-run-time", type=float, default=0.3)
    parser.add_argument("--top", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(tuple(int(s) for s in args.shape.split("x")), device=args.device)
    table = []
    for part in args.parts:
        model = FreeUFourierFilter() if part == "freeu" else Part(part)
        want = model.cpu().double()(x.cpu().double()).to(x.device)
        model = model.to(x.device)
        ep = torch.export.export(model, (x,)).run_decompositions()
        fns = {"library": torch.compile(ep.module())}
        for form in args.forms:
            with _fft_kernel_switch(form == "kernel"):
                fns[form] = torch.compile(ReplaceComplexWithRealPass(strict=True)(ep).module())
        with torch.no_grad():
            for name, fn in fns.items():
                fn(x)
                error = relative_error(fn(x), want)
                us = median_us(fn, x, args.min_run_time)
                kernels = kernel_table(fn, x, args.top)
                table.append((part, name, us, error, len(kernels)))
                print(f"== {part} {name}: {us:.1f} µs, error {error:.1e}", flush=True)
                for kernel, kus in kernels:
                    print(f"   {kus:8.1f} µs  {kernel[:110]}", flush=True)
    print("\n| part | form | µs | / library | error |\n|---|---|---|---|---|")
    library = {part: us for part, name, us, _, _ in table if name == "library"}
    for part, name, us, error, _ in table:
        print(f"| {part} | {name} | {us:.1f} | {us / library[part]:.2f}× | {error:.1e} |")


if __name__ == "__main__":
    main()
