"""Where a CPU FFT program's time goes, loop by loop: the spectral filter of benchmarks/fft.py (rfft → complex
weight → irfft on [rows, n]) rewritten by the pass, compiled by Inductor on one thread (as the benchmark's
Timer runs it), and each top-level loop of the generated C++ kernel timed by a steady_clock pair around it.

    python3 benchmarks/scripts/fft_cpu_loops.py 512 [--rows 512] [--calls 300]

Inductor puts every loop of the program into one C++ function, so torch.profiler sees one kernel; this
copies the generated module, wraps each loop in a timer, runs it `--calls` times on random inputs of the
right shapes and prints one row per loop: µs a call, its loop ranges (step 16: AVX-512 vectors), its vector
loads and stores, 16×16 transposes and scalar gathers (a vector filled one lane at a time). Times include
first-touch page faults of the buffers a call allocates. Use it to see which pass over memory costs what
(docs/performance.md, "FFTs as real math", has a run).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import re
import sys
import tempfile

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fft import SpectralFilter  # noqa: E402

from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402

LOOP = re.compile(r"for\(int64_t \w+=static_cast<int64_t>\(0L\); \w+<static_cast<int64_t>\(([^;]*)\); "
                  r"\w+\+=static_cast<int64_t>\((\d+)L\)")


def compiled_module_source(n: int, rows: int) -> str:
    """Compile the rewritten filter on one thread; Inductor's output-code module (the one with the kernel)."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    model, x = SpectralFilter(n), torch.randn(rows, n)
    program = ReplaceComplexWithRealPass(strict=True)(torch.export.export(model, (x,)).run_decompositions())
    with config.patch(force_disable_caches=True), torch.no_grad():  # inference, as benchmarks/fft.py runs it
        _, sources = run_and_get_code(torch.compile(program.module()), x)
    return next(source for source in sources if "cpp_fused" in source)


def instrument(source: str, calls: int, report: pathlib.Path) -> tuple[str, list[str]]:
    """The module with a timer around each top-level loop block of the kernel, which writes µs a call of
    each block to `report` at call `calls`; and the blocks' text."""
    out, blocks, inside, count = [], [], False, 0
    for line in source.split("\n"):
        if line.startswith('extern "C"'):
            inside = True
        if inside and line == "    {":
            out.append(f"    {{ auto __start{count} = std::chrono::steady_clock::now();")
            blocks.append("")
            count += 1
        elif inside and blocks and line.startswith("        "):
            blocks[-1] += line + "\n"
        if inside and line == "}":
            out.append(f"    if (++__calls == {calls}) {{ FILE* f = fopen(\"{report}\", \"w\"); "
                       f"for (int i = 0; i < {count}; i++) fprintf(f, \"%f\\n\", __seconds[i] * 1e6 / __calls); "
                       "fclose(f); }")
            inside = False
        out.append(line)
        if inside and line == "    }":
            out.append(f"    __seconds[{count - 1}] += std::chrono::duration<double>("
                       f"std::chrono::steady_clock::now() - __start{count - 1}).count(); }}")
    head = "#include <chrono>\n#include <cstdio>\nstatic double __seconds[4096]; static long __calls = 0;\n"
    return "\n".join(out).replace("r'''\n", "r'''\n" + head, 1), blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = pathlib.Path(tempfile.mkdtemp())
    source, blocks = instrument(compiled_module_source(args.n, args.rows), args.calls, folder / "loops.txt")
    (folder / "timed_module.py").write_text(source)
    spec = importlib.util.spec_from_file_location("timed_module", folder / "timed_module.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = module.get_args()
    with torch.no_grad():
        for _ in range(args.calls):
            module.call(list(inputs))
    times = [float(line) for line in (folder / "loops.txt").read_text().split()]
    print(f"filter n={args.n}, {args.rows} rows, one thread: {sum(times):.0f} µs a call in {len(blocks)} loops")
    print("| loop | µs | ranges (step) | vector loads | vector stores | 16×16 transposes | scalar gathers |")
    print("|---|---|---|---|---|---|---|")
    for i, (block, us) in enumerate(zip(blocks, times)):
        ranges = " × ".join(f"{size}" + (f" ({step})" if step != "1" else "") for size, step in LOOP.findall(block)[:3])
        print(f"| {i} | {us:.0f} | {ranges.replace('L', '')} | {block.count('loadu(')} | {block.count('.store(')} | "
              f"{block.count('transpose_mxn')} | {block.count('tmpbuf[')} |")


if __name__ == "__main__":
    main()
