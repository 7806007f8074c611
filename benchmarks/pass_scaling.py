"""How long ReplaceComplexWithRealPass takes on exported programs of growing size (it should be linear).

    python benchmarks/pass_scaling.py            # Llama-style blocks with complex RoPE (the issue's case)
    python benchmarks/pass_scaling.py --chain --blocks 40 160    # the worst case: every node complex

Programs are exported with a dynamic sequence length and decomposed as lowering does it. Times are
wall-clock seconds of one pass call, best of `repeats`. The issue asks for < 2 s at 2,000 nodes.

Measured on the 2-core CI machine (torch 2.13, CPU, other jobs running at the same time, load ~3;
wall-clock best of 3; before = commit 1460ec3, after = rule-call reuse + product tables once per
factor + op replay, see benchmarks/NOTES.md "Pass speed"):

| program | nodes | before (s) | after (s) |
|---|---|---|---|
| 17 Llama-style blocks | 2061 | 1.82 | 0.64 |
| complex chain, 40 steps (worst case) | 525 | 0.84 (idle) | 0.25 |
| complex chain, 160 steps (worst case) | 2085 | 5.19 | 1.58 |

Nodes the pass does not change are copied with their metadata (about 0.1 ms each). An op a rule
emits costs a fake-tensor dispatch with symbolic shapes through make_fx (about 1 ms) the first time
it meets inputs of given metadata, and about 0.2 ms after that (complex_to_real/replay.py).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.nn import functional as F

from aotcuda.passes import ReplaceComplexWithRealPass


class Block(nn.Module):
    """A Llama-style block: RMSNorm, q/k/v, complex RoPE (polar table, view_as_complex, product,
    view_as_real), causal SDPA, output projection, RMSNorm, SwiGLU MLP; residuals around both halves."""

    def __init__(self, dim: int = 64, heads: int = 4, max_seq: int = 512):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.up, self.gate, self.down = nn.Linear(dim, 2 * dim), nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        head_dim = dim // heads
        inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_seq).float(), inv_freq)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        freqs = self.freqs_cis[: x.shape[1]][None, :, None, :]
        z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(z * freqs).flatten(3).type_as(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, -1).unbind(2)
        q, k = self.rope(q), self.rope(k)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=True)
        h = x + self.out(attn.transpose(1, 2).reshape(b, s, d))
        y = self.norm2(h)
        return h + self.down(F.silu(self.gate(y)) * self.up(y))


class Model(nn.Module):
    def __init__(self, blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class ComplexChain(nn.Module):
    """The worst case: every node complex. `steps` rotary steps of about 13 nodes each."""

    def __init__(self, steps: int, dim: int = 16):
        super().__init__()
        self.steps = steps
        angles = torch.rand(512, dim // 2)
        self.register_buffer("freqs", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.freqs[: x.shape[1]]
        for _ in range(self.steps):
            z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * f
            z = torch.cat([z[..., :4] * 1j, z[..., 4:] + f[:, 4:]], -1)
            x = torch.view_as_real(z).flatten(-2) * 0.5 + x
        return x


def exported_chain(steps: int) -> torch.export.ExportedProgram:
    length = torch.export.Dim("length", max=512)
    ep = torch.export.export(ComplexChain(steps), (torch.randn(2, 16, 16),), dynamic_shapes=({1: length},))
    return ep.run_decompositions()


def exported_model(blocks: int) -> torch.export.ExportedProgram:
    length = torch.export.Dim("length", max=512)
    ep = torch.export.export(Model(blocks), (torch.randn(2, 16, 64),), dynamic_shapes=({1: length},))
    return ep.run_decompositions()


def time_pass(ep: torch.export.ExportedProgram, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ReplaceComplexWithRealPass(strict=True)(ep)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[3, 9, 17])
    parser.add_argument("--chain", action="store_true", help="the all-complex worst case; sizes are steps")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"{'size':>6} {'nodes':>6} {'seconds':>8} {'µs/node':>8}")
    for blocks in args.blocks:
        ep = exported_chain(blocks) if args.chain else exported_model(blocks)
        nodes = len(ep.graph.nodes)
        seconds = time_pass(ep, args.repeats)
        print(f"{blocks:>6} {nodes:>6} {seconds:>8.3f} {1e6 * seconds / nodes:>8.1f}")


if __name__ == "__main__":
    main()
