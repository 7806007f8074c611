"""Pattern 1, Llama-2 style: a complex table kept as a plain tensor attribute, sliced to the sequence.

q, k [B, S, H, D] (float32 or bfloat16) → float → view_as_complex [B, S, H, D/2] → times the table
viewed [1, S, 1, D/2] → view_as_real → flatten → back to the input dtype. S is dynamic (2 … MAX_SEQ).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEADS, HEAD_DIM, MAX_SEQ, BATCH = 4, 32, 64, 2


class Llama2Rope(nn.Module):
    """Rotates q and k by a complex64 table [MAX_SEQ, HEAD_DIM/2] held as an attribute (a lifted constant)."""

    def __init__(self, head_dim: int = HEAD_DIM, max_seq: int = MAX_SEQ):
        super().__init__()
        # A plain attribute, not a buffer: torch.export lifts it as a tensor constant.
        self.freqs_cis = polar_table(torch.arange(max_seq), inverse_frequencies(head_dim))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = q.shape[1]
        # A plain attribute does not follow module.to(device); move it to the inputs' device, as Llama-2 does.
        freqs = self.freqs_cis.to(q.device)[:seq].view(1, seq, 1, -1)
        q_out = torch.view_as_real(as_complex_pairs(q.float()) * freqs).flatten(3)
        k_out = torch.view_as_real(as_complex_pairs(k.float()) * freqs).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)


def make_inputs(seq: int = 12, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (BATCH, seq, HEADS, HEAD_DIM)
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


def build(dtype: torch.dtype = torch.float32):
    """(model, (q, k) at S=12, dynamic_shapes with S in [2, MAX_SEQ])."""
    seq = Dim("seq", min=2, max=MAX_SEQ)
    return Llama2Rope(), make_inputs(12, dtype), ({1: seq}, {1: seq})
