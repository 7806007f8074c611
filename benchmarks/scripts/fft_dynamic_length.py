"""A transform of dynamic length on the CPU: an FNet mixer (torch.fft.fft2 over a dynamic `seq` and a static hidden
dim, real part; x = [batch, seq, hidden]) exported with Dim("seq", max=--max), rewritten by the pass and compiled by
torch.compile (one graph, dim 1 marked dynamic; a recompile at a later length is an error), against the library's
program (the exported program as it is: Inductor calls torch.fft's library, MKL on the x86 wheel), timed at each
length of --lengths, a row each. As benchmarks/fft.py: torch.utils.benchmark's Timer (one thread), best of --repeat
medians, the two programs alternating; errors ‖out − eager‖/‖eager‖ in float32.

    python3 benchmarks/scripts/fft_dynamic_length.py [--max 128] [--lengths 128 100 64] [--json PATH]

spectral/dynamic.py has the form (a max above 64: Bluestein at the Dim's max, both length-m transforms
aotcuda::fft_rows_cpu kernels on the CPU since session 41; DFT products before). Use a fresh TORCHINDUCTOR_CACHE_DIR
to compare commits (docs/performance.md, "Caveats").
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from torch.utils import benchmark

from aotcuda.passes import ReplaceComplexWithRealPass


class FNetMixer(torch.nn.Module):
    """FNet's token mixing: the real part of the 2-D DFT over (seq, hidden)."""

    def forward(self, x):
        return torch.fft.fft2(x, dim=(-2, -1)).real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=128, help="the seq Dim's max")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 100, 64], help="seq lengths timed, a row each")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many medians")
    parser.add_argument("--min-run-time", type=float, default=0.5, help="s per median")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = FNetMixer()
    example = torch.randn(args.batch, args.max, args.hidden)
    seq = torch.export.Dim("seq", min=2, max=args.max)
    ep = torch.export.export(model, (example,), dynamic_shapes={"x": {1: seq}}).run_decompositions()
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    torch._dynamo.mark_dynamic(example, 1)
    fns = [torch.compile(ep.module()), torch.compile(rewritten.module())]
    rows = []
    with torch.no_grad():
        for i, length in enumerate(args.lengths):
            x = torch.randn(args.batch, length, args.hidden)
            torch._dynamo.mark_dynamic(x, 1)
            with torch._dynamo.config.patch(error_on_recompile=i > 0):
                for fn in fns + fns:
                    fn(x)
            expected = model(x)
            errors = [((fn(x) - expected).norm() / expected.norm()).item() for fn in fns]
            best = [float("inf")] * len(fns)
            for _ in range(args.repeat):
                for j, fn in enumerate(fns):
                    timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x})
                    best[j] = min(best[j], timer.blocked_autorange(min_run_time=args.min_run_time).median * 1e6)
            row = dict(program="fnet_dynamic", max=args.max, length=length, shape="×".join(map(str, x.shape)),
                       library_us=best[0], aotcuda_us=best[1], ratio=best[1] / best[0], rel_error=errors[1],
                       library_rel_error=errors[0], load=os.getloadavg()[0], torch=torch.__version__)
            rows.append(row)
            print(f"fnet_dynamic seq {length} (max {args.max}) {row['shape']}: library {best[0]:.1f} µs, aotcuda "
                  f"{best[1]:.1f} µs, {row['ratio']:.2f}×, rel. error {errors[1]:.1e} (library {errors[0]:.1e}), "
                  f"load {row['load']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
