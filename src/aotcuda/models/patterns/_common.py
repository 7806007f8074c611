"""Helpers shared by the rotary-embedding patterns: frequency tables and the pair ↔ complex views.

The math is the standard rotary position embedding (Su et al., "RoFormer", 2021): position p and pair
index i rotate by the angle p · θ^(−2i/d), held as the unit complex number e^{i·p·θ^(−2i/d)}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


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


@dataclass(frozen=True)
class Case:
    """One model or pattern that aotcuda must lower, with what a test needs to check it.

    build(dtype) returns (model, example_inputs, dynamic_shapes) ready for torch.export.export;
    make_inputs(length, dtype) returns fresh random inputs with the dynamic dim (if any) at `length`.
    lengths[0] is the export length; lengths[1:] are other lengths the program must also run at
    (empty where nothing is dynamic).
    """

    name: str
    stands_for: str
    complex_ops: str
    build: Callable[[torch.dtype], tuple[nn.Module, tuple[Any, ...], Any]]
    make_inputs: Callable[[int, torch.dtype], tuple[Any, ...]]
    lengths: tuple[int, ...]
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)

    @property
    def dynamic(self) -> bool:
        return len(self.lengths) > 1
