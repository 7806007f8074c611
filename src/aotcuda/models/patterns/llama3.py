"""Pattern 2, Llama-3 style: wavelength-blended inverse frequencies, table in a buffer, index_select.

The inverse frequencies are scaled by wavelength (long wavelengths divided by `factor`, short ones kept,
the band between blended smoothly, chosen with torch.where), the complex64 table is a registered
buffer, and each call gathers its rows with index_select by int64 position ids [S].
q, k [B, S, H, D] float32 or bfloat16; S is dynamic.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEADS, HEAD_DIM, MAX_SEQ, BATCH = 4, 32, 64, 2


def wavelength_scaled(inv_freq: torch.Tensor, factor=8.0, low=1.0, high=4.0, original_context=16) -> torch.Tensor:
    """Long-context frequency scaling: keep wavelengths < context/high, divide those > context/low by factor."""
    wavelength = 2 * math.pi / inv_freq
    smooth = (original_context / wavelength - low) / (high - low)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    scaled = torch.where(wavelength > original_context / low, inv_freq / factor, inv_freq)
    in_band = (wavelength >= original_context / high) & (wavelength <= original_context / low)
    return torch.where(in_band, blended, scaled)


class Llama3Rope(nn.Module):
    """Rotates q and k by rows of a complex64 buffer [MAX_SEQ, HEAD_DIM/2] picked by position ids."""

    def __init__(self, head_dim: int = HEAD_DIM, max_seq: int = MAX_SEQ):
        super().__init__()
        inv_freq = wavelength_scaled(inverse_frequencies(head_dim, theta=500000.0))
        self.register_buffer("freqs_cis", polar_table(torch.arange(max_seq), inv_freq))

    def forward(self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor):
        freqs = torch.index_select(self.freqs_cis, 0, position_ids).unsqueeze(0).unsqueeze(2)
        q_out = torch.view_as_real(as_complex_pairs(q.float()) * freqs).flatten(3)
        k_out = torch.view_as_real(as_complex_pairs(k.float()) * freqs).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)


def make_inputs(seq: int = 12, dtype: torch.dtype = torch.float32):
    shape = (BATCH, seq, HEADS, HEAD_DIM)
    positions = torch.randperm(MAX_SEQ)[:seq]  # any rows, not only 0..S-1
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype), positions


def build(dtype: torch.dtype = torch.float32):
    """(model, (q, k, position_ids) at S=12, dynamic_shapes with S in [2, MAX_SEQ])."""
    seq = Dim("seq", min=2, max=MAX_SEQ)
    return Llama3Rope(), make_inputs(12, dtype), ({1: seq}, {1: seq}, {0: seq})
