"""Pattern 6, Lumina-Next / Lumina-Image 2 style: per-axis gather from repeated complex tables.

Three complex64 tables, one per position axis (real dims 16, 24, 24 → 8, 12, 12 complex). For axis a,
the int64 ids [B, L] of that axis are repeated along the frequency dim, the table is repeated along the
batch, and torch.gather picks each token's row, on complex values. The three results are concatenated
[B, L, 32], unsqueezed to [B, L, 1, 32] and applied to x [B, L, H, 64].
"""

from __future__ import annotations

import torch
from torch import nn

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

AXES_DIMS, MAX_POS, HEADS, BATCH, LENGTH = (16, 24, 24), 32, 2, 2, 10


class LuminaRope(nn.Module):
    """Rotates x [B, L, H, sum(AXES_DIMS)] by per-token rows gathered from three complex tables."""

    def __init__(self, axes_dims=AXES_DIMS, max_pos: int = MAX_POS):
        super().__init__()
        positions = torch.arange(max_pos)
        # Plain attributes: three lifted tensor constants.
        self.tables = [polar_table(positions, inverse_frequencies(dim)) for dim in axes_dims]

    def token_freqs(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, L, 3] int64 → [B, L, sum(AXES_DIMS)/2] complex64."""
        batch = ids.shape[0]
        per_axis = []
        for axis, table in enumerate(self.tables):
            table = table.to(ids.device)  # plain attributes do not follow module.to(device)
            index = ids[:, :, axis : axis + 1].repeat(1, 1, table.shape[-1])
            per_axis.append(torch.gather(table.unsqueeze(0).repeat(batch, 1, 1), 1, index))
        return torch.cat(per_axis, dim=-1)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        freqs = self.token_freqs(ids).unsqueeze(2)
        return torch.view_as_real(as_complex_pairs(x.float()) * freqs).flatten(3).type_as(x)


def make_inputs(length: int = LENGTH, dtype: torch.dtype = torch.float32):
    """x [BATCH, LENGTH, HEADS, 64] and ids [BATCH, LENGTH, 3] in [0, MAX_POS); `length` is ignored."""
    x = torch.randn(BATCH, LENGTH, HEADS, sum(AXES_DIMS)).to(dtype)
    return x, torch.randint(0, MAX_POS, (BATCH, LENGTH, 3))


def build(dtype: torch.dtype = torch.float32):
    """(model, (x, ids), no dynamic shapes)."""
    return LuminaRope(), make_inputs(LENGTH, dtype), None
