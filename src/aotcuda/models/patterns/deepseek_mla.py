"""Pattern 3, DeepSeek multi-head latent attention: rope on a split-off part of q and on a shared k part.

A non-persistent complex64 buffer [MAX_SEQ, ROPE/2]; q [B, S, H, NOPE+ROPE] is split with torch.split
into a no-rope and a rope part; the rope is applied to q_pe [B, S, H, ROPE] and to the single shared
k_pe [B, S, ROPE] unsqueezed to [B, S, 1, ROPE]; both are cast back to the input dtype (bfloat16 in the
model), concatenated with the no-rope parts, and scored with einsum: scores [B, S, H, S]. S is dynamic.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEADS, NOPE, ROPE, MAX_SEQ, BATCH = 4, 16, 8, 64, 2


def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """x [B, S, h, ROPE] rotated by freqs [S, ROPE/2] in float32, returned in x's dtype."""
    rotated = torch.view_as_real(as_complex_pairs(x.float()) * freqs.view(1, x.shape[1], 1, -1))
    return rotated.flatten(3).to(x.dtype)


class DeepseekMlaRope(nn.Module):
    """Attention scores of MLA with decoupled rope; the table is a non-persistent complex buffer."""

    def __init__(self, max_seq: int = MAX_SEQ):
        super().__init__()
        table = polar_table(torch.arange(max_seq), inverse_frequencies(ROPE))
        self.register_buffer("freqs_cis", table, persistent=False)
        self.scale = (NOPE + ROPE) ** -0.5

    def forward(self, q: torch.Tensor, k_nope: torch.Tensor, k_pe: torch.Tensor) -> torch.Tensor:
        freqs = self.freqs_cis[: q.shape[1]]
        q_nope, q_pe = torch.split(q, [NOPE, ROPE], dim=-1)
        q_pe = rotate(q_pe, freqs)
        k_pe = rotate(k_pe.unsqueeze(2), freqs)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, -1, HEADS, -1)], dim=-1)
        return torch.einsum("bshd,bthd->bsht", q, k) * self.scale


def make_inputs(seq: int = 12, dtype: torch.dtype = torch.bfloat16):
    q = torch.randn(BATCH, seq, HEADS, NOPE + ROPE).to(dtype)
    k_nope = torch.randn(BATCH, seq, HEADS, NOPE).to(dtype)
    k_pe = torch.randn(BATCH, seq, ROPE).to(dtype)
    return q, k_nope, k_pe


def build(dtype: torch.dtype = torch.bfloat16):
    """(model, (q, k_nope, k_pe) at S=12, dynamic_shapes with S in [2, MAX_SEQ])."""
    seq = Dim("seq", min=2, max=MAX_SEQ)
    return DeepseekMlaRope(), make_inputs(12, dtype), ({1: seq}, {1: seq}, {1: seq})
