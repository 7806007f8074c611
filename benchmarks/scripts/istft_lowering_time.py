"""Where lowering an STFT → mask → iSTFT program over dynamic dims spends its time, with aotcuda's expansion of a
broadcast grad of unfold_backward (lowering/overlap_add.py) and, for the A/B, without it.

    python3 benchmarks/scripts/istft_lowering_time.py [--compile] [--torch-decomposition]

Lowers a new user's denoiser (nu39, 2026-12-07: stft(n_fft=512, hop=128) → a magnitude mask of two nn.Linear →
istft, `--dynamic` batch in [1, 8] and samples 128·frames in [4096, 64000]) up to the compile (``before_compile``;
with --compile through aotcuda.lower, the package checked against eager at 3 lengths) and prints each step's seconds
and the graph's node count. --torch-decomposition turns aotcuda's expansion off (its probe made to say torch needs
none): torch's unfold_backward decomposition as it is.

Why it was slow: torch's istft reference (torch/_refs/__init__.py, torch 2.13) computes the window envelope as
``unfold_backward(window.pow(2).expand((1, n_frames, n_fft)), (batch, length), ...)``: a grad of batch 1 against an
input of the signal's batch. torch's unfold_backward decomposition (torch/_decomp/decompositions.py) takes its one
vectorized index_put only where every grad dim is statically the input's, so here it takes its loop over the
n_fft offsets: 512 iterations of arange, narrow, select and index_add, each with symbolic-shape arithmetic when the
dims are dynamic, traced by export's fake tensors and again by run_decompositions, and left in the graph for
Inductor. An STFT-only front end has no istft and none of it. aotcuda expands such a grad first (torch's loop
expands each offset's slice the same way), so torch's vectorized path takes it.

Measured on the shared 2-core CPU machine (torch 2.13.0, 2026-12-07; one run each, the machine otherwise loaded,
load average 3-5):
    this script:  --torch-decomposition: export 19.3 s, decompose 67.4 s, passes 12.3 s, 4,173 nodes (101.3 s)
                  aotcuda (fix40a):      export 2.3 s, decompose 2.5 s, passes 3.7 s, 86 nodes (11.8 s)
    the whole lowering (--compile), each package equal to eager within 1e-4 at (3, 4096), (3, 16000), (3, 9856):
                  --torch-decomposition: export 38.5 s, decompose 84.4 s, passes 5.7 s, compile 318.3 s (450.7 s;
                                         load average 4-12 through it)
                  aotcuda (fix40a):      export 2.0 s, decompose 1.3 s, passes 1.7 s, compile 23.5 s (33.2 s; a cold
                                         Inductor cache, load average 4)
Earlier (session 39, before the fix; one run, less load): export 15.8 s, decompose 28.5 s, passes 4.0 s, 4,173 nodes;
lower() 180.4 s (compile 105.7 s); with the expansion patched in by hand 35.3 s, a cold Inductor cache. The new
user's own run: export 18.9 s, decompose 37.6 s, passes 4.4 s, compile 189.1 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch
from torch.export import Dim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # tests.models
from tests.models.denoiser import Denoiser  # noqa: E402


def torch_decomposition_only() -> None:
    """aotcuda's expansion of a broadcast unfold_backward grad off, for the A/B: its probe says torch needs none."""
    from aotcuda.lowering import overlap_add

    overlap_add._loops_over_broadcast_grads = lambda: False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile", action="store_true", help="lower in full (aotcuda.lower) and check the package")
    parser.add_argument("--torch-decomposition", action="store_true",
                        help="torch's unfold_backward decomposition as it is (aotcuda's expansion off)")
    options = parser.parse_args()
    if options.torch_decomposition:
        torch_decomposition_only()
    torch.manual_seed(0)
    model, wav = Denoiser().eval(), torch.randn(2, 16000)
    shapes = {"wav": {0: Dim("batch", min=1, max=8), 1: 128 * Dim("frames", min=32, max=500)}}
    started = time.perf_counter()
    if options.compile:
        import aotcuda

        with tempfile.TemporaryDirectory() as folder:
            lowered = aotcuda.lower(model, (wav,), dynamic_shapes=shapes, device="cpu", package_path=f"{folder}/d.pt2")
            program = aotcuda.load(lowered.package_path)
            for length in (4096, 16000, 128 * 77):
                x = torch.randn(3, length)
                torch.testing.assert_close(program(x), model(x), rtol=1e-4, atol=1e-4)
            program.close()
        times = lowered.step_times
    else:
        from aotcuda.lowering.pipeline import _step_timer, before_compile

        times = {}
        ep = before_compile(model, (wav,), None, shapes, step=_step_timer(times, None))[0]
        times["nodes"] = len(ep.graph.nodes)
    steps = ", ".join(f"{name} {seconds:.1f} s" if name != "nodes" else f"{seconds:,} nodes"
                      for name, seconds in times.items())
    which = "torch" if options.torch_decomposition else "aotcuda"
    print(f"{which}: {steps}; {time.perf_counter() - started:.1f} s in all")


if __name__ == "__main__":
    main()
