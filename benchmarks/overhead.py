"""Per-call host overhead of the runtime on a tiny program: aotcuda.load against torch's AOTI loader.

    python benchmarks/overhead.py [--device cpu|cuda] [--package PATH] [--profile] [--json out.json]

The program (two inputs [8, 16] float32, one output x·y + x) does almost no work, so a call's time is the
runtime's host work: argument flattening, input checks, handle creation, the container's run, taking over
the output handles. Rows: torch's ``aoti_load_package`` and ``aotcuda.load`` (plain calls; on CUDA also
with CUDA graphs and with a bound zero-copy graph). Times are medians (and the best) over ``--calls`` back-to-back calls, the variants interleaved
(per batch of 100: the calling thread's CPU time on the CPU, wall time ended by a synchronize on CUDA). ``--profile`` prints
cProfile's top entries of 20,000 aotcuda calls. ``--package`` reuses a package built earlier (the script
prints the path it builds; the compile takes ~40 s on a CPU).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_row  # noqa: E402


class Tiny(torch.nn.Module):
    def forward(self, x, y):
        return x * y + x


def build(device: str, path: str) -> str:
    import aotcuda

    args = (torch.randn(8, 16, device=device), torch.randn(8, 16, device=device))
    return aotcuda.lower(Tiny(), args, device=device, package_path=path).package_path


def per_call_us(fns: dict, calls: int, sync, clock, prepare=None) -> dict:
    """µs per call of each fn: (median, min) over batches of 100 back-to-back calls, by ``clock`` (ns).
    The variants' batches are interleaved, so that a shared machine's load falls on all of them alike.
    ``prepare(name)``, if given, runs before each batch of that fn, untimed (e.g. to flip a switch)."""
    prepare = prepare or (lambda name: None)
    for name, fn in fns.items():
        prepare(name)
        for _ in range(200):
            fn()
    sync()
    batches = {name: [] for name in fns}
    for _ in range(max(1, calls // 100)):
        for name, fn in fns.items():
            prepare(name)
            sync()
            start = clock()
            for _ in range(100):
                fn()
            sync()
            batches[name].append((clock() - start) / 100 / 1e3)
    return {name: (statistics.median(b), min(b)) for name, b in batches.items()}


def copying_graphs(path: str):
    """A Program with CUDA graphs that copies each call's inputs into its static buffers (the switch is read at load)."""
    import aotcuda

    before = os.environ.get("AOTCUDA_GRAPHS_IN_PLACE")
    os.environ["AOTCUDA_GRAPHS_IN_PLACE"] = "0"
    try:
        return aotcuda.load(path, cuda_graphs=True)
    finally:
        if before is None:
            del os.environ["AOTCUDA_GRAPHS_IN_PLACE"]
        else:
            os.environ["AOTCUDA_GRAPHS_IN_PLACE"] = before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--package")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json")
    opts = parser.parse_args()
    import aotcuda
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()  # torch's own loader needs it on the H200 machine
    workdir = tempfile.mkdtemp(prefix="aotcuda-overhead-")
    path = opts.package or build(opts.device, os.path.join(workdir, "tiny.pt2"))
    print(f"package: {path}", file=sys.stderr)
    cuda = opts.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # On the CPU the calling thread does all the work (checks, handles, the kernels of this tiny program):
    # its CPU time is the host work, and unlike wall time it does not count the time other processes on
    # a shared machine take. On CUDA the GPU runs asynchronously: wall time, ended by a synchronize.
    clock = time.perf_counter_ns if cuda else time.thread_time_ns
    torch.set_num_threads(1)  # both runtimes run the same one-thread kernel; no OpenMP pool wake-ups
    x = torch.randn(8, 16, device=opts.device)
    y = torch.randn(8, 16, device=opts.device)
    ref = Tiny()(x, y)
    variants = {"torch's AOTI loader (aoti_load_package)": torch._inductor.aoti_load_package(path),
                "aotcuda.load": aotcuda.load(path)}
    if cuda:  # the same x, y every call: the graph reads them in place (runtime/graphs.py); the copying row beside it
        variants["aotcuda.load, CUDA graphs"] = aotcuda.load(path, cuda_graphs=True)
        variants["aotcuda.load, CUDA graphs, inputs copied in (AOTCUDA_GRAPHS_IN_PLACE=0)"] = copying_graphs(path)
    fns = {}
    with torch.no_grad():
        for name, program in variants.items():
            out = program(x, y)
            out = out[0] if isinstance(out, (list, tuple)) else out
            assert torch.allclose(out, ref, rtol=1e-5, atol=1e-6), name
            fns[name] = lambda p=program: p(x, y)
        if cuda:
            program = variants["aotcuda.load, CUDA graphs"]
            bound = program.bind([x.clone(), y.clone()])
            fns["aotcuda bound graph (program.bind(...).replay(), zero-copy)"] = bound.replay
            fns["the captured graph alone (torch.cuda.CUDAGraph.replay)"] = bound.graph.replay
        times = per_call_us(fns, opts.calls, sync, clock)
    rows = [dict(variant=name, us=median, min_us=best) for name, (median, best) in times.items()]
    device_name = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"\nTiny program (x*y + x, [8, 16] float32), {device_name}, torch {torch.__version__}; "
          f"`python3 benchmarks/overhead.py --device {opts.device}`")
    print("| how it runs | µs per call (median) | vs. torch's AOTI loader | best batch µs |")
    print("|---|---|---|---|")
    loader = rows[0]["us"]
    for r in rows:
        print(markdown_row(r["variant"], f"{r['us']:.2f}", f"{r['us'] / loader:.2f}", f"{r['min_us']:.2f}"))
    if opts.profile:
        program = variants["aotcuda.load"]
        profiler = cProfile.Profile()
        with torch.no_grad():
            profiler.enable()
            for _ in range(20000):
                program(x, y)
            profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict(rows=rows, torch=torch.__version__, device=device_name), f, indent=1)


if __name__ == "__main__":
    main()
