"""Rotary embeddings written the way models write them, with complex numbers, for the pass tests.

LlamaRope follows facebookresearch/llama model.py (precompute_freqs_cis, apply_rotary_emb), extended the
way partial-rotary models do: the complex head is split in two, one half rotated by a complex constant
table, the other by rotations built with torch.polar inside forward, and the halves joined with cat.
WanRope follows Wan 2.1's rope_params / rope_apply: complex128 tables for three axes (frames, height,
width) split 22/21/21 per head, sliced per axis, expanded over the grid and concatenated.
"""

from __future__ import annotations

import torch
from torch import nn


def rope_table(positions: int, dim: int, theta: float = 10000.0, dtype=torch.float32) -> torch.Tensor:
    """[positions, dim/2] complex rotations e^{i·p·θ_j}, θ_j = theta^(−2j/dim) (RoFormer)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=dtype) / dim)
    angles = torch.outer(torch.arange(positions, dtype=dtype), inv_freq)
    return torch.polar(torch.ones_like(angles), angles)


class LlamaRope(nn.Module):
    """forward(q, k [B, S, H, D]) → q, k rotated, in their dtype; the math runs in float32."""

    def __init__(self, head_dim: int = 16, max_seq: int = 64):
        super().__init__()
        self.half = head_dim // 4  # complex entries of each half of the head
        self.freqs_cis = rope_table(max_seq, head_dim)[:, : self.half].clone()  # a complex constant
        inv_freq = 1.0 / 500.0 ** (torch.arange(0, head_dim // 2, 2, dtype=torch.float32) / (head_dim // 2))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotations(self, seq: int) -> torch.Tensor:
        angles = torch.outer(torch.arange(seq, dtype=torch.float32, device=self.inv_freq.device), self.inv_freq)
        return torch.polar(torch.ones_like(angles), angles)

    def apply(self, x: torch.Tensor, table: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
        x_c = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        first, second = x_c.split([self.half, x_c.shape[-1] - self.half], dim=-1)
        seq = x.shape[1]
        out = torch.cat([first * table.view(1, seq, 1, -1), second * rotations.view(1, seq, 1, -1)], dim=-1)
        return torch.view_as_real(out).flatten(3).type_as(x)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = q.shape[1]
        table, rotations = self.freqs_cis[:seq], self.rotations(seq)
        return self.apply(q, table, rotations), self.apply(k, table, rotations)


class WanRope(nn.Module):
    """forward(x [B, F·H·W, heads, 128]) → x rotated on a frames × height × width grid, float32 out."""

    def __init__(self, grid=(2, 3, 4), head_dim: int = 128, max_positions: int = 32):
        super().__init__()
        self.grid = grid
        d = head_dim
        freqs = torch.cat([rope_table(max_positions, d - 4 * (d // 6), dtype=torch.float64),
                           rope_table(max_positions, 2 * (d // 6), dtype=torch.float64),
                           rope_table(max_positions, 2 * (d // 6), dtype=torch.float64)], dim=1)
        self.register_buffer("freqs", freqs)  # complex128 [max_positions, 64]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f, h, w = self.grid
        n, c = x.size(2), x.size(3) // 2
        freqs = self.freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)  # 22 / 21 / 21
        seq_len = f * h * w
        x_c = torch.view_as_complex(x[:, :seq_len].to(torch.float64).reshape(x.size(0), seq_len, n, -1, 2))
        freqs_grid = torch.cat([
            freqs[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
            freqs[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
            freqs[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ], dim=-1).reshape(1, seq_len, 1, -1)
        rotated = torch.view_as_real(x_c * freqs_grid).flatten(3)
        return torch.cat([rotated, x[:, seq_len:].to(torch.float64)], dim=1).float()
