"""Compile aotcuda::fft_rows's kernel (kernels/fft_rows.py) for a GPU without one, and print what each
length costs it: registers a thread, bytes spilled to the stack, shared memory, and whether tl.dot became
Hopper's wgmma. Runs on any machine with Triton (its bundled ptxas); no device is touched.

    python3 benchmarks/scripts/fft_kernel_resources.py                       # sm_90, the default lengths
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 64 400 --kinds c2c r2c c2r --arch 90
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 400 --kinds r2c --windows yes   # stft's
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 67 1009 2039 4093  # Bluestein
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 4093 --windows no --warps 4 8 16 --bluestein-halves no
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 512 1009 --kinds c2r --windows no --weights no yes
    python3 benchmarks/scripts/fft_kernel_resources.py --sizes 4093 --windows no --halves-as-parts yes  # 2 parts

"window yes" compiles the kernel with its window operand (stft's window multiply, fused; c2c and r2c). A
length no tiling covers compiles the Bluestein kernel (kernels/fft_bluestein.py); --bluestein-tile sets
fft_plan.BLUESTEIN_TILE for the run (default the module's, 8192: n up to 4096, m up to 8192; 4096: n up to 2048),
--bluestein-halves fft_plan.BLUESTEIN_HALVES (yes, the default: an m past 4096 as two halves of m/2; no: one
tile of m). --warps compiles each case at each of these warps instead of the default launch's. "weights yes"
compiles the kernel with its weight operand (a spectral filter's complex product, fused; c2c and c2r).
--three-products yes compiles float32 data's complex products as Gauss's three real products instead of four
(fft_rows.THREE_PRODUCTS), for A/B: one run each way (Triton keys a kernel's cache on the globals it read at
its first compile, so the flag is set once, before any).

A stack above 0 means spilled registers (LDL/STL: the spill loads and stores in the machine code); a thread
over 128 registers leaves one program of 8 warps per multiprocessor (65536 registers). The tile choices of kernels/fft_plan.py (WIDE, ROWS_TILE) were made
from this table; their speed is measured by benchmarks/fft.py --forms kernel on the H200.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from aotcuda.kernels import fft_bluestein, fft_bluestein_parts, fft_plan, fft_rows  # noqa: E402
from aotcuda.kernels.fft_plan import default_launch  # noqa: E402

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
INTEGERS = ("size0", "size1", "size2", "size3", "xs0", "xs1", "xs2", "xs3", "xs_t", "xs_p",
            "os0", "os1", "os2", "os3", "os_t", "os_p", "ws", "vs0", "vs1", "vs2", "vs3", "vs_t", "vs_p")


def compile_kernel(n: int, kind: str, dtype: str, arch: int, rows: int, window: bool = False,
                   warps: int | None = None, weight: bool = False) -> dict:
    """The kernel as launch() would start it for `rows` rows of length n (with `warps`, where given, instead of
    the default launch's), compiled to a cubin."""
    launch = default_launch(n, rows)
    plan, per_program, warps = launch.tiling, launch.rows, warps or launch.warps
    a, b, c = plan.factors
    p1, p2, p3 = plan.padded
    constants = dict(N=n, A=a, B=b, C=c, P1=p1, P2=p2, P3=p3, R=per_program, KIND=fft_rows.KINDS.index(kind),
                     PRECISION="tf32x3" if dtype == "fp32" else "tf32", WINDOW=window, WEIGHT=weight,
                     SCALED=kind == "c2r")  # as torch.fft's default norm: the inverse scaled by 1/n
    bluestein = isinstance(plan, fft_plan.Bluestein)
    if not bluestein:
        constants["INVERSE"] = fft_rows.direction(kind, False)
    else:
        constants["PARTS"] = plan.parts
    parted = fft_rows.runs_in_parts(plan)  # fft_bluestein_parts's kernels (float32 out)
    if parted:
        constants["FOLDS"] = plan.folds
    signature = {"X": f"*{dtype}", "Tables": "*fp32", "Out": "*fp32" if parted else f"*{dtype}", "Window": "*fp32", "Weight": "*fp32",
                 "rows": "i64", "in_len": "i32",
                 "out_len": "i32", "scale": "fp32", **{name: "i64" for name in INTEGERS},
                 **{name: "constexpr" for name in constants}}
    function = fft_bluestein._bluestein_kernel if bluestein else fft_rows._fft_rows_kernel
    out_dtype = torch.float32 if parted else {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    paired = fft_rows.pairs_rows(plan, kind, n, n // 2 + 1 if kind == "r2c" else n, out_dtype)
    if paired:
        function = fft_bluestein._bluestein_pairs_kernel  # a pair of real rows a complex transform
    if parted:
        function = (fft_bluestein_parts._bluestein_pairs_parts_kernel if paired
                    else fft_bluestein_parts._bluestein_parts_kernel)
    source = triton.compiler.ASTSource(fn=function, signature=signature, constexprs=constants)
    kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([CUOBJDUMP, "-res-usage", cubin.name], capture_output=True, text=True).stdout
        sass = subprocess.run([CUOBJDUMP, "-sass", cubin.name], capture_output=True, text=True).stdout
    registers, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
    return dict(tiling=plan.describe(), rows=per_program, warps=warps, registers=int(registers), stack=int(stack),
                spill_loads=len(re.findall(r"\bLDL\b", sass)), spill_stores=len(re.findall(r"\bSTL\b", sass)),
                shared=kernel.metadata.shared, wgmma="warp_group_dot" in kernel.asm["ttgir"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 37, 64, 100, 128, 400, 512, 1024, 2048, 4096])
    parser.add_argument("--kinds", nargs="+", default=["c2c", "r2c", "c2r"], choices=fft_rows.KINDS)
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--windows", nargs="+", default=["no", "yes"], choices=["no", "yes"],
                        help="without and with the window operand (c2r: without only)")
    parser.add_argument("--weights", nargs="+", default=["no"], choices=["no", "yes"],
                        help="without (the default) and with the weight operand (r2c: without only)")
    parser.add_argument("--arch", type=int, default=90, help="compute capability × 10 (90: H100/H200)")
    parser.add_argument("--rows", type=int, default=1 << 20, help="rows of the launch (few rows: fewer a program)")
    parser.add_argument("--bluestein-tile", type=int, default=fft_plan.BLUESTEIN_TILE,
                        help="fft_plan.BLUESTEIN_TILE for this run: the largest m of a Bluestein length")
    parser.add_argument("--bluestein-halves", choices=["yes", "no"], default="yes" if fft_plan.BLUESTEIN_HALVES else "no",
                        help="fft_plan.BLUESTEIN_HALVES: an m past 4096 as two halves (yes) or one tile (no)")
    parser.add_argument("--warps", type=int, nargs="+", default=[None],
                        help="warps a program (default: the default launch's), a row each")
    parser.add_argument("--bluestein-pairs", choices=["yes", "no"], default="yes" if fft_rows.BLUESTEIN_PAIRS else "no",
                        help="a Bluestein length's r2c and c2r compiled as the pairs kernel (yes, the default: two real "
                             "rows a complex transform) or one row a transform (no): fft_rows.BLUESTEIN_PAIRS")
    parser.add_argument("--halves-as-parts", choices=["yes", "no"], default="yes" if fft_rows.HALVES_AS_PARTS else "no",
                        help="a Bluestein length of two halves (2049…4096) compiled as fft_bluestein_parts's kernel of 2 "
                             "parts (yes) or fft_bluestein's halves (no, the default): fft_rows.HALVES_AS_PARTS")
    parser.add_argument("--three-products", choices=["no", "yes"], default="no",
                        help="float32's complex products as four real ones (no, the default) or three (yes): "
                             "fft_rows.THREE_PRODUCTS")
    args = parser.parse_args()
    fft_rows.THREE_PRODUCTS = tl.constexpr(args.three_products == "yes")
    fft_plan.set_bluestein_tile(args.bluestein_tile, args.bluestein_halves == "yes")
    fft_rows.BLUESTEIN_PAIRS = args.bluestein_pairs == "yes"
    fft_rows.HALVES_AS_PARTS = args.halves_as_parts == "yes"
    print(f"sm_{args.arch}, Triton {triton.__version__}, {args.rows} rows")
    print("| n | kind | window | weight | dtype | three products | tiling | rows a program | warps | registers "
          "| stack (spilled) | LDL/STL | shared | wgmma |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for kind in args.kinds:
            weights = [w for w in args.weights if kind != "r2c" or w == "no"]
            for window, weight in [(w, v) for w in args.windows if kind != "c2r" or w == "no" for v in weights]:
                for dtype, warps in [(d, w) for d in args.dtypes for w in args.warps]:
                    three = args.three_products if dtype == "fp32" else "no"  # half-precision data keeps four
                    r = compile_kernel(n, kind, dtype, args.arch, args.rows, window == "yes", warps, weight == "yes")
                    print(f"| {n} | {kind} | {window} | {weight} | {dtype} | {three} | {r['tiling']} | {r['rows']} | "
                          f"{r['warps']} | {r['registers']} | "
                          f"{r['stack']} | {r['spill_loads']}/{r['spill_stores']} | {r['shared']} | "
                          f"{'yes' if r['wgmma'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
