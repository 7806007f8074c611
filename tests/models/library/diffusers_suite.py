"""The diffusers suite: diffusers models with complex or FFT math, built from tiny configs with random weights (nothing downloads).

Each entry of DIFFUSERS_SUITE is a Case (aotcuda.models.case): the library class itself (no wrapper), called with
the positional and keyword arguments its pipeline passes (``return_dict=False``, ``img_shapes=[...]``, lists of
tensors), so that torch.export sees exactly what a user's export sees. Python values among the arguments
(bools, ints, nested lists and tuples of them) become constant inputs of the ExportedProgram.

The configs are the smallest that still run the complex code the real checkpoint runs (one layer of each
kind, two heads, rotary axes of a few pairs each); `notes` says why a dim that looks dynamic is static, and
what a user must pass where the default call does not export.

diffusers is a test-only dependency: it is imported inside the builders, and a missing one raises
ImportError naming the ``aotcuda[test]`` extra.
"""

from __future__ import annotations

import torch
from torch.export import Dim

from aotcuda.models.case import Case

from ._common import ROTARY, diffusers, diffusers_case, randn, redraw_zero_parameters, static_dims


# --- Qwen-Image: QwenImageTransformer2DModel -------------------------------------------------------------
QWEN_GRID, QWEN_TEXT = (1, 4, 4), 7


def qwen_image_inputs(length: int = QWEN_TEXT, dtype: torch.dtype = torch.float32):
    """The pipeline's call: packed latents [1, F·H·W, 16] for img_shapes [[(1, 4, 4)]], `length` text tokens
    [1, T, 32] with their int64 mask, timestep in (0, 1), return_dict=False."""
    f, h, w = QWEN_GRID
    return (), dict(
        hidden_states=randn(1, f * h * w, 16, dtype=dtype), timestep=torch.rand(1).to(dtype),
        encoder_hidden_states=randn(1, length, 32, dtype=dtype),
        encoder_hidden_states_mask=torch.ones(1, length, dtype=torch.int64),
        img_shapes=[[QWEN_GRID]], return_dict=False,
    )


def build_qwen_image(dtype: torch.dtype = torch.float32):
    model = diffusers().QwenImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=1, attention_head_dim=32,
        num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=(8, 12, 12),
    )
    args, kwargs = qwen_image_inputs(QWEN_TEXT, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


# --- Z-Image: ZImageTransformer2DModel and ZImageControlNetModel -----------------------------------------
ZIMAGE_LATENT, ZIMAGE_CAPTION = (4, 1, 8, 8), 32


def _z_image_config() -> dict:
    return dict(all_patch_size=(2,), all_f_patch_size=(1,), dim=64, n_refiner_layers=1, n_heads=2, n_kv_heads=2)


def _z_image_transformer(dtype):
    model = diffusers().ZImageTransformer2DModel(
        in_channels=4, n_layers=1, cap_feat_dim=32, axes_dims=[8, 12, 12], axes_lens=[64, 32, 32], **_z_image_config(),
    )
    return redraw_zero_parameters(model).to(dtype).eval()


def z_image_inputs(length: int = ZIMAGE_CAPTION, dtype: torch.dtype = torch.float32):
    """The pipeline's call: lists of one latent [4, 1, 8, 8] and one caption [L, 32], timestep [1],
    return_dict=False (positional, as ZImagePipeline passes them)."""
    return ([randn(*ZIMAGE_LATENT, dtype=dtype)], torch.rand(1).to(dtype), [randn(length, 32, dtype=dtype)]), dict(
        return_dict=False
    )


def build_z_image(dtype: torch.dtype = torch.float32):
    args, kwargs = z_image_inputs(ZIMAGE_CAPTION, dtype)
    return _z_image_transformer(dtype), args, kwargs, None


def z_image_controlnet_inputs(length: int = ZIMAGE_CAPTION, dtype: torch.dtype = torch.float32):
    """ZImageControlNetPipeline's call: (latents, timestep, captions, control latents [4, 1, 8, 8]),
    conditioning_scale=0.75."""
    (latents, t, captions), _ = z_image_inputs(length, dtype)
    return (latents, t, captions, [randn(*ZIMAGE_LATENT, dtype=dtype)]), dict(conditioning_scale=0.75)


def build_z_image_controlnet(dtype: torch.dtype = torch.float32):
    """ZImageControlNetModel sharing its embedders and refiners with a Z-Image transformer
    (`from_transformer`, as the pipeline does); a control block after its one layer."""
    library = diffusers()
    controlnet = library.ZImageControlNetModel(control_layers_places=[0], control_in_dim=4, **_z_image_config())
    controlnet = library.ZImageControlNetModel.from_transformer(controlnet, _z_image_transformer(dtype))
    # The class never sets the flag its forward reads whenever grad is enabled (torch.export traces with grad
    # on): AttributeError 'ZImageControlNetModel' object has no attribute 'gradient_checkpointing'.
    controlnet.gradient_checkpointing = False
    args, kwargs = z_image_controlnet_inputs(ZIMAGE_CAPTION, dtype)
    return redraw_zero_parameters(controlnet).to(dtype).eval(), args, kwargs, None


# --- Bria: BriaTransformer2DModel (Flux-style ids) -------------------------------------------------------
BRIA_IMAGE, BRIA_TEXT = 16, 12


def bria_inputs(length: int = BRIA_TEXT, dtype: torch.dtype = torch.float32):
    """BriaPipeline's call: packed latents [1, 16, 16] on a 4×4 grid, `length` text tokens [1, T, 32],
    timestep [1], txt_ids [T, 3] zeros, img_ids [16, 3] (0, row, column), return_dict=False."""
    grid = torch.stack(torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij"), dim=-1).reshape(-1, 2)
    img_ids = torch.cat([torch.zeros(BRIA_IMAGE, 1), grid.float()], dim=1)
    return (), dict(
        hidden_states=randn(1, BRIA_IMAGE, 16, dtype=dtype), timestep=torch.rand(1).to(dtype) * 1000,
        encoder_hidden_states=randn(1, length, 32, dtype=dtype), return_dict=False,
        txt_ids=torch.zeros(length, 3), img_ids=img_ids,
    )


def build_bria(dtype: torch.dtype = torch.float32):
    model = diffusers().BriaTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=32,
        num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=[8, 12, 12],
    )
    text = Dim("text", min=2, max=128)
    args, kwargs = bria_inputs(BRIA_TEXT, dtype)
    dynamic = {**static_dims(kwargs), "encoder_hidden_states": {1: text}, "txt_ids": {0: text}}
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, dynamic


# --- NucleusMoE-Image: NucleusMoEImageTransformer2DModel ---------------------------------------------------
def nucleus_inputs(length: int = QWEN_TEXT, dtype: torch.dtype = torch.float32):
    """NucleusMoEImagePipeline's call: as Qwen-Image's (img_shapes [(1, 4, 4)], a text mask)."""
    _, kwargs = qwen_image_inputs(length, dtype)
    kwargs["img_shapes"] = [QWEN_GRID]
    return (), kwargs


def build_nucleus_moe(dtype: torch.dtype = torch.float32):
    model = diffusers().NucleusMoEImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=32, num_attention_heads=2,
        joint_attention_dim=32, axes_dims_rope=(8, 12, 12), moe_enabled=True, dense_moe_strategy="leave_first_block_dense",
        num_experts=4, moe_intermediate_dim=32, capacity_factors=1.0,
    )
    with torch.no_grad():  # the packed experts are torch.empty: never initialised outside from_pretrained
        for name, param in model.named_parameters():
            if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                     param.normal_(std=0.05)
    args, kwargs = nucleus_inputs(QWEN_TEXT, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


IMAGE_MODELS: dict[str, Case] = {case.name: case for case in (
    diffusers_case("qwen_image", "QwenImageTransformer2DModel", f"complex constants, split, slice, expand, cat, {ROTARY}",
                   build_qwen_image, qwen_image_inputs, (QWEN_TEXT,),
                   notes="text length static: QwenEmbedRope.forward calls int(max_txt_seq_len), which specializes it"),
    diffusers_case("z_image", "ZImageTransformer2DModel", f"complex tables indexed by position ids, pad_sequence, {ROTARY}",
                   build_z_image, z_image_inputs, (ZIMAGE_CAPTION,),
                   notes="caption length static: patchify pads each caption to a multiple of 32 with Python ints; "
                         "RopeEmbedder caches its tables on the first call (export first and the eager model keeps "
                         "FakeTensors: call it once eagerly before exporting)"),
    diffusers_case("z_image_controlnet", "ZImageControlNetModel", f"as Z-Image (shared rope_embedder), {ROTARY}",
                   build_z_image_controlnet, z_image_controlnet_inputs, (ZIMAGE_CAPTION,),
                   notes="set controlnet.gradient_checkpointing = False (the class never sets it; export traces with "
                         "grad on); static as Z-Image"),
    diffusers_case("bria", "BriaTransformer2DModel", "none: BriaEmbedND builds cos/sin tables (use_real=True)",
                   build_bria, bria_inputs, (BRIA_TEXT, 29)),
    diffusers_case("nucleus_moe_image", "NucleusMoEImageTransformer2DModel", f"complex constants, index, cat, {ROTARY}",
                   build_nucleus_moe, nucleus_inputs, (QWEN_TEXT,),
                   notes="text length static as Qwen-Image; capacity_factors=1.0 (8.0 with 4 experts asks topk for more "
                         "tokens than there are); the packed experts are torch.empty and are drawn here"),
)}
