"""Llama-style q/k rotary embedding on CUDA: every way to run it, against a device copy of the same bytes.

    python benchmarks/rope.py [--batch 4 --seq 4096 --heads 32 --head-dim 128] [--json out.json]

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


def relative_error(outs, refs) -> float:
    num = sum(float((o.double() - r).norm() ** 2) for o, r in zip(outs, refs))
    den = sum(float(r.norm() ** 2) for r in refs)
    return (num / den) ** 0.5


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
    q_copy, k_copy = torch.empty_like(q), torch.empty_like(k)

    def copy():
        q_copy.copy_(q)
        k_copy.copy_(k)
        return q_copy, k_copy

    variants = [("device copy of the same bytes", copy, None, "the floor")]
    variants.append(("eager, complex math", lambda: complex_rope(q, k), None, ""))

    def timed(build):
        start = time.perf_counter()
        fn = build()
        fn()
        torch.cuda.synchronize()
        return fn, time.perf_counter() - start

    fn, secs = timed(lambda: (lambda m=torch.compile(complex_rope): m(q, k)))
    variants.append(("torch.compile, complex math", fn, secs, "fallback kernels"))

    def aoti_complex():
        runner = torch._inductor.aoti_load_package(aoti_package(complex_rope, (q, k), f"{workdir}/c.pt2"))
        return lambda: runner(q, k)

    fn, secs = timed(aoti_complex)
    variants.append(("AOTInductor, complex math", fn, secs, "fallback kernels"))

    fn, secs = timed(lambda: (lambda m=torch.compile(real_rope): m(q, k)))
    variants.append(("torch.compile, hand-written real math", fn, secs, ""))

    def aoti_real():
        runner = torch._inductor.aoti_load_package(aoti_package(real_rope, (q, k), f"{workdir}/r.pt2"))
        return lambda: runner(q, k)

    fn, secs = timed(aoti_real)
    variants.append(("AOTInductor, hand-written real math", fn, secs, ""))
    variants.extend(torch_complex_tensor_variant(complex_rope, q, k))

    def ours(cuda_graphs):
        def build():
            lowered = aotcuda.lower(complex_rope, (q, k), device="cuda", package_path=f"{workdir}/a.pt2")
            program = aotcuda.load(lowered.package_path, cuda_graphs=cuda_graphs)
            return lambda: program(q, k)

        return build

    fn, secs = timed(ours(False))
    variants.append(("aotcuda (complex math rewritten as real)", fn, secs, "0 fallback kernels"))
    fn, _ = timed(ours(True))
    variants.append(("aotcuda, CUDA graph replay", fn, None, "same package"))
    return variants


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--json", help="write the rows here too")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/rope.py needs a CUDA device")
    import triton.testing

    shape = (opts.batch, opts.seq, opts.heads, opts.head_dim)
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    refs = reference(q, k)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, fn, compile_s, note in build_variants(q, k, workdir):
            if fn is None:
                rows.append(dict(variant=name, us=None, error=None, compile_s=None, note=note))
                continue
            error = relative_error(fn(), refs) if "copy" not in name else 0.0
            us = 1e3 * triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
            rows.append(dict(variant=name, us=us, error=error, compile_s=compile_s, note=note))
    floor = rows[0]["us"]
    moved_gb = 4 * q.numel() * q.element_size() / 1e9
    print(f"\nRoPE q/k {list(shape)} bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{moved_gb:.3f} GB moved; copy {moved_gb / floor * 1e3:.2f} TB/s")
    print(f"| variant | median µs | vs. copy | rel. error vs fp64 | compile s | note |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        us = f"{r['us']:.1f}" if r["us"] is not None else "n/a"
        ratio = f"{r['us'] / floor:.2f}" if r["us"] is not None else "n/a"
        err = f"{r['error']:.1e}" if r["error"] is not None else "n/a"
        comp = f"{r['compile_s']:.1f}" if r["compile_s"] is not None else ""
        print(f"| {r['variant']} | {us} | {ratio} | {err} | {comp} | {r['note']} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict(shape=shape, device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
