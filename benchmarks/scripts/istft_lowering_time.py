"""Where lowering an STFT → mask → iSTFT program over dynamic dims spends its time, and what one change to torch's
unfold_backward would save (an A/B measurement; the product does not carry the change).

    python3 benchmarks/scripts/istft_lowering_time.py [--compile] [--expanded]

Lowers a new user's denoiser (nu39, 2026-12-07: stft(n_fft=512, hop=128) → a magnitude mask of two nn.Linear →
istft, `--dynamic` batch in [1, 8] and samples 128·frames in [4096, 64000]) up to the compile (``before_compile``;
with --compile through aotcuda.lower, the package checked against eager at 3 lengths) and prints each step's seconds
and the graph's node count. --expanded first replaces torch's unfold_backward decomposition and Meta kernel (the
one the fake tensors of export run) with one that expands a grad broadcast over a dim of input_size before calling
torch's own.

Why it is slow: torch's istft reference (torch/_refs/__init__.py, torch 2.13) computes the window envelope as
``unfold_backward(window.pow(2).expand((1, n_frames, n_fft)), (batch, length), ...)``: a grad of batch 1 against an
input of the signal's batch. torch's unfold_backward decomposition (torch/_decomp/decompositions.py) takes its one
vectorized index_put only where every grad dim is statically the input's, so here it takes its loop over the
n_fft offsets: 512 iterations of arange, narrow, select and index_add, each with symbolic-shape arithmetic when the
dims are dynamic, traced by export's fake tensors and again by run_decompositions, and left in the graph for
Inductor. An STFT-only front end has no istft and none of it.

Measured on the shared 2-core CPU machine (torch 2.13.0, 2026-12-07; one run each, the machine otherwise loaded):
    this script:                 torch: export 15.8 s, decompose 28.5 s, passes 4.0 s, 4,173 nodes
                                 --expanded: export 1.0 s, decompose 0.8 s, passes 1.0 s, 87 nodes
    the whole lowering:          torch: export 19.1 s, decompose 47.4 s, passes 6.0 s, compile 105.7 s (180.4 s)
                                 expanded: 35.3 s in all, a cold Inductor cache (warm: compile 14.2 s, 19.1 s)
    both packages equal eager within 1e-4 at (3, 4096), (3, 16000), (3, 9856).
The new user's own run: export 18.9 s, decompose 37.6 s, passes 4.4 s, compile 189.1 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
from torch.export import Dim


class Denoiser(torch.nn.Module):
    """STFT -> learned magnitude mask -> ISTFT (the new user's, without istft's length=: see docs/ops.md)."""

    def __init__(self, n_fft=512, hop=128):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        bins = n_fft // 2 + 1
        self.net = torch.nn.Sequential(torch.nn.Linear(bins, 64), torch.nn.ReLU(), torch.nn.Linear(64, bins),
                                       torch.nn.Sigmoid())

    def forward(self, wav):
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
        mask = self.net(spec.abs().transpose(1, 2)).transpose(1, 2)
        return torch.istft(spec * mask, self.n_fft, self.hop, window=self.window)


def expand_broadcast_grads_of_unfold_backward() -> None:
    """torch's unfold_backward, given a grad whose dims of size 1 stand for input_size's (broadcast) expanded first,
    so that its vectorized path applies. For this measurement only: it replaces a torch kernel in this process."""
    from torch._C import DispatchKey
    from torch._decomp import decomposition_table

    op = torch.ops.aten.unfold_backward.default
    original = decomposition_table[op]

    def expanded_first(grad, input_size, dimension, size, step):
        dim = dimension % len(input_size) if input_size else 0
        if grad.dim() == len(input_size) + 1:
            grad = grad.expand([n if d != dim and grad.shape[d] == 1 else grad.shape[d]
                                for d, n in enumerate(input_size)] + list(grad.shape[len(input_size):]))
        return original(grad, input_size, dimension, size, step)

    decomposition_table[op] = expanded_first
    op.py_kernels[DispatchKey.Meta] = expanded_first
    op._dispatch_cache.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile", action="store_true", help="lower in full (aotcuda.lower) and check the package")
    parser.add_argument("--expanded", action="store_true", help="expand broadcast grads of unfold_backward first")
    options = parser.parse_args()
    if options.expanded:
        expand_broadcast_grads_of_unfold_backward()
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
    print(f"{'expanded' if options.expanded else 'torch'}: {steps}; {time.perf_counter() - started:.1f} s in all")


if __name__ == "__main__":
    main()
