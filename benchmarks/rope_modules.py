"""The rotary-embedding programs the benchmarks compare, written the two ways models write them.

Shapes: q, k are [B, S, H, D] (D even); the rotation table covers `max_seq` positions of D/2 frequencies.
The math (RoFormer, Su et al. 2021): each pair (x[2i], x[2i+1]) is multiplied, as a complex number, by
exp(j·s·θ_i) with θ_i = theta^(−2i/D). Both modules compute it in float32 and return q, k in their dtype.
"""

from __future__ import annotations

import torch
from torch import nn


def rotary_angles(head_dim: int, max_seq: int, theta: float = 10000.0) -> torch.Tensor:
    """[max_seq, head_dim/2] float32 angles s·θ_i."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    return torch.outer(torch.arange(max_seq, dtype=torch.float32), inv_freq)


class ComplexRope(nn.Module):
    """Llama-style: a complex64 table built with torch.polar, view_as_complex, a product, view_as_real."""

    def __init__(self, head_dim: int, max_seq: int):
        super().__init__()
        angles = rotary_angles(head_dim, max_seq)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = q.shape[1]
        freqs = self.freqs_cis[:seq].view(1, seq, 1, -1)
        q_c = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_c = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        q_out = torch.view_as_real(q_c * freqs).flatten(3)
        k_out = torch.view_as_real(k_c * freqs).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)


class RealRope(nn.Module):
    """The same math hand-written in real numbers, as models without complex tensors write it."""

    def __init__(self, head_dim: int, max_seq: int):
        super().__init__()
        angles = rotary_angles(head_dim, max_seq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = q.shape[1]
        cos = self.cos[:seq].view(1, seq, 1, -1)
        sin = self.sin[:seq].view(1, seq, 1, -1)

        def rotate(x: torch.Tensor) -> torch.Tensor:
            re, im = x.float().unflatten(-1, (-1, 2)).unbind(-1)
            out = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1)
            return out.flatten(3).type_as(x)

        return rotate(q), rotate(k)
