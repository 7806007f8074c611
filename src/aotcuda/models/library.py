"""Library models with complex rotary embeddings, built from tiny configs with random weights (no download).

- transformers DeepseekV2Model: rotary rotations made with torch.polar each call, applied through
  view_as_complex, mul and view_as_real inside multi-head latent attention (MoE layer included).
- diffusers QwenImageTransformer2DModel: complex positive and negative frequency tables held as plain
  attributes (export lifts them as constants), cut with split_with_sizes, slices, expand, cat and clone,
  applied through view_as_complex, mul and view_as_real.

Each builder returns (model, example_inputs, dynamic_shapes) like the patterns' (see patterns._common.Case);
the model is a thin wrapper that fixes the library call's keyword arguments and returns one tensor.
Both libraries are test-only dependencies: importing them happens inside the builders, and a missing one
raises ImportError naming the `aotcuda[test]` extra.
"""

from __future__ import annotations

import importlib

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.patterns._common import Case

DEEPSEEK_BATCH, DEEPSEEK_SEQ, DEEPSEEK_MAX_SEQ, DEEPSEEK_VOCAB = 2, 12, 64, 128
QWEN_GRID, QWEN_TEXT, QWEN_CHANNELS, QWEN_TEXT_DIM = (1, 4, 4), 7, 16, 32


def _import(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{module} is needed for aotcuda's library-model examples; install it with "
            f"`pip install 'aotcuda[test]'` (it pins the tested version)"
        ) from error


class DeepseekV2Hidden(nn.Module):
    """DeepseekV2Model(input_ids, attention_mask, use_cache=False) → last hidden state [B, S, hidden].

    input_ids and attention_mask are [B, S] int64 (mask 1 for a token, 0 for padding). Passing the
    mask, as a padded batch does, also keeps transformers from looking for packed sequences with cumsum.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state


def deepseek_v2_config(**sizes):
    """Tiny DeepSeek-V2: hidden 64, 2 layers (one dense, one MoE with 4 routed experts), 4 heads,
    kv_lora_rank 16, q_lora_rank 32, rope dim 16; ``sizes`` (DeepseekV2Config keywords) override these.
    Eager attention and the dense "batched_mm" experts keep the exported graph free of data-dependent
    control flow (and the default grouped_mm experts have no AOTInductor CUDA shim in torch 2.11)."""
    transformers = _import("transformers")
    return transformers.DeepseekV2Config(**{
        "vocab_size": DEEPSEEK_VOCAB, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
        "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "max_position_embeddings": DEEPSEEK_MAX_SEQ, **sizes,
        "attn_implementation": "eager", "experts_implementation": "batched_mm",
    })


def widen_router_margins(model: nn.Module, std: float = 1.0) -> None:
    """Re-draw the MoE routers' weights with a large std.

    With the library's default init (std 0.02) the router's scores for the 4 experts differ by ~1e-3, so
    rounding differences between eager and compiled code (bfloat16 above all) could pick other experts
    and make the two disagree for reasons that have nothing to do with complex numbers.
    """
    for name, param in model.named_parameters():
        if name.endswith("mlp.gate.weight"):
            nn.init.normal_(param, std=std)


def deepseek_v2_inputs(seq: int = DEEPSEEK_SEQ, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [DEEPSEEK_BATCH, seq] int64 and an attention mask whose last row ends in 1–3 padding
    tokens (`dtype` is the model's; ids and mask are int64 whatever it is)."""
    input_ids = torch.randint(0, DEEPSEEK_VOCAB, (DEEPSEEK_BATCH, seq))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, seq - int(torch.randint(1, 4, ())) :] = 0
    return input_ids, attention_mask


def build_deepseek_v2(dtype: torch.dtype = torch.float32):
    """(DeepseekV2Hidden in `dtype`, (input_ids, attention_mask) [2, 12], dynamic_shapes with S in [4, 64])."""
    transformers = _import("transformers")
    model = transformers.DeepseekV2Model(deepseek_v2_config())
    widen_router_margins(model)
    model = model.to(dtype).eval()
    seq = Dim("seq", min=4, max=DEEPSEEK_MAX_SEQ)
    return DeepseekV2Hidden(model), deepseek_v2_inputs(DEEPSEEK_SEQ, dtype), ({1: seq}, {1: seq})


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
    diffusers = _import("diffusers")
    model = diffusers.QwenImageTransformer2DModel(
        patch_size=2, in_channels=QWEN_CHANNELS, out_channels=4, num_layers=1, attention_head_dim=32,
        num_attention_heads=2, joint_attention_dim=QWEN_TEXT_DIM, axes_dims_rope=(8, 12, 12),
    )
    return QwenImageDenoiser(model.to(dtype).eval()), qwen_image_inputs(0, dtype), None


LIBRARY_MODELS: dict[str, Case] = {
    "deepseek_v2": Case(
        "deepseek_v2", "transformers DeepseekV2Model",
        "polar, mul by real scalar, view_as_complex, unsqueeze, mul, view_as_real",
        build_deepseek_v2, deepseek_v2_inputs, (DEEPSEEK_SEQ, 29), (torch.float32, torch.bfloat16),
    ),
    "qwen_image": Case(
        "qwen_image", "diffusers QwenImageTransformer2DModel",
        "complex constants, split_with_sizes, slice, view, expand, cat, clone, view_as_complex, unsqueeze, "
        "mul, view_as_real",
        build_qwen_image, qwen_image_inputs, (QWEN_GRID[0] * QWEN_GRID[1] * QWEN_GRID[2],),
        (torch.float32, torch.bfloat16),
    ),
}
