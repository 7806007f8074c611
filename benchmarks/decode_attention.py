"""Decode attention over a static KV cache on CUDA: Inductor's form against aotcuda::decode_attention.

    python benchmarks/decode_attention.py [--batch 1 8] [--position 1024 2047] [--json out.json]

The attention of one decode step of benchmarks/decode.py's decoder, per layer: 32 query heads over 8 KV
heads of 64, a bf16 cache of 2048 positions, a mask that hides the positions past ``position``. Rows:
- "Inductor": the decoder's own code (repeat_kv, q·kᵀ, scale and additive mask, float32 softmax, p·v)
  under torch.compile, as an aotcuda package runs it without SplitCacheAttentionPass;
- "split-cache ATen": the same after SplitCacheAttentionPass with kernel=False (plain ATen, Inductor's
  reductions);
- "decode_attention kernel": the pass's kernel op (kernels/decode_attention.py).
Each timed as a CUDA graph replay (triton.testing.do_bench_cudagraph, median); "of copy" is the time of
a device copy of the whole cache's bytes (K and V) measured in the same run, over the row's time: the
step reads the whole cache. Error: against float64 math on the same values. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import graph_replay_row, markdown_row, write_device_rows  # noqa: E402

HEADS, KV_HEADS, WIDTH, LENGTH = 32, 8, 64, 2048


class DecoderAttention(torch.nn.Module):
    """The decoder's attention over its cache (aotcuda.models.decoder writes it so)."""

    def forward(self, q, k, v, mask):
        group = q.shape[1] // k.shape[1]
        k = k[:, :, None].expand(-1, -1, group, -1, -1).reshape(k.shape[0], -1, *k.shape[2:])
        v = v[:, :, None].expand(-1, -1, group, -1, -1).reshape(v.shape[0], -1, *v.shape[2:])
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1]) + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        return torch.matmul(probs, v)


def _inputs(batch, position, device="cuda"):
    q = torch.randn(batch, HEADS, 1, WIDTH, dtype=torch.bfloat16, device=device)
    k = torch.randn(batch, KV_HEADS, LENGTH, WIDTH, dtype=torch.bfloat16, device=device)
    v = torch.randn(batch, KV_HEADS, LENGTH, WIDTH, dtype=torch.bfloat16, device=device)
    mask = torch.zeros(1, 1, 1, LENGTH, dtype=torch.bfloat16, device=device)
    mask[..., position + 1:] = -math.inf
    return q, k, v, mask


def _reference(q, k, v, mask):
    group = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(group, 1) for t in (k, v))
    scores = q.double() @ k.transpose(2, 3) / math.sqrt(q.shape[-1]) + mask.double()
    return torch.softmax(scores, -1) @ v


def _variants(args):
    from aotcuda.lowering.decompositions import decomposition_table
    from aotcuda.passes.decode_attention import SplitCacheAttentionPass

    model = DecoderAttention()
    ep = torch.export.export(model, args).run_decompositions(decomposition_table())
    rows = [("Inductor", torch.compile(model))]
    for name, kernel in (("split-cache ATen", False), ("decode_attention kernel", True)):
        rewritten = SplitCacheAttentionPass(min_cache_len=512, kernel=kernel)(ep)
        rows.append((name, torch.compile(rewritten.module())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--position", type=int, nargs="+", default=[1024, 2047])
    parser.add_argument("--json")
    options = parser.parse_args()
    from triton.testing import do_bench_cudagraph

    results = []
    print(markdown_row("batch", "position", "how it runs", "µs", "of copy", "rel. error"))
    print(markdown_row(*["---"] * 6))
    for batch in options.batch:
        variants = _variants(_inputs(batch, options.position[0]))  # compiled once: positions change values only
        for position in options.position:
            args = _inputs(batch, position)
            cache = torch.cat([args[1].flatten(), args[2].flatten()])
            target = torch.empty_like(cache)
            copy_us = do_bench_cudagraph(lambda: target.copy_(cache)) * 1e3
            want = _reference(*args)
            print(markdown_row(batch, position, "device copy of the cache", f"{copy_us:.1f}", "100%", ""))
            for name, run in variants:
                row = graph_replay_row((batch, position, name), run, args, want, copy_us)
                results.append({"batch": batch, "position": position, "row": name, **row})
    write_device_rows(options.json, results)

if __name__ == "__main__":
    main()
