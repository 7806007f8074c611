"""The forms of a dynamic-length FFT on the CPU, by row count and length: torch.fft.fft of x = [rows, n] along n
(float32, both dims dynamic: Dim("rows", max=4096) and Dim("n", max=length), the call at the Dim's max; or the rows
static, --static-rows), rewritten
by the pass with each form forced, compiled by torch.compile, against the library's program (the exported program as
it is: Inductor calls torch.fft, MKL on the x86 wheel). One compile per (length, form) serves every row count. As
fft_dynamic_length.py: torch.utils.benchmark's Timer (one thread), best of --repeat medians, the programs
alternating; errors ‖out − eager‖/‖eager‖.

    python3 benchmarks/scripts/fft_dynamic_forms.py [--program fft|irfft] [--rows 1 8 64 512 2048]
        [--lengths 100 1000 4093 8192]
        [--forms auto direct bluestein] [--static-rows] [--json PATH]

Forms (spectral/dynamic.py): direct, the [2n, 2n] DFT table built on every call and one GEMM (forced by raising
MAX_DIRECT past the length; refused past --max-direct, whose table alone is 4·n² float64: 0.5 GB at 4093);
bluestein, Bluestein at the Dim's max through aotcuda::fft_rows_cpu (forced by MAX_DIRECT = 0); unpacked, the pass
with its two-real-rows-as-one-complex-row packing off (the form before it: each real row transformed as (x, 0));
packed, that packing wherever a static batch dim allows it, 8 rows or fewer too (_fills_more_blocks bypassed);
auto, the pass as it is (the product's choice). --program irfft times the c2r side (two spectra as one row).
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from unittest import mock

import torch
from torch.utils import benchmark

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral import dynamic

FORCED = {"direct": 1 << 30, "bluestein": 0}  # MAX_DIRECT that forces each form; auto patches nothing


class Fft(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.fft.fft(x, dim=-1))


class Irfft(torch.nn.Module):
    """irfft of a half spectrum x = [rows, bins, 2] (a pair) to n = 2·(bins − 1)."""

    def forward(self, x):
        return torch.fft.irfft(torch.view_as_complex(x), dim=1)


PROGRAMS = {"fft": Fft, "irfft": Irfft}


def example(program: str, rows: int, length: int) -> torch.Tensor:
    """The input of `program` at a transform length `length` (irfft: its half, length // 2 + 1 bins)."""
    return torch.randn(rows, length) if program == "fft" else torch.randn(rows, length // 2 + 1, 2)


def eager(program: str, x: torch.Tensor) -> torch.Tensor:
    """The program's result in float64, as float32."""
    return PROGRAMS[program]()(x.double()).float()


def compiled(program: str, form: str, length: int, max_rows: int, static_rows: int | None = None):
    """The torch.compile'd `program` of `form` for lengths up to `length` and any row count up to `max_rows` (only
    `static_rows` where given: the rows a static dim)."""
    rows = {} if static_rows else {0: torch.export.Dim("rows", min=1, max=max_rows)}
    n = torch.export.Dim("n", min=2, max=length) if program == "fft" else torch.export.Dim("bins", min=3,
                                                                                            max=length // 2 + 1)
    shapes = {"x": {**rows, 1: n}}
    inputs = (example(program, static_rows or 8, length),)
    ep = torch.export.export(PROGRAMS[program](), inputs, dynamic_shapes=shapes).run_decompositions()
    if form == "library":
        return torch.compile(ep.module())
    if form in FORCED:
        patch = mock.patch.object(dynamic, "MAX_DIRECT", FORCED[form])
    elif form == "unpacked":
        patch = mock.patch.object(dynamic, "_packs_two_rows", lambda x, dim: False)
    elif form == "packed":
        patch = mock.patch.object(dynamic, "_fills_more_blocks", lambda x, dim: True)
    else:
        patch = mock.patch.dict({})
    with patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    return torch.compile(rewritten.module())


def best_us(fns: dict, x, repeat: int, min_run_time: float) -> dict:
    """Each program's best of `repeat` medians (µs), the programs alternating within each repeat: a load that
    comes and goes meets them alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for form, fn in fns.items():
            timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x})
            best[form] = min(best[form], timer.blocked_autorange(min_run_time=min_run_time).median * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="fft",
                        help="fft: torch.fft.fft of a real x [rows, n] (an r2c); irfft: of a half spectrum (a c2r)")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 64, 512, 2048])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000, 4093, 8192])
    parser.add_argument("--forms", nargs="+", default=["auto", "direct", "bluestein"])
    parser.add_argument("--max-direct", type=int, default=1000, help="the longest length the direct form is timed at")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many medians")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="s per median")
    parser.add_argument("--static-rows", action="store_true",
                        help="export each row count as a static dim (a compile per row count): where the pass packs "
                             "two real rows as one complex row (spectral/dynamic.py, _two_rows_at_once)")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows_out = []
    with torch.no_grad():
        for length in args.lengths:
            forms = [f for f in args.forms if f != "direct" or length <= args.max_direct]
            if not args.static_rows:
                fns = {form: compiled(args.program, form, length, max(4096, *args.rows))
                       for form in ["library", *forms]}
            for rows in args.rows:
                if args.static_rows:
                    fns = {form: compiled(args.program, form, length, rows, static_rows=rows)
                           for form in ["library", *forms]}
                x = example(args.program, rows, length)
                expected = eager(args.program, x)
                errors = {}
                for form, fn in fns.items():
                    fn(x), fn(x)
                    errors[form] = ((fn(x) - expected).norm() / expected.norm()).item()
                times = best_us(fns, x, args.repeat, args.min_run_time)
                row = dict(program=args.program, rows=rows, static_rows=args.static_rows, length=length,
                           library_us=times["library"], load=os.getloadavg()[0],
                           torch=torch.__version__,
                           **{f"{f}_us": times[f] for f in forms}, **{f"{f}_ratio": times[f] / times["library"]
                                                                       for f in forms},
                           **{f"{f}_rel_error": errors[f] for f in fns})
                rows_out.append(row)
                print(f"rows {rows:5d} n {length:5d}: library {times['library']:10.1f} µs; "
                      + "; ".join(f"{f} {times[f]:10.1f} µs {times[f] / times['library']:6.2f}× "
                                  f"(err {errors[f]:.1e})" for f in forms)
                      + f"; load {row['load']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
