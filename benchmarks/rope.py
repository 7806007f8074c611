"""Llama-style q/k rotary embedding on CUDA: every way to run it, against a device copy of the same bytes.

    python benchmarks/rope.py [--batch 4 --seq 4096 --heads 32 --head-dim 128] [--json out.json]

The A/B of the complex product's forms (the product keeps one) is benchmarks/scripts/pair_mul_forms.py,
which times its rows with this script's functions.

One run prints one table: median time (triton.testing.do_bench, CUDA events), the ratio to a
device-to-device copy of the same bytes measured in the same run, and the relative error
‖out − ref‖ / ‖ref‖ of each variant against a float64 reference. q and k are bfloat16 in and out; the
math runs in float32 as the model writes it. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import relative_error  # noqa: E402
from rope_modules import ComplexRope, RealRope, rotary_angles  # noqa: E402


def reference(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 rotation of q and k, [B, S, H, D] each."""
    seq, head_dim = q.shape[1], q.shape[-1]
    angles = rotary_angles(head_dim, seq).double().to(q.device)
    cos, sin = angles.cos().view(1, seq, 1, -1), angles.sin().view(1, seq, 1, -1)

    def rotate(x):
        re, im = x.double().unflatten(-1, (-1, 2)).unbind(-1)
        return torch.stack([re * cos - im * sin, re * sin + im * cos], -1).flatten(3)

    return rotate(q), rotate(k)


def aoti_package(module, args, path):
    ep = torch.export.export(module, args)
    return torch._inductor.aoti_compile_and_package(ep, package_path=path)


def build_variants(q, k, workdir):
    """(name, callable, compile seconds or None, note) for each variant that this torch can run."""
    import aotcuda
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()  # torch's own AOTI loader needs it on the H200 machine too
    head_dim, seq = q.shape[-1], q.shape[1]
    complex_rope = ComplexRope(head_dim, seq).cuda()
    real_rope = RealRope(head_dim, seq).cuda()
    def timed(build):
        """(the callable build() returns, seconds to build it and run it once)."""
        start = time.perf_counter()
        fn = build()
        fn()
        torch.cuda.synchronize()
        return fn, time.perf_counter() - start

    def compiled(module):
        return lambda: (lambda m=torch.compile(module): m(q, k))

    def aoti(module, name):
        def build():
            runner = torch._inductor.aoti_load_package(aoti_package(module, (q, k), f"{workdir}/{name}.pt2"))
            return lambda: runner(q, k)

        return build

    def ours(cuda_graphs, bind=False, configs=None, in_place=True):
        def build():
            package = f"{workdir}/ours{'-' + '-'.join(configs) if configs else ''}.pt2"
            if not os.path.exists(package):  # one lowering serves every aotcuda row of these options
                aotcuda.lower(complex_rope, (q, k), device="cuda", package_path=package, inductor_configs=configs)
            before = os.environ.get("AOTCUDA_GRAPHS_IN_PLACE")
            os.environ["AOTCUDA_GRAPHS_IN_PLACE"] = "1" if in_place else "0"  # read at load
            try:
                program = aotcuda.load(package, cuda_graphs=cuda_graphs)
            finally:
                os.environ.pop("AOTCUDA_GRAPHS_IN_PLACE")
                if before is not None:
                    os.environ["AOTCUDA_GRAPHS_IN_PLACE"] = before
            if bind:  # the graph reads q and k where they are and writes its own output buffers
                return program.bind([q, k]).replay
            return lambda: program(q, k)

        return build

    variants = [copy_variant(q, k), ("eager, complex math", lambda: complex_rope(q, k), None, "")]
    for name, build, note in [
        ("torch.compile, complex math", compiled(complex_rope), "fallback kernels"),
        ("AOTInductor, complex math", aoti(complex_rope, "complex"), "fallback kernels"),
        ("torch.compile, hand-written real math", compiled(real_rope), ""),
        ("AOTInductor, hand-written real math", aoti(real_rope, "real"), ""),
    ]:
        variants.append((name, *timed(build), note))
    variants.extend(torch_complex_tensor_variant(complex_rope, q, k))
    variants.append(("aotcuda (complex math rewritten as real)", *timed(ours(False)), "0 fallback kernels"))
    variants.append(("aotcuda, CUDA graph replay", timed(ours(True))[0], None,
                     "same package; q, k where the last call's were: the graph reads them in place"))
    variants.append(("aotcuda, CUDA graph replay, inputs copied in", timed(ours(True, in_place=False))[0], None,
                     "same package, AOTCUDA_GRAPHS_IN_PLACE=0: each call copies q, k into the graph's buffers"))
    variants.append(("aotcuda, bound CUDA graph (Program.bind, zero-copy)", timed(ours(False, bind=True))[0], None,
                     "same package; replay reads q, k in place, outputs in the graph's buffers"))
    return variants


def copy_variant(q, k):
    """The floor: a device copy of q and k."""
    q_copy, k_copy = torch.empty_like(q), torch.empty_like(k)

    def copy():
        q_copy.copy_(q)
        k_copy.copy_(k)
        return q_copy, k_copy

    return ("device copy of the same bytes", copy, None, "the floor")


def torch_complex_tensor_variant(module, q, k):
    """torch's own complex-as-two-real-tensors subclass under torch.compile, where this torch has it."""
    try:
        from torch._subclasses.complex_tensor import ComplexTensorMode
    except ImportError:
        return [("torch.compile + torch's ComplexTensor", None, None, f"not in torch {torch.__version__}")]
    try:
        compiled = torch.compile(module)

        def run():
            with ComplexTensorMode():
                return compiled(q, k)

        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        return [("torch.compile + torch's ComplexTensor", run, time.perf_counter() - start, "")]
    except Exception as exc:  # report, do not hide: the table says why it could not run
        return [("torch.compile + torch's ComplexTensor", None, None, f"failed: {type(exc).__name__}")]


def measure(variants, refs) -> list[dict]:
    """One row per (name, callable or None, compile seconds, note): median µs (triton.testing.do_bench) and
    the relative error against ``refs``; the copy's error is 0 by definition."""
    import triton.testing

    rows = []
    for name, fn, compile_s, note in variants:
        if fn is None:
            rows.append(dict(variant=name, us=None, error=None, compile_s=None, note=note))
            continue
        error = relative_error(fn(), refs) if "copy" not in name else 0.0
        us = 1e3 * triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
        rows.append(dict(variant=name, us=us, error=error, compile_s=compile_s, note=note))
    return rows


def report(rows: list[dict], q: torch.Tensor, json_path: str | None) -> None:
    """Print the rows as one Markdown table, the first row (the copy) the floor; write them to json_path."""
    shape = tuple(q.shape)
    floor = rows[0]["us"]
    moved_gb = 4 * q.numel() * q.element_size() / 1e9
    print(f"\nRoPE q/k {list(shape)} bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{moved_gb:.3f} GB moved; copy {moved_gb / floor * 1e3:.2f} TB/s")
    print("| variant | median µs | vs. copy | rel. error vs fp64 | compile s | note |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        us = f"{r['us']:.1f}" if r["us"] is not None else "n/a"
        ratio = f"{r['us'] / floor:.3f}" if r["us"] is not None else "n/a"
        err = f"{r['error']:.1e}" if r["error"] is not None else "n/a"
        comp = f"{r['compile_s']:.1f}" if r["compile_s"] is not None else ""
        print(f"| {r['variant']} | {us} | {ratio} | {err} | {comp} | {r['note']} |")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(dict(shape=shape, device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f,
                      indent=1)


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """--batch, --seq, --heads, --head-dim of q and k (the Llama shape by default), and --json."""
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--json", help="write the rows here too")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser)
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/rope.py needs a CUDA device")
    shape = (opts.batch, opts.seq, opts.heads, opts.head_dim)
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory() as workdir:
        variants = build_variants(q, k, workdir)
        copy_row = [v for v in variants if "copy" in v[0]]
        rows = measure(copy_row + [v for v in variants if "copy" not in v[0]], reference(q, k))
    report(rows, q, opts.json)


if __name__ == "__main__":
    main()
