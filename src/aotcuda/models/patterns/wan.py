"""Pattern 5, Wan 2.1 video: three complex128 tables (frames, height, width) joined, cut to the grid.

Head dim 128 splits into 44 / 42 / 42 real dims, i.e. 22 + 21 + 21 complex numbers, one table per axis
from float64 inverse frequencies; the three are concatenated into one complex128 table [MAX_POS, 64].
Each call splits it again, slices each axis to the grid (frames F, height H, width W), views and expands
each to [F, H, W, part], concatenates, and reshapes to [L = F·H·W, 1, 64]. x [B, L, heads, 128] float32
goes to float64, to complex128, is multiplied, and comes back through view_as_real and flatten as float32.
The grid is fixed when the module is built.
"""

from __future__ import annotations

import torch
from torch import nn

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

HEAD_DIM, HEADS, MAX_POS, BATCH = 128, 2, 32, 2
GRID = (2, 3, 4)  # frames, height, width


def axis_dims(head_dim: int = HEAD_DIM) -> list[int]:
    """Real dims per axis: frames take what the two spatial axes (2·(d//6) each) leave: 44, 42, 42 for 128."""
    spatial = 2 * (head_dim // 6)
    return [head_dim - 2 * spatial, spatial, spatial]


class WanRope(nn.Module):
    """Rotates x [B, F·H·W, heads, 128] by a 3-axis complex128 table, in float64."""

    def __init__(self, grid: tuple[int, int, int] = GRID, max_pos: int = MAX_POS):
        super().__init__()
        self.grid = grid
        self.parts = [dim // 2 for dim in axis_dims()]
        positions = torch.arange(max_pos)
        tables = [polar_table(positions, inverse_frequencies(dim, dtype=torch.float64)) for dim in axis_dims()]
        self.register_buffer("freqs", torch.cat(tables, dim=1), persistent=False)

    def grid_table(self) -> torch.Tensor:
        """[F·H·W, 1, 64] complex128: each token's frame, row and column rotations side by side."""
        f, h, w = self.grid
        frames, rows, cols = self.freqs.split(self.parts, dim=1)
        pieces = [
            frames[:f].view(f, 1, 1, -1).expand(f, h, w, -1),
            rows[:h].view(1, h, 1, -1).expand(f, h, w, -1),
            cols[:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ]
        return torch.cat(pieces, dim=-1).reshape(f * h * w, 1, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rotated = as_complex_pairs(x.to(torch.float64)) * self.grid_table()
        return torch.view_as_real(rotated).flatten(3).float()


def make_inputs(length: int = 0, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor]:
    """x [BATCH, F·H·W, HEADS, 128]; the length is fixed by GRID, so `length` is ignored."""
    f, h, w = GRID
    return (torch.randn(BATCH, f * h * w, HEADS, HEAD_DIM).to(dtype),)


def build(dtype: torch.dtype = torch.float32):
    """(model, (x,), no dynamic shapes)."""
    return WanRope(), make_inputs(0, dtype), None
