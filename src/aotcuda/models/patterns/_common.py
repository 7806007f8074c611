"""Helpers shared by the rotary-embedding patterns: frequency tables and the pair ↔ complex views.

The math is the standard rotary position embedding (Su et al., "RoFormer", 2021): position p and pair
index i rotate by the angle p · θ^(−2i/d), held as the unit complex number e^{i·p·θ^(−2i/d)}.
"""

from __future__ import annotations

import torch


def inverse_frequencies(dim: int, theta: float = 10000.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """θ^(−2i/dim) for i in [0, dim/2): shape [dim // 2], in `dtype` (float32 or float64)."""
    if dim % 2:
        raise ValueError(f"rotary dim must be even, got {dim}")
    return 1.0 / theta ** (torch.arange(0, dim, 2, dtype=dtype) / dim)


def polar_table(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Unit complex rotations e^{i·p·f}: [len(positions), len(inv_freq)], complex64 (float32 in) or complex128."""
    angles = torch.outer(positions.to(inv_freq.dtype), inv_freq)
    return torch.polar(torch.ones_like(angles), angles)


def as_complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """View the last dim of a float tensor [..., D] as D/2 complex numbers [..., D/2] (adjacent pairs)."""
    return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
