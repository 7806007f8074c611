"""aotcuda::fft_rows under compute-sanitizer: the default launch of each length, and the same tiling at the
other warp count (4 ↔ 8), r2c and c2r once each, every launch named on stdout before it runs.

    compute-sanitizer --show-backtrace no --print-limit 100000 \\
        python3 benchmarks/scripts/fft_sanitize.py --rows 512 --sizes 64 400 4096 2039 4093 > san.log 2>&1
    python3 benchmarks/scripts/fft_sanitize.py --summarize san.log    # the launches with a sanitizer error

The sanitizer writes its reports into the same stream as the launch lines; each launch synchronizes before
the next line, so a report lands after its own launch's line. A launch Triton cannot run ends the run (exit
3) with its error. --warps-16 adds the 16-warp launch that session 28 found failing (fft_plan.MAX_WARPS,
lifted for this run only): 2048 = 32·16·4b at one row a program.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import torch

from aotcuda.kernels import fft_plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fft_tiling_sweep as sweep  # noqa: E402

REPORT_WORDS = ("Invalid", "Illegal", "Misaligned", "Out-of-range", "Race")


def launches_of(n: int, rows: int, warps_16: bool) -> list[fft_plan.Launch]:
    default = fft_plan.default_launch(n, rows, torch.cuda.get_device_properties(0).multi_processor_count)
    other = fft_plan.Launch(default.tiling, default.rows, 4 if default.warps == 8 else 8)
    out = [default, other]
    if warps_16:
        out.append(fft_plan.Launch(default.tiling, default.rows, 16))
    return out


def run(sizes: list[int], rows: int, warps_16: bool) -> None:
    if warps_16:
        fft_plan.MAX_WARPS = 16
    for n in sizes:
        problem = sweep.Problem(n, rows, "cuda")
        for config in launches_of(n, rows, warps_16):
            for kind in ("r2c", "c2r"):
                print(f"LAUNCH n={n} rows={rows} {kind} {config.describe()}", flush=True)
                try:
                    out = problem.kernel(kind, config)()
                    torch.cuda.synchronize()
                except Exception as failure:  # the context may be lost: name the launch and stop
                    print(f"FAILED {type(failure).__name__}: {str(failure).splitlines()[0][:200]}", flush=True)
                    sys.exit(3)
                print(f"DONE error={sweep.relative_error(out.cpu(), problem.want[kind]):.1e}", flush=True)


def summarize(path: str) -> None:
    """Each launch of the log with its sanitizer reports counted, and its end (DONE with the error, FAILED)."""
    reports, ends, order, current = collections.Counter(), {}, [], None
    with open(path, errors="replace") as log:
        for line in log:
            if line.startswith("LAUNCH "):
                current = line[len("LAUNCH "):].strip()
                order.append(current)
            elif current and line.startswith(("DONE", "FAILED")):
                ends[current] = line.strip()
            elif current and line.startswith("=========") and any(w in line for w in REPORT_WORDS):
                reports[current] += 1
    print(f"{len(order)} launches, {sum(1 for o in order if reports[o])} with sanitizer reports")
    for launch in order:
        print(f"{reports[launch]:6d}  {launch}  {ends.get(launch, '(no end: the run stopped here)')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 400, 1024, 2048, 4096, 1009, 2039, 4093])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--warps-16", action="store_true", help="also the 16-warp launch of each default tiling")
    parser.add_argument("--summarize", metavar="LOG", help="read a sanitizer log of this script instead")
    args = parser.parse_args()
    if args.summarize:
        summarize(args.summarize)
    elif not torch.cuda.is_available():
        parser.error("needs a CUDA device (run it under compute-sanitizer)")
    else:
        run(args.sizes, args.rows, args.warps_16)


if __name__ == "__main__":
    main()
