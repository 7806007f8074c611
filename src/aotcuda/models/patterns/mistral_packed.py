"""Pattern 4, Mistral packed tokens: no batch dim; the table is indexed with a tensor of positions.

q, k [T, H, D] hold several sequences packed one after another; positions [T] (int64) restart at 0 for
each sequence. freqs_cis[positions] (advanced indexing) gives [T, D/2], then [:, None, :] broadcasts it
over heads. T is dynamic.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEADS, HEAD_DIM, MAX_POS, MAX_TOKENS = 4, 32, 64, 128


class MistralPackedRope(nn.Module):
    """Rotates packed q and k [T, H, D] by rows of a complex64 buffer [MAX_POS, D/2]."""

    def __init__(self, head_dim: int = HEAD_DIM, max_pos: int = MAX_POS):
        super().__init__()
        self.register_buffer("freqs_cis", polar_table(torch.arange(max_pos), inverse_frequencies(head_dim, 1e6)))

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
        freqs = self.freqs_cis[positions][:, None, :]
        q_out = torch.view_as_real(as_complex_pairs(q.float()) * freqs).flatten(-2)
        k_out = torch.view_as_real(as_complex_pairs(k.float()) * freqs).flatten(-2)
        return q_out.type_as(q), k_out.type_as(k)


def packed_positions(tokens: int) -> torch.Tensor:
    """Positions of sequences of random lengths packed into `tokens` tokens, each restarting at 0."""
    positions, start = [], 0
    while start < tokens:
        length = min(int(torch.randint(1, 9, ())), tokens - start)
        positions.append(torch.arange(length))
        start += length
    return torch.cat(positions)


def make_inputs(tokens: int = 20, dtype: torch.dtype = torch.float32):
    shape = (tokens, HEADS, HEAD_DIM)
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype), packed_positions(tokens)


def build(dtype: torch.dtype = torch.float32):
    """(model, (q, k, positions) at T=20, dynamic_shapes with T in [2, MAX_TOKENS])."""
    tokens = Dim("tokens", min=2, max=MAX_TOKENS)
    return MistralPackedRope(), make_inputs(20, dtype), ({0: tokens}, {0: tokens}, {0: tokens})
