"""Compile aotcuda::row_product's kernel (kernels/row_product.py) for a GPU without one, and print what each
plan of WHOLE and SPLIT costs it: registers a thread, bytes spilled, shared memory, the widest asynchronous
copy of a weight tile (16 bytes: 8 bf16 along K in one instruction) and whether its loop is pipelined.
Runs on any machine with Triton (its bundled ptxas); no device is touched.

    python3 benchmarks/scripts/row_product_resources.py [--dtype bf16 fp32] [--arch 90]

The arguments are typed as a launch of a bf16 linear layer's weight (K contiguous, sizes and strides
multiples of 16) with 8 rows would type them. Shared memory past 232448 bytes (the H200's per block) fails
to launch; a stack above 0 means spilled registers.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget

from aotcuda.kernels import row_product

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
POINTERS = ("X", "W", "Bias", "Out", "Part", "Splits")
INTEGERS = ("M", "N", "K", "sxm", "sxk", "swk", "swn", "som", "son")


def compile_plan(plan: row_product.Plan, dtype: str, arch: int) -> dict:
    """The kernel as launch() starts it for x [8, K] @ a linear layer's weight, compiled to a cubin."""
    kernel_fn = row_product._row_product_kernel
    constants = dict(HAS_BIAS=False, BLOCK_M=16, IEEE=dtype == "fp32", UNIT_K=True, BLOCK_N=plan.block_n,
                     BLOCK_K=plan.block_k, SPLIT_K=plan.split_k)
    types = {"X": f"*{dtype}", "W": f"*{dtype}", "Bias": f"*{dtype}", "Out": f"*{dtype}",
             "Part": "*fp32", "Splits": "*i32"}
    signature = {**types, **{name: "i32" for name in INTEGERS}, **{name: "constexpr" for name in constants}}
    constants.update(sxk=1, swk=1, son=1)  # a 1 argument is specialized as a constant, as a launch does
    signature.update(sxk="constexpr", swk="constexpr", son="constexpr")
    divisible = [name for name in (*POINTERS, "N", "K", "sxm", "swn", "som")]
    attrs = {(kernel_fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    source = triton.compiler.ASTSource(fn=kernel_fn, signature=signature, constexprs=constants, attrs=attrs)
    kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                            options={"num_warps": plan.warps, "num_stages": plan.stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([CUOBJDUMP, "-res-usage", cubin.name], capture_output=True, text=True).stdout
    registers, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
    copies = [int(b, 0) for b in re.findall(r"cp\.async\.c[ag]\.shared\.global\S* \[[^\]]+\], \[[^\]]+\], (0x[0-9a-f]+|\d+)",
                                            kernel.asm["ptx"])]
    return dict(registers=int(registers), stack=int(stack), shared=kernel.metadata.shared,
                widest_copy=max(copies, default=0), async_copies=len(copies),
                mma="mma.sync" in kernel.asm["ptx"] or "wgmma" in kernel.asm["ptx"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", nargs="+", default=["bf16"], choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--arch", type=int, default=90, help="compute capability × 10 (90: H100/H200)")
    args = parser.parse_args()
    print(f"sm_{args.arch}, Triton {triton.__version__}")
    print("| dtype | plan | registers | stack | shared | widest async copy (bytes) | async copies | tensor cores |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype in args.dtype:
        for plan in row_product._for_dtype(row_product.WHOLE + row_product.SPLIT, 4 if dtype == "fp32" else 2):
            r = compile_plan(plan, dtype, args.arch)
            print(f"| {dtype} | {tuple(plan)} | {r['registers']} | {r['stack']} | {r['shared']} | {r['widest_copy']} | "
                  f"{r['async_copies']} | {'yes' if r['mma'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
