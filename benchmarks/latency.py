"""Decode-sized latency on CUDA: the demo block at B=1, S=1 in bfloat16, launch-bound.

    python benchmarks/latency.py [--dim 1024 --heads 16] [--json out.json]

Per-call time (median of triton.testing.do_bench, which times back-to-back calls with CUDA events, so
host-side launch overhead counts) of eager, torch.compile (default and mode="reduce-overhead"),
torch's own AOTI loader (`torch._inductor.aoti_load_package`), and aotcuda's runtime without and with
CUDA graphs (three warm-up calls, capture, replay; inputs copied into static buffers), and a graph bound
to a static input with ``Program.bind`` (replay only). Targets: aotcuda.load at or below the AOTI loader;
aotcuda's CUDA-graph replay within 3 µs of the captured graph alone (the last row). Every row is checked against eager.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import relative_error  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=1)
    parser.add_argument("--json")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/latency.py needs a CUDA device")
    import triton.testing

    import aotcuda
    from aotcuda.models.attention import attention_block
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()
    model, (x,) = attention_block("cuda", torch.bfloat16, batch=opts.batch, seq=opts.seq, dim=opts.dim,
                                  n_heads=opts.heads)
    with torch.no_grad():
        ref = model(x)
    variants = {"eager": model}
    variants["torch.compile"] = torch.compile(model)
    variants['torch.compile mode="reduce-overhead"'] = torch.compile(model, mode="reduce-overhead")
    with tempfile.TemporaryDirectory() as workdir:
        lowered = aotcuda.lower(model, (x,), device="cuda", package_path=f"{workdir}/block.pt2")
        variants["torch's AOTI loader (aoti_load_package)"] = torch._inductor.aoti_load_package(lowered.package_path)
        variants["aotcuda.load"] = aotcuda.load(lowered.package_path)
        variants["aotcuda.load, CUDA graphs"] = aotcuda.load(lowered.package_path, cuda_graphs=True)
        bound = aotcuda.load(lowered.package_path).bind([x.clone()])  # the graph reads this tensor in place
        variants["aotcuda, bound CUDA graph (Program.bind(...).replay())"] = lambda _x: bound.replay()
        rows = []
        with torch.no_grad():
            for name, fn in variants.items():
                for _ in range(5):  # warm-up: compiles, CUDA-graph capture
                    out = fn(x)
                out = out[0] if isinstance(out, (list, tuple)) else out
                us = 1e3 * triton.testing.do_bench(lambda: fn(x), warmup=50, rep=500, return_mode="median")
                rows.append(dict(variant=name, us=us, error=relative_error(out, ref)))
            # The floor: the captured graph replayed alone (no input copy, no output copy, no Python
            # checks) is the GPU time of the package's kernels; no runtime can go below it.
            graph = bound.graph
            us = 1e3 * triton.testing.do_bench(graph.replay, warmup=50, rep=500, return_mode="median")
            rows.append(dict(variant="the captured graph alone (GPU time of the kernels: the floor)", us=us,
                             error=None))
    print(f"\nDemo block dim {opts.dim}, {opts.heads} heads, B={opts.batch}, S={opts.seq}, bf16, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    aoti = next(r["us"] for r in rows if r["variant"].startswith("torch's AOTI"))
    print("| how it runs | µs per call | vs. torch's AOTI loader | rel. error vs eager |")
    print("|---|---|---|---|")
    for r in rows:
        error = "" if r["error"] is None else f"{r['error']:.1e}"
        print(f"| {r['variant']} | {r['us']:.1f} | {r['us'] / aoti:.2f} | {error} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict(rows=rows, torch=torch.__version__), f, indent=1)


if __name__ == "__main__":
    main()
