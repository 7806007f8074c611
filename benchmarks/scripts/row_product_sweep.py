"""aotcuda::row_product's plans swept on a decode step's few-row products, beside cuBLAS and Inductor, on CUDA.

    python3 benchmarks/scripts/row_product_sweep.py [--rows 8 1] [--products w2 ...] [--budget 190] [--rep 10]
        [--json out.json]

The products (bf16, x [rows, K] @ W^T, W [N, K] a linear layer's weight): wq/wo 2048 → 2048, q/k/v as one
2048 → 3072, w1/w3 as one 2048 → 16384, w2 8192 → 2048, the LM heads 2048 → 32000 (our decoder) and
2048 → 128256 (Llama). For each, CUDA graph replays (triton.testing.do_bench_cudagraph) of: a device copy
of the weight's bytes (the bound, "of copy" = its time over the row's), cuBLAS (F.linear), Inductor
(``x @ w.t()`` under torch.compile with coordinate_descent_tuning, as the lowering compiles it), the op as
the lowering calls it (its tuning's choice among kernels/row_product.py's WHOLE or SPLIT, printed), and
each plan of PLANS run fixed (block_n, block_k, split_k, warps, stages; split_k 1 is the whole form, more
adds the summing kernel, which each row's time includes). Error: against float64 on the same values.

The baselines and the op's choice are timed first for every shape; the fixed plans then shape by shape
until --budget seconds have passed since the start (the rest are listed as skipped). Ends with the best
plan per shape. About 3 minutes on an H200 with the defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import graph_replay_row, markdown_row, write_device_rows  # noqa: E402

PRODUCTS = {"wq/wo": (2048, 2048), "q/k/v": (2048, 3072), "w1/w3": (2048, 16384), "w2": (8192, 2048),
            "LM head 32k": (2048, 32000), "LM head 128k": (2048, 128256)}


def sweep_plans():
    """The tuning's lists, then splits and tiles around them (2 and 32 slices, 256-column whole blocks)."""
    from aotcuda.kernels.row_product import SPLIT, WHOLE, Plan

    extra = (Plan(64, 128, 2, 4, 4), Plan(128, 128, 4, 4, 4), Plan(32, 256, 8, 4, 4), Plan(64, 64, 8, 4, 6),
             Plan(64, 128, 32, 4, 3), Plan(128, 64, 16, 4, 4), Plan(256, 64, 1, 8, 4))
    return SPLIT + WHOLE + extra


def _inputs(rows: int, k: int, n: int):
    x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
    weight = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
    return x, weight, x.double() @ weight.double().t()


def _copy_us(weight: torch.Tensor, rep: int) -> float:
    from triton.testing import do_bench_cudagraph

    target = torch.empty_like(weight)
    return do_bench_cudagraph(lambda: target.copy_(weight), rep=rep) * 1e3


def _inductor(x: torch.Tensor, weight: torch.Tensor):
    """x @ w.t() compiled for this shape alone (a reset: no dynamic shapes from an earlier one)."""
    torch._dynamo.reset()
    return torch.compile(lambda x, w: x @ w.t(), dynamic=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--products", nargs="+", default=list(PRODUCTS), choices=list(PRODUCTS))
    parser.add_argument("--budget", type=float, default=190.0, help="seconds after which no more fixed plans run")
    parser.add_argument("--rep", type=int, default=10, help="milliseconds of replays a timing")
    parser.add_argument("--json")
    options = parser.parse_args()
    start = time.monotonic()
    import torch._inductor.config as inductor_config

    from aotcuda.kernels import row_product

    inductor_config.coordinate_descent_tuning = True
    shapes = [(rows, name, *PRODUCTS[name]) for rows in options.rows for name in options.products]
    results, copies = [], {}

    def timed(cells, run, args, want, copy_us, **extra):
        try:
            row = graph_replay_row(cells, run, args, want, copy_us, rep=options.rep)
        except Exception as error:  # a plan that does not compile or launch: say so, go on
            print(markdown_row(*cells, "failed", "", f"{type(error).__name__}: {str(error)[:80]}"))
            return
        results.append({"rows": cells[0], "product": cells[1], "row": cells[2], "plan": cells[3], **extra, **row})

    print(markdown_row("rows", "product", "how it runs", "plan (block_n, block_k, split_k, warps, stages)", "µs",
                       "of copy", "rel. error"))
    print(markdown_row(*["---"] * 7))
    skipped = 0
    for rows, name, k, n in shapes:
        if time.monotonic() - start > options.budget:
            skipped += 1
            continue
        x, weight, want = _inputs(rows, k, n)
        copy_us = copies[name] = _copy_us(weight, options.rep)
        print(markdown_row(rows, name, "device copy of the weight", "", f"{copy_us:.1f}", "100%", ""))
        timed((rows, name, "cuBLAS", ""), torch.nn.functional.linear, (x, weight), want, copy_us)
        timed((rows, name, "Inductor", ""), _inductor(x, weight), (x, weight), want, copy_us)
        op = torch.ops.aotcuda.row_product
        op(x, weight.t(), None)  # the tuning runs here, outside the timing
        chosen = row_product.tuned_choice(x, weight.t())
        timed((rows, name, "op (tuned)", tuple(chosen) if chosen else "?"), lambda x, w: op(x, w.t(), None),
              (x, weight), want, copy_us)
        del x, weight, want
    for rows, name, k, n in shapes:
        if name not in copies:
            continue
        x, weight, want = _inputs(rows, k, n)
        for plan in sweep_plans():
            if time.monotonic() - start > options.budget:
                skipped += 1
                continue
            timed((rows, name, "plan", tuple(plan)), lambda x, w, plan=plan: row_product.launch(x, w.t(), None, plan),
                  (x, weight), want, copies[name])
        del x, weight, want
    if skipped:
        print(f"\n--budget {options.budget:.0f} s spent: {skipped} shapes or fixed plans not timed")
    _print_best(results, copies, shapes)
    print(f"\n{time.monotonic() - start:.0f} s")
    write_device_rows(options.json, results)


def _print_best(results: list, copies: dict, shapes: list) -> None:
    """Per shape: the fastest fixed plan beside cuBLAS, Inductor and the op's tuned choice."""
    print("\n" + markdown_row("rows", "product", "best plan", "µs", "of copy", "cuBLAS µs", "Inductor µs",
                              "op (tuned) µs", "best vs cuBLAS"))
    print(markdown_row(*["---"] * 9))
    for rows, name, _, _ in shapes:
        mine = [r for r in results if r["rows"] == rows and r["product"] == name]
        by_row = {r["row"]: r["us"] for r in mine if r["row"] != "plan"}
        plans = [r for r in mine if r["row"] == "plan"]
        if not plans:
            continue
        best = min(plans, key=lambda r: r["us"])
        cublas = by_row.get("cuBLAS")
        print(markdown_row(rows, name, best["plan"], f"{best['us']:.1f}", f"{copies[name] / best['us']:.0%}",
                           f"{cublas:.1f}" if cublas else "", f"{by_row.get('Inductor', 0):.1f}",
                           f"{by_row.get('op (tuned)', 0):.1f}", f"{cublas / best['us']:.2f}x" if cublas else ""))


if __name__ == "__main__":
    main()
