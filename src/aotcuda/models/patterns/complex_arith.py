"""Pattern 8, complex arithmetic beyond the product: add, scale, conj, abs and angle.

x [B, S, H, D] float32 → z = view_as_complex(x) [B, S, H, D/2]; with the complex64 table f [S, D/2]
(a buffer) broadcast over heads: y = z·f + 0.5·z − conj(f). Returns view_as_real(y) flattened
[B, S, H, D], |y| and arg(y) [B, S, H, D/2] (radians, in (−π, π]).
"""

from __future__ import annotations

import torch
from torch import nn

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEADS, HEAD_DIM, SEQ, BATCH = 2, 16, 8, 2


class ComplexArithmetic(nn.Module):
    """y = z·f + 0.5·z − conj(f); outputs (y as real pairs, |y|, arg y)."""

    def __init__(self, head_dim: int = HEAD_DIM, seq: int = SEQ):
        super().__init__()
        self.register_buffer("freqs_cis", polar_table(torch.arange(seq), inverse_frequencies(head_dim)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = as_complex_pairs(x.float())
        freqs = self.freqs_cis.unsqueeze(1)
        y = z * freqs + 0.5 * z - freqs.conj()
        return torch.view_as_real(y).flatten(3), y.abs(), y.angle()


def make_inputs(length: int = SEQ, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor]:
    """x [BATCH, SEQ, HEADS, HEAD_DIM]; `length` is ignored."""
    return (torch.randn(BATCH, SEQ, HEADS, HEAD_DIM).to(dtype),)


def build(dtype: torch.dtype = torch.float32):
    """(model, (x,), no dynamic shapes)."""
    return ComplexArithmetic(), make_inputs(SEQ, dtype), None
