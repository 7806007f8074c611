"""Pattern 7, Qwen-Image style centred frequencies: positive and negative tables, image and text tokens.

Two complex64 constants: rotations for positions 0, 1, … and for −MAX_POS, …, −1 (three axes side by
side: real dims 8, 12, 12 → 4 + 6 + 6 complex). The image grid's height and width rotations are centred
on the middle of the image: the negative table's tail followed by the positive table's head (a cat).
Each axis is viewed and expanded to [F, H, W, part]; they are concatenated, reshaped to [F·H·W, 16] and
cloned. Text tokens take positive positions after the image's largest half-extent. Image tokens
x_img [B, F·H·W, heads, 32] and text tokens x_txt [B, T, heads, 32] are rotated separately and
concatenated along the sequence: [B, F·H·W + T, heads, 32].
"""

from __future__ import annotations

import torch
from torch import nn

from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table

AXES_DIMS, MAX_POS, HEADS, BATCH, TEXT = (8, 12, 12), 64, 2, 2, 7
GRID = (1, 4, 6)  # frames, height, width


def axis_tables(positions: torch.Tensor) -> torch.Tensor:
    """[len(positions), sum(AXES_DIMS)/2] complex64: the three axes' rotations side by side."""
    return torch.cat([polar_table(positions, inverse_frequencies(dim)) for dim in AXES_DIMS], dim=1)


class CenteredFreqsRope(nn.Module):
    """Rotates image and text tokens with image positions centred at zero."""

    def __init__(self, grid: tuple[int, int, int] = GRID, max_pos: int = MAX_POS):
        super().__init__()
        self.grid = grid
        self.parts = [dim // 2 for dim in AXES_DIMS]
        self.pos_freqs = axis_tables(torch.arange(max_pos))  # plain attributes: lifted constants
        self.neg_freqs = axis_tables(torch.arange(-max_pos, 0))

    def image_table(self, device: torch.device) -> torch.Tensor:
        """[F·H·W, 16] complex64: frame positions from 0, row and column positions centred on 0."""
        f, h, w = self.grid
        pos = self.pos_freqs.to(device).split(self.parts, dim=1)
        neg = self.neg_freqs.to(device).split(self.parts, dim=1)
        rows = torch.cat([neg[1][-(h - h // 2) :], pos[1][: h // 2]], dim=0)
        cols = torch.cat([neg[2][-(w - w // 2) :], pos[2][: w // 2]], dim=0)
        pieces = [
            pos[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
            rows.view(1, h, 1, -1).expand(f, h, w, -1),
            cols.view(1, 1, w, -1).expand(f, h, w, -1),
        ]
        return torch.cat(pieces, dim=-1).reshape(f * h * w, -1).clone()

    def forward(self, x_img: torch.Tensor, x_txt: torch.Tensor) -> torch.Tensor:
        _, h, w = self.grid
        first_text = max(h // 2, w // 2)
        # Plain attributes do not follow module.to(device): move them to the inputs' device, as Qwen-Image does.
        txt_freqs = self.pos_freqs.to(x_txt.device)[first_text : first_text + x_txt.shape[1]]
        img = torch.view_as_real(as_complex_pairs(x_img.float()) * self.image_table(x_img.device).unsqueeze(1))
        txt = torch.view_as_real(as_complex_pairs(x_txt.float()) * txt_freqs.unsqueeze(1))
        return torch.cat([img.flatten(3), txt.flatten(3)], dim=1).type_as(x_img)


def make_inputs(length: int = 0, dtype: torch.dtype = torch.float32):
    """x_img [BATCH, F·H·W, HEADS, 32] and x_txt [BATCH, TEXT, HEADS, 32]; `length` is ignored."""
    f, h, w = GRID
    x_img = torch.randn(BATCH, f * h * w, HEADS, sum(AXES_DIMS)).to(dtype)
    return x_img, torch.randn(BATCH, TEXT, HEADS, sum(AXES_DIMS)).to(dtype)


def build(dtype: torch.dtype = torch.float32):
    """(model, (x_img, x_txt), no dynamic shapes)."""
    return CenteredFreqsRope(), make_inputs(0, dtype), None
