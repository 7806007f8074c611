"""aotcuda::decode_attention's launch swept: chunks of the cache and warps of the chunk kernel, on CUDA.

    python3 benchmarks/scripts/decode_attention_sweep.py [--batch 1 8] [--position 1024 2047]
        [--splits 0.5 1 2 4] [--warps 2 4 8] [--module other.py ...] [--json out.json]

The attention of one layer of benchmarks/decode.py's decoder (benchmarks/decode_attention.py's inputs: 32
query heads over 8 KV heads of 64, a bf16 cache of 2048 positions, the positions past ``position`` hidden),
run through kernels/decode_attention.launch with ``splits_for``'s choice scaled by each --splits factor (a
power of two, at least one chunk, at most one 64-position block a chunk) and the chunk kernel launched with
each --warps. Each row a CUDA graph replay (triton.testing.do_bench_cudagraph, median µs), beside a device
copy of the whole cache (the step reads the positions up to ``position``: about half of it at 1024) and the
error against float64 math. --module times another copy of kernels/decode_attention.py (an older kernel,
its OP renamed so both register) the same way, for an A/B in one run.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import graph_replay_row, markdown_row, write_device_rows  # noqa: E402
from decode_attention import _inputs, _reference  # noqa: E402


class _Launch:
    """A Triton kernel launched raw, with extra launch options (num_warps) for one kernel."""

    def __init__(self, kernel, options: dict):
        self.kernel, self.options = kernel, options

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.kernel[grid](*args, **kwargs, **self.options)


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"decode_attention_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _configure(module, factor: float, warps: int):
    """Point module.launch at raw launches with `warps` for the chunk kernel and splits_for scaled by factor."""
    chosen = module.splits_for.__wrapped__ if hasattr(module.splits_for, "__wrapped__") else module.splits_for

    def splits_for(batch_heads, length, processors):
        blocks = max(1, -(-length // module.BLOCK_L))
        want = max(1, int(chosen(batch_heads, length, processors) * factor))
        return min(1 << (want.bit_length() - 1), 1 << (blocks.bit_length() - 1))

    splits_for.__wrapped__ = chosen
    module.splits_for = splits_for
    module.launcher = lambda kernel: _Launch(kernel, {"num_warps": warps} if kernel is module._chunk_kernel else {})


def main() -> None:
    faulthandler.enable()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--position", type=int, nargs="+", default=[1024, 2047])
    parser.add_argument("--splits", type=float, nargs="+", default=[0.5, 1, 2, 4])
    parser.add_argument("--warps", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--module", nargs="*", default=[], help="other copies of kernels/decode_attention.py")
    parser.add_argument("--json")
    options = parser.parse_args()
    from aotcuda.kernels import decode_attention as current

    modules = [("current", current)] + [(os.path.basename(p), _load(p)) for p in options.module]
    processors = torch.cuda.get_device_properties(0).multi_processor_count
    results = []
    print(markdown_row("batch", "position", "kernel", "chunks", "warps", "µs", "of copy", "rel. error"))
    print(markdown_row(*["---"] * 8))
    for batch in options.batch:
        for position in options.position:
            q, k, v, mask = _inputs(batch, position)
            cache = torch.cat([k.flatten(), v.flatten()])
            target = torch.empty_like(cache)
            from triton.testing import do_bench_cudagraph

            copy_us = do_bench_cudagraph(lambda: target.copy_(cache)) * 1e3
            want = _reference(q, k, v, mask)
            scale = 1.0 / q.shape[-1] ** 0.5
            for name, module in modules:
                for factor in options.splits:
                    for warps in options.warps:
                        _configure(module, factor, warps)
                        chunks = module.splits_for(batch * k.shape[1], k.shape[2], processors)
                        row = graph_replay_row((batch, position, name, chunks, warps),
                                               lambda *a: module.launch(*a, scale, q.shape[1] // k.shape[1]),
                                               (q, k, v, mask), want, copy_us)
                        results.append({"batch": batch, "position": position, "kernel": name, "chunks": chunks,
                                        "warps": warps, **row})
    write_device_rows(options.json, results)


if __name__ == "__main__":
    main()
