"""diffusers models with complex math, built from tiny configs with random weights (no download).

- QwenImageTransformer2DModel: complex positive and negative frequency tables held as plain attributes
  (export lifts them as constants), cut with split_with_sizes, slices, expand, cat and clone, applied
  through view_as_complex, mul and view_as_real.

Each builder returns (model, example_inputs, dynamic_shapes), made a Case by Case.positional (aotcuda.models.case).
diffusers is a test-only dependency: it is imported inside the builders.
"""

from __future__ import annotations

import torch
from torch import nn

from aotcuda.models.case import Case

from ._common import import_library

QWEN_GRID, QWEN_TEXT, QWEN_CHANNELS, QWEN_TEXT_DIM = (1, 4, 4), 7, 16, 32


class QwenImageDenoiser(nn.Module):
    """QwenImageTransformer2DModel for one fixed image grid:
    (latents [B, F·H·W, 16], text [B, T, 32], timestep [B]) → [B, F·H·W, 16] (patch_size² · out_channels)."""

    def __init__(self, model: nn.Module, grid: tuple[int, int, int] = QWEN_GRID):
        super().__init__()
        self.model = model
        self.grid = grid

    def forward(self, latents: torch.Tensor, text: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        img_shapes = [[self.grid]] * latents.shape[0]
        return self.model(
            hidden_states=latents, encoder_hidden_states=text, timestep=timestep,
            img_shapes=img_shapes, return_dict=False,
        )[0]


def qwen_image_inputs(length: int = 0, dtype: torch.dtype = torch.float32):
    """Latents for a 4×4-patch image, 7 text tokens, and a timestep in (0, 1); `length` is ignored."""
    f, h, w = QWEN_GRID
    latents = torch.randn(1, f * h * w, QWEN_CHANNELS).to(dtype)
    text = torch.randn(1, QWEN_TEXT, QWEN_TEXT_DIM).to(dtype)
    return latents, text, torch.rand(1).to(dtype)


def build_qwen_image(dtype: torch.dtype = torch.float32):
    """(QwenImageDenoiser in `dtype`: 1 layer, 2 heads of 32, axes_dims_rope (8, 12, 12); inputs; None)."""
    diffusers = import_library("diffusers")
    model = diffusers.QwenImageTransformer2DModel(
        patch_size=2, in_channels=QWEN_CHANNELS, out_channels=4, num_layers=1, attention_head_dim=32,
        num_attention_heads=2, joint_attention_dim=QWEN_TEXT_DIM, axes_dims_rope=(8, 12, 12),
    )
    return QwenImageDenoiser(model.to(dtype).eval()), qwen_image_inputs(0, dtype), None


DIFFUSERS_MODELS: dict[str, Case] = {
    "qwen_image": Case.positional(
        "qwen_image", "diffusers QwenImageTransformer2DModel",
        "complex constants, split_with_sizes, slice, view, expand, cat, clone, view_as_complex, unsqueeze, "
        "mul, view_as_real",
        build_qwen_image, qwen_image_inputs, (QWEN_GRID[0] * QWEN_GRID[1] * QWEN_GRID[2],),
        (torch.float32, torch.bfloat16), library="diffusers",
    ),
}
