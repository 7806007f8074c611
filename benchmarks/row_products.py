"""Few-row matrix products on CUDA (a decode step's projections and LM head): Inductor against
aotcuda::row_product, against a device copy of the weight.

    python benchmarks/row_products.py [--rows 1 2 4 8] [--products "w2" "LM head" ...] [--json out.json]

The products of one step of benchmarks/decode.py's decoder (dim 2048, FFN 8192, vocab 32000, bf16): wq and
wo (2048 → 2048), q/k/v as one product (2048 → 3072), w1/w3 as one (2048 → 16384), w2 (8192 → 2048) and
the LM head (2048 → 32000). Rows: "Inductor" (``x @ w.t()`` under torch.compile with
coordinate_descent_tuning, as aotcuda's CUDA lowering compiles it), "Inductor max-autotune" (the same with
max_autotune_gemm: Inductor times its Triton matrix-product templates against cuBLAS for the shape and keeps
the faster), "cuBLAS" (``torch.nn.functional.linear`` in eager), "row_product kernel" (RowProductsPass's
op). Each timed as a CUDA graph replay (triton.testing.do_bench_cudagraph, median); "of copy": the time of a
device copy of the weight's bytes in the same run over the row's time. Error: against float64 on the same
values. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import graph_replay_row, markdown_row, write_device_rows  # noqa: E402

PRODUCTS = {"wq, wo": (2048, 2048), "q/k/v": (2048, 3072), "w1/w3": (2048, 16384), "w2": (8192, 2048),
            "LM head": (2048, 32000),
            "Llama LM head": (2048, 128256)}


def _product(x, w):
    return x @ w.t()


def _autotuned_product(x, w):  # its own code object: Dynamo caches compiled code per code object
    return x @ w.t()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--products", nargs="+", choices=list(PRODUCTS), default=list(PRODUCTS))
    parser.add_argument("--json")
    options = parser.parse_args()
    import torch._inductor.config as inductor_config
    from triton.testing import do_bench_cudagraph

    import aotcuda.kernels.row_product  # noqa: F401 - registers the op

    inductor_config.coordinate_descent_tuning = True
    # one compile per shape and function: past Dynamo's default limit of 8 it would run the rest eagerly
    torch._dynamo.config.cache_size_limit = 1024
    results = []
    print(markdown_row("rows", "product", "how it runs", "µs", "of copy", "rel. error"))
    print(markdown_row(*["---"] * 6))
    for rows in options.rows:
        for name in options.products:
            k, n = PRODUCTS[name]
            x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
            weight = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
            target = torch.empty_like(weight)
            copy_us = do_bench_cudagraph(lambda: target.copy_(weight)) * 1e3
            # float64 in column blocks: at 8 x 128256 one float64 product came back all zeros on the H200
            want = torch.cat([x.double() @ block.double().t() for block in weight.split(32768)], dim=1)
            variants = {"Inductor": torch.compile(_product, dynamic=False),
                        "Inductor max-autotune": torch.compile(_autotuned_product, dynamic=False,
                                                               options={"max_autotune_gemm": True}),
                        "cuBLAS": torch.nn.functional.linear,
                        "row_product kernel": lambda x, w: torch.ops.aotcuda.row_product(x, w.t(), None)}
            print(markdown_row(rows, name, "device copy of the weight", f"{copy_us:.1f}", "100%", ""))
            for variant, run in variants.items():
                row = graph_replay_row((rows, name, variant), run, (x, weight), want, copy_us)
                results.append({"rows": rows, "product": name, "row": variant, **row})
    write_device_rows(options.json, results)

if __name__ == "__main__":
    main()
