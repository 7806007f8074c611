"""FFT as DFT-matrix products (ReplaceComplexWithRealPass) against the FFT fallback kernels, per length n.

    python benchmarks/fft.py                       # CPU
    python benchmarks/fft.py --device cuda         # the H200 row set (cuFFT fallback vs DFT GEMMs)

The program is a spectral filter, as in FNO layers and spectral mixers: rfft along the last dim →
multiply by a complex weight per frequency → irfft, on x of shape [signals, n] in float32. "fallback"
compiles the exported program as it is (Inductor calls pocketfft/cuFFT for _fft_r2c/_fft_c2r); "DFT"
compiles the program after the pass (one real GEMM per transform; the pass's MAX_DFT_SIZE is lifted
for the measurement). Both with torch.compile (Inductor, the code AOTInductor generates too) of the
ExportedProgram's module; times are medians of torch.utils.benchmark per call, in µs. One table out.
"""

from __future__ import annotations

import argparse

import torch
from torch.utils import benchmark

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.rules import fft as fft_rules

from _common import relative_error


class SpectralFilter(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n // 2 + 1, dtype=torch.complex64) / n)

    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x) * self.weight, n=x.shape[-1])


def _median_us(fn, x) -> float:
    fn(x), fn(x)  # compile and warm up
    timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x})
    return timer.blocked_autorange(min_run_time=1.0).median * 1e6


def measure(n: int, signals: int, device: str) -> tuple[float, float, float]:
    model = SpectralFilter(n).to(device)
    x = torch.randn(signals, n, device=device)
    ep = torch.export.export(model, (x,)).run_decompositions()
    fft_rules.MAX_DFT_SIZE = max(fft_rules.MAX_DFT_SIZE, n)
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    torch._dynamo.reset()
    fallback = torch.compile(ep.module())
    dft = torch.compile(rewritten.module())
    with torch.no_grad():
        error = relative_error(dft(x), model(x))
        return _median_us(fallback, x), _median_us(dft, x), error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128, 256, 512, 1024])
    parser.add_argument("--signals", type=int, default=512, help="rows of x (batch × channels)")
    args = parser.parse_args()
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"{name}, torch {torch.__version__}, {torch.get_num_threads()} threads, x = [{args.signals}, n] float32")
    print("| n | FFT fallback (µs) | DFT products (µs) | DFT / fallback | rel. error vs eager |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        fallback_us, dft_us, error = measure(n, args.signals, args.device)
        print(f"| {n} | {fallback_us:.1f} | {dft_us:.1f} | {dft_us / fallback_us:.2f}× | {error:.1e} |", flush=True)


if __name__ == "__main__":
    main()
