"""Issue 30: a complex product fused into aotcuda::fft_rows's `weight` against the product as its own kernel.

    python3 benchmarks/scripts/fft_weight_ab.py [--sizes 64 400 1024 4096 1009 4093] [--rows 4096]

For each length n and kind (c2r: a spectral filter's irfft of rfft(x)·w, n//2 + 1 bins a row; c2c: an ifft of
a product), float32 x of `rows` rows along the last dim and one weight per point broadcast over the rows
(w [points, 2]), median time of a CUDA graph of the call replayed (triton.testing.do_bench_cudagraph: the
op's Python launch path is not timed; the tables are built once beforehand, as a lowered program holds them) of
  separate: the product (x times w as complex numbers, one elementwise kernel, as Inductor writes the pair
            product) then fft_rows of it;
  fused:    fft_rows(x, weight=w), which multiplies as it loads (what spectral/product.py lowers it to);
and the fused kernel's relative error against the separate one. CUDA only. Prints a markdown table.
"""

from __future__ import annotations

import argparse

import torch


def _product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(w))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 400, 1024, 4096, 1009, 4093])
    parser.add_argument("--rows", type=int, default=4096)
    args = parser.parse_args()
    import triton.testing

    from aotcuda.kernels import fft_rows  # registers aotcuda::fft_rows

    op = torch.ops.aotcuda.fft_rows
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.rows} rows, float32, median µs")
    print("| n | kind | separate (product + transform) | fused (weight) | fused / separate | rel. error |")
    print("|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for n in args.sizes:
        for kind in ("c2r", "c2c"):
            points = n // 2 + 1 if kind == "c2r" else n
            x = torch.randn(args.rows, points, 2, device="cuda")
            w = torch.randn(points, 2, device="cuda")
            tables = fft_rows.tables_for(n, kind, True, x.device)
            call = (x, tables, 1, n, n, kind, True, 1.0 / n, None)

            def separate():
                return op(_product(x, w), *call[1:])

            def fused():
                return op(*call, w)

            error = ((fused() - separate()).norm() / separate().norm()).item()
            apart = triton.testing.do_bench_cudagraph(separate, rep=200) * 1e3
            together = triton.testing.do_bench_cudagraph(fused, rep=200) * 1e3
            print(f"| {n} | {kind} | {apart:.1f} | {together:.1f} | {together / apart:.2f} | {error:.1e} |")


if __name__ == "__main__":
    main()
