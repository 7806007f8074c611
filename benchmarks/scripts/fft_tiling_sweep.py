"""aotcuda::fft_rows alone under every tiling and launch it runs, against cuFFT (torch.fft.rfft/irfft) on the
same data: the spectral filter's r2c and c2r (benchmarks/fft.py "filter": x [rows, n] float32, the transform
along the last dim), per length n and row count.

    python3 benchmarks/scripts/fft_tiling_sweep.py --json sweep.json           # the H200: about 3.5 minutes (--budget 180)
    python3 benchmarks/scripts/fft_tiling_sweep.py --sizes 400 4096 --rows 512 8192 --budget 100
    TRITON_INTERPRET=1 python3 benchmarks/scripts/fft_tiling_sweep.py --device cpu --sizes 16 64 --rows 8 \\
        --budget 30                                                               # the logic, without a GPU

The launches are kernels/fft_plan.py's ``launches(n, rows, SMs)``: the op's own choice first (marked
"default"), then every tiling (n = a·b·c, factors in any order, ones last, each padded to a power of two
≥ 16, a tile ≤ TILE values) with the rows a program (R) and warps it would get, then each tiling at every
power-of-two R from its least (tl.dot's M ≥ 16) to TILE values a program and each of --warps; each runs
through ``fft_rows.launch(..., config=)`` with that tiling's tables. The op's default never changes here.
Each (n, rows) gets an equal share of what is left of --budget (seconds, compiles included: a new launch is
a Triton compile of a second or two); the cuFFT row and the default launch always run, the others in order
until the share is spent (the table says how many were left out).
A Bluestein length (fft_plan.bluestein) runs its default, then its m (or halves of h) on each other tiling
within twice the default's arithmetic, at the default's R and each of --warps; --bluestein-halves no puts m past
4096 back on one tile, for A/B; --bluestein-pairs no runs its r2c and c2r one real row a complex transform, for A/B;
--halves-as-parts yes runs two halves (2049…4096) by kernels/fft_bluestein_parts.py's kernels, for A/B.
--fewer-dot-stages no puts the op's default back on the least arithmetic (n = 4096
as 16·16·16, not 32·32·4b), for A/B. --three-products yes makes float32's complex products three real ones (Gauss), for A/B.

Times: --graph (default) replays a CUDA graph of --reps calls and divides (no launch overhead: the kernels
alone), the median of --samples replays; --no-graph times --reps back-to-back calls with CUDA events
(Triton's Python launch then counts). On the CPU (Triton's interpreter) the times are wall-clock and mean
nothing; the run checks the logic and the errors. Errors: ‖out − ref‖/‖ref‖ against torch.fft in float64
on the CPU (c2r: irfft, which ignores the imaginary parts of bins 0 and n/2). cuFFT's kernels a call are
counted with torch.profiler (fft_rows: one).

Progress goes to stderr; one table per (n, rows), fastest first, is printed last; --json gets every row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from aotcuda.kernels import fft_plan, fft_rows

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _common import cuda_kernels_a_call as cuda_kernels, relative_error  # noqa: E402


def time_us(fn, device: str, graph: bool, reps: int, samples: int) -> float:
    """Median µs a call of fn over `samples` measurements of `reps` calls (module docstring)."""
    fn()
    fn()
    if device == "cpu":
        walls = []
        for _ in range(samples):
            started = time.perf_counter()
            for _ in range(reps):
                fn()
            walls.append((time.perf_counter() - started) / reps * 1e6)
        return statistics.median(walls)
    torch.cuda.synchronize()
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # a warm-up on the capture stream (cuFFT's plan, allocator pools)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        run = g.replay
    else:
        def run():
            for _ in range(reps):
                fn()
    run()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return statistics.median(times)


class Problem:
    """The filter's two transforms of `rows` rows of length n on `device`, their inputs and float64 results."""

    def __init__(self, n: int, rows: int, device: str):
        torch.manual_seed(n * 100003 + rows)
        self.n, self.rows, self.bins = n, rows, n // 2 + 1
        x = torch.randn(rows, n, dtype=torch.float64)
        spectrum = torch.fft.rfft(torch.randn(rows, n, dtype=torch.float64))
        self.want = {"r2c": torch.view_as_real(torch.fft.rfft(x.float().double())),
                     "c2r": torch.fft.irfft(torch.view_as_complex(torch.view_as_real(spectrum).float().double()), n=n)}
        self.x = x.float().to(device)
        self.spectrum = torch.view_as_real(spectrum).float().contiguous().to(device)  # [rows, bins, 2]

    def library(self, kind: str):
        """cuFFT (pocketfft on the CPU) through torch.fft, its result as the kernel's (a pair for r2c)."""
        if kind == "r2c":
            return lambda: torch.view_as_real(torch.fft.rfft(self.x))
        z = torch.view_as_complex(self.spectrum)
        return lambda: torch.fft.irfft(z, n=self.n)

    def kernel(self, kind: str, config: fft_plan.Launch):
        """fft_rows.launch with `config` and its tiling's tables: rfft(x) as r2c, irfft as c2r (scale 1/n)."""
        tables = fft_rows.tables_for(self.n, kind, kind == "c2r", self.x.device, config.tiling)
        if kind == "r2c":
            return lambda: fft_rows.launch(self.x, tables, 1, self.n, self.bins, "r2c", False, 1.0, config=config)
        return lambda: fft_rows.launch(self.spectrum, tables, 1, self.n, self.n, "c2r", True, 1.0 / self.n,
                                       config=config)


def measure(fn, want, args) -> dict:
    """µs and error of fn, or the error it raised (a launch Triton cannot compile, out of resources)."""
    try:
        error = relative_error(fn().cpu(), want)
        return dict(us=time_us(fn, args.device, args.graph, args.reps, args.samples), error=error)
    except Exception as failure:  # keep sweeping: one launch's failure is a row of the table
        return dict(us=None, error=None, failed=f"{type(failure).__name__}: {str(failure).splitlines()[0][:160]}")


def sweep(n: int, rows: int, deadline: float, args, processors: int) -> dict:
    """The cuFFT row and the launches of n for `rows` rows until `deadline` (the default always)."""
    problem = Problem(n, rows, args.device)
    cuda = args.device != "cpu"
    library = {kind: measure(problem.library(kind), problem.want[kind], args) for kind in args.kinds}
    if cuda:
        for kind in args.kinds:
            library[kind]["kernels"] = cuda_kernels(problem.library(kind))
    every = fft_plan.launches(n, rows, processors, tuple(args.warps))
    out = []
    for i, config in enumerate(every):
        if i > 0 and time.perf_counter() > deadline:
            break
        started = time.perf_counter()
        row = dict(config=config.describe(), factors=config.tiling.factors, padded=config.tiling.padded,
                   rows_a_program=config.rows, warps=config.warps, default=i == 0)
        for kind in args.kinds:
            result = measure(problem.kernel(kind, config), problem.want[kind], args)
            row[kind] = result
            if result["us"] is not None and library[kind]["us"]:
                result["ratio"] = result["us"] / library[kind]["us"]
        if cuda and i == 0 and "failed" not in row[args.kinds[0]]:
            row["kernels"] = cuda_kernels(problem.kernel(args.kinds[0], config))
        row["seconds"] = time.perf_counter() - started
        out.append(row)
        print(f"n={n} rows={rows} {config.describe()}: " + ", ".join(
            f"{kind} {row[kind]['us']:.2f} µs" if row[kind]["us"] is not None else f"{kind} failed"
            for kind in args.kinds) + f" ({row['seconds']:.1f} s)", file=sys.stderr, flush=True)
        if cuda and i % 16 == 15:
            torch.cuda.empty_cache()  # each graph keeps its pool until collected
    return dict(n=n, rows=rows, library=library, launches=out, left_out=len(every) - len(out), total=len(every))


def _cell(result: dict, key: str, spec: str) -> str:
    value = result.get(key)
    return "–" if value is None else format(value, spec)


def print_table(result: dict, args, library_name: str) -> None:
    n, rows, kinds = result["n"], result["rows"], args.kinds
    cufft = result["library"]
    print(f"\nn = {n}, {rows} rows: {library_name} " + "; ".join(
        f"{kind} {_cell(cufft[kind], 'us', '.2f')} µs, error {_cell(cufft[kind], 'error', '.1e')}"
        + (f", {cufft[kind]['kernels']} kernels a call" if "kernels" in cufft[kind] else "") for kind in kinds)
        + f"; {len(result['launches'])} of {result['total']} launches timed")
    print("| config | " + " | ".join(f"{k} µs | {k} / {library_name} | {k} error" for k in kinds) + " |")
    print("|---|" + "---|---|---|" * len(kinds))

    def total(row):
        times = [row[k]["us"] for k in kinds]
        return sum(times) if None not in times else float("inf")

    for row in sorted(result["launches"], key=total):
        name = row["config"] + (" (default)" if row["default"] else "")
        cells = []
        for k in kinds:
            r = row[k]
            if r["us"] is None:
                cells.append(f"failed: {r['failed']} | – | –")
            else:
                cells.append(f"{r['us']:.2f} | {_cell(r, 'ratio', '.2f')}× | {r['error']:.1e}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    timed = [row for row in result["launches"] if total(row) < float("inf")]
    default = result["launches"][0] if result["launches"] else None
    if timed and default is not None and total(default) < float("inf"):
        best = min(timed, key=total)
        print(f"best: {best['config']}, {total(best):.2f} µs for {' + '.join(kinds)} against the default's "
              f"{total(default):.2f} µs ({total(default) / total(best):.2f}×)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (cuda:N), or cpu under TRITON_INTERPRET=1")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 400, 512, 1024, 2048, 4096])
    parser.add_argument("--rows", type=int, nargs="+", default=[512],
                        help="rows of x (benchmarks/fft.py's filter: --signals 512); a table each")
    parser.add_argument("--kinds", nargs="+", default=["r2c", "c2r"], choices=["r2c", "c2r"])
    parser.add_argument("--warps", type=int, nargs="+", default=[4, 8], help="num_warps tried beside the default's")
    parser.add_argument("--budget", type=float, default=180.0,
                        help="seconds for the whole sweep, compiles included (the default launches always run)")
    parser.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                        help="time CUDA graph replays (default) or back-to-back launches")
    parser.add_argument("--reps", type=int, default=20, help="calls a measurement")
    parser.add_argument("--samples", type=int, default=7, help="measurements, the median kept")
    parser.add_argument("--json", default=None, help="write every row here")
    parser.add_argument("--bluestein-halves", choices=["yes", "no"], default=None,
                        help="a Bluestein length (its default launch only) with m past 4096 as two halves (yes, the "
                             "default) or one tile (no): fft_plan.set_bluestein_tile's halves")
    parser.add_argument("--bluestein-pairs", choices=["yes", "no"], default=None,
                        help="a Bluestein length's r2c and c2r two rows to a complex transform (yes, the default) or "
                             "one (no, the kernel before): fft_rows.BLUESTEIN_PAIRS")
    parser.add_argument("--halves-as-parts", choices=["yes", "no"], default=None,
                        help="a Bluestein length of two halves (2049…4096) run by fft_bluestein_parts's kernels as 2 "
                             "parts (yes) or fft_bluestein's (no, the default): fft_rows.HALVES_AS_PARTS")
    parser.add_argument("--three-products", choices=["yes", "no"], default=None,
                        help="a complex product of float32 data in three real products (yes) or four (no, the default): "
                             "fft_rows.THREE_PRODUCTS, set before any kernel compiles")
    parser.add_argument("--fewer-dot-stages", choices=["yes", "no"], default=None,
                        help="the op's default tiling (and Bluestein's m) with the fewest dot stages first (yes, the "
                             "default) or the least arithmetic first (no, the rule before): fft_plan.set_fewer_dot_stages")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("--device cpu runs the kernel in Triton's interpreter: set TRITON_INTERPRET=1")
    if not fft_rows.HAVE_TRITON:
        parser.error("aotcuda::fft_rows is a Triton kernel: install Triton")
    if args.three_products is not None:
        import triton.language as tl

        fft_rows.THREE_PRODUCTS = tl.constexpr(args.three_products == "yes")
    if any(w > fft_plan.MAX_WARPS for w in args.warps):
        parser.error(f"--warps: at most {fft_plan.MAX_WARPS} (kernels/fft_plan.py MAX_WARPS: 16 lost the CUDA context once)")
    if args.fewer_dot_stages is not None:
        fft_plan.set_fewer_dot_stages(args.fewer_dot_stages == "yes")
    if args.bluestein_pairs is not None:
        fft_rows.BLUESTEIN_PAIRS = args.bluestein_pairs == "yes"
    if args.halves_as_parts is not None:
        fft_rows.HALVES_AS_PARTS = args.halves_as_parts == "yes"
    if args.bluestein_halves is not None:
        fft_plan.set_bluestein_tile(fft_plan.BLUESTEIN_TILE, halves=args.bluestein_halves == "yes")
    uncovered = [n for n in args.sizes if fft_plan.kernel_plan(n) is None]
    if uncovered:
        parser.error(f"the kernel covers none of {uncovered} (kernels/fft_plan.py: n ≤ 4096)")
    cuda = args.device != "cpu"
    if cuda:
        device = torch.device(args.device)
        if device.index is None:  # set_device takes no "cuda" without an index
            device = torch.device("cuda", torch.cuda.current_device())
        args.device = str(device)
        torch.cuda.set_device(device)
        properties = torch.cuda.get_device_properties(device)
        processors, machine = properties.multi_processor_count, properties.name
    else:
        processors, machine = 1, "CPU (Triton's interpreter)"
    library_name = "cuFFT" if cuda else "pocketfft"
    import triton

    header = dict(machine=machine, torch=torch.__version__, triton=triton.__version__, library=library_name,
                  processors=processors, budget=args.budget, graph=args.graph and cuda, reps=args.reps,
                  samples=args.samples, kinds=args.kinds, warps=args.warps)
    problems = [(n, rows) for n in args.sizes for rows in args.rows]
    results = []
    for i, (n, rows) in enumerate(problems):
        left = args.budget - (time.perf_counter() - started)
        deadline = time.perf_counter() + max(0.0, left) / (len(problems) - i)
        results.append(sweep(n, rows, deadline, args, processors))
        if args.json:
            with open(args.json, "w") as file:
                json.dump(dict(header, results=results), file, indent=1)
    print(f"{machine}, torch {torch.__version__}, Triton {triton.__version__}; aotcuda::fft_rows launches against "
          f"{library_name} (torch.fft), float32; "
          + (f"CUDA graphs of {args.reps} calls" if args.graph and cuda else f"{args.reps} calls")
          + f", median of {args.samples}; {time.perf_counter() - started:.0f} s in all (budget {args.budget:.0f} s)")
    for result in results:
        print_table(result, args, library_name)
    if args.json:
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
