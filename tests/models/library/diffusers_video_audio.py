"""diffusers video and audio models with complex or FFT math (see diffusers_suite for the conventions):
AnyFlow, AnyFlow-FAR, Bria-FIBO2, Qwen-Image-2.1, Wan-Animate-2 (reference pass), SANA-WM (heavy: not in CI), and the Cosmos3-audio and MMAudio
autoencoders (torch.stft over the waveform: a dynamic sample count is a dynamic frame count)."""

from __future__ import annotations

import torch
from torch.export import Dim

from aotcuda.models.case import Case

from ._common import ROTARY, diffusers, diffusers_case, randn, redraw_zero_parameters, static_dims

ANYFLOW_FRAMES, ANYFLOW_TEXT = 2, 8


def anyflow_inputs(length: int = ANYFLOW_FRAMES, dtype: torch.dtype = torch.float32):
    """AnyFlowPipeline's call: latents [1, F, 4, 8, 8] (frames first), per-frame timesteps t and r [1, F],
    text [1, 8, 32], return_dict=False."""
    return (), dict(
        hidden_states=randn(1, length, 4, 8, 8, dtype=dtype),
        timestep=torch.full((1, length), 700.0).to(dtype), r_timestep=torch.full((1, length), 500.0).to(dtype),
        encoder_hidden_states=randn(1, ANYFLOW_TEXT, 32, dtype=dtype), return_dict=False,
    )


def _anyflow_config() -> dict:
    return dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
                text_dim=32, freq_dim=32, ffn_dim=64, num_layers=1, rope_max_seq_len=64)


def build_anyflow(dtype: torch.dtype = torch.float32):
    model = diffusers().AnyFlowTransformer3DModel(**_anyflow_config())
    args, kwargs = anyflow_inputs(ANYFLOW_FRAMES, dtype)
    frames = Dim("frames", min=1, max=4)
    dynamic = {**static_dims(kwargs), "hidden_states": {1: frames}, "timestep": {1: frames}, "r_timestep": {1: frames}}
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, dynamic


FAR_PARTITION = [1, 1]


def anyflow_far_inputs(length: int = 2, dtype: torch.dtype = torch.float32):
    """AnyFlowFARPipeline's prefill call without a KV cache: chunk_partition [1, 1] over 2 frames."""
    _, kwargs = anyflow_inputs(sum(FAR_PARTITION), dtype)
    return (), {**kwargs, "chunk_partition": list(FAR_PARTITION)}


def build_anyflow_far(dtype: torch.dtype = torch.float32):
    model = diffusers().AnyFlowFARTransformer3DModel(
        compressed_patch_size=(1, 4, 4), full_chunk_limit=1, chunk_partition=tuple(FAR_PARTITION), **_anyflow_config()
    )
    args, kwargs = anyflow_far_inputs(2, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


FIBO_TEXT = 8


def fibo2_inputs(length: int = FIBO_TEXT, dtype: torch.dtype = torch.float32):
    """BriaFibo2Pipeline's call without the text mask: latents [1, 4, 8, 8], timestep [1], text bundles
    [1, 2, T, 32] (one for the Perceiver, one for the injection layer), return_dict=False."""
    return (), dict(
        hidden_states=randn(1, 4, 8, 8, dtype=dtype), timestep=torch.rand(1).to(dtype),
        encoder_hidden_states=randn(1, 2, length, 32, dtype=dtype), return_dict=False,
    )


def build_bria_fibo2(dtype: torch.dtype = torch.float32):
    model = diffusers().BriaFibo2Transformer2DModel(
        in_channels=4, patch_size=2, dim=64, n_layers=1, n_refiner_layers=1, n_heads=2, cap_feat_dim=32,
        injection_layer_ids=(0,), perceiver_num_layers=1, min_num_gist_tokens=4, max_num_gist_tokens=8, gist_step=4,
        gist_min_text_len=4, gist_max_text_len=64, axes_dims=(8, 12, 12), axes_lens=(64, 32, 32),
    )
    args, kwargs = fibo2_inputs(FIBO_TEXT, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


def qwen_image21_inputs(length: int = 0, dtype: torch.dtype = torch.float32):
    """QwenImage21Pipeline's call: 6 text slots then the target image's 4 slots (each slot 2×2 latent tokens,
    img_shapes [[(1, 4, 4)]]), latents [1, 16, 16], timestep [1], return_dict=False."""
    img_mask = torch.tensor([[False] * 6 + [True] * 4])
    return (), dict(
        hidden_states=randn(1, 16, 16, dtype=dtype), encoder_hidden_states=randn(1, 6, 32, dtype=dtype),
        timestep=torch.rand(1).to(dtype), img_shapes=[[(1, 4, 4)]], img_mask=img_mask, return_dict=False,
    )


def build_qwen_image21(dtype: torch.dtype = torch.float32):
    model = diffusers().QwenImage21Transformer2DModel(
        patch_size=1, in_channels=16, out_channels=16, num_layers=1, attention_head_dim=32, num_attention_heads=2,
        context_in_dim=32, mlp_ratio=2, axes_dims_rope=(8, 12, 12),
    )
    args, kwargs = qwen_image21_inputs(0, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


SANA_FRAMES, SANA_TEXT = 2, 8
SANA_LAYERS, SANA_SOFTMAX_EVERY = 1, 1


def sana_wm_inputs(length: int = SANA_FRAMES, dtype: torch.dtype = torch.float32):
    """SanaWMPipeline's call: latents [1, 4, F, 4, 4], per-frame timesteps [1, 1, F], text [1, 1, 8, 32] with
    its padding mask (the last token padded), data_info img_hw, the camera branch's raymap [1, F, 20] and
    Plucker rays [1, 48, F, 4, 4], return_dict=False."""
    mask = torch.ones(1, SANA_TEXT, dtype=torch.long)
    mask[:, -1] = 0
    return (randn(1, 4, length, 4, 4, dtype=dtype), torch.full((1, 1, length), 500.0).to(dtype),
            randn(1, 1, SANA_TEXT, 32, dtype=dtype)), dict(
        mask=mask, return_dict=False, data_info={"img_hw": torch.tensor([[32.0, 32.0]])},
        camera_conditions=_camera_path(length, dtype), chunk_plucker=randn(1, 48, length, 4, 4, dtype=dtype),
    )


def _camera_path(frames: int, dtype: torch.dtype) -> torch.Tensor:
    """[1, F, 20] as the pipeline's raymap: a flattened camera-to-world SE(3) matrix per frame (identity
    rotation, a random translation: the model inverts it in closed form, which a random 4x4 would break) and
    normalized intrinsics fx, fy, cx, cy."""
    c2w = torch.eye(4).repeat(frames, 1, 1)
    c2w[:, :3, 3] = torch.randn(frames, 3) * 0.1
    intrinsics = torch.tensor([1.0, 1.0, 0.5, 0.5]).repeat(frames, 1)
    return torch.cat([c2w.flatten(1), intrinsics], dim=1).unsqueeze(0).to(dtype)


def build_sana_wm(dtype: torch.dtype = torch.float32):
    """One softmax-attention block (softmax_every_n=1) with the camera (UCPE) branch and complex RoPE on q and k
    (the GDN linear-attention blocks, softmax_every_n > 1, apply the same _apply_rotary_emb)."""
    model = diffusers().SanaWMTransformer3DModel(
        in_channels=4, num_layers=SANA_LAYERS, hidden_size=64, num_attention_heads=2, softmax_every_n=SANA_SOFTMAX_EVERY,
        linear_head_dim=32,
        caption_channels=32, chunk_plucker_post_attn_blocks=SANA_LAYERS, image_size=64,
    )
    args, kwargs = sana_wm_inputs(SANA_FRAMES, dtype)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, None


WAN2_FRAMES = 2


class WanAnimate2Reference(torch.nn.Module):
    """The reference pass of WanAnimate2Transformer3DModel (``kv_cache_mode="extract"``) with its KV cache made
    inside forward: the cache is a plain Python object, which torch.export refuses as an input
    (``ValueError: Unsupported input type <class '...WanAnimate2KVCache'>``). The smallest wrapper a user can
    write to export the call; it changes nothing else."""

    def __init__(self, model: torch.nn.Module, seq_len: int):
        super().__init__()
        self.model, self.seq_len = model, seq_len

    def forward(self, hidden_states, timestep, encoder_hidden_states, condition_latents, offset_grid_sizes):
        from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache

        kv_cache = WanAnimate2KVCache(len(self.model.blocks))
        return self.model(hidden_states, timestep, encoder_hidden_states, condition_latents, kv_cache, "extract",
                          self.seq_len, offset_grid_sizes=offset_grid_sizes, return_dict=False)


def wan_animate2_inputs(length: int = WAN2_FRAMES, dtype: torch.dtype = torch.float32):
    """The documented reference-pass call: lists of latents [4, F, 4, 4] and condition latents, timestep [1],
    text [8, 32], offset_grid_sizes [[F, 2, 2]] (the patch grid)."""
    return (
        [randn(4, length, 4, 4, dtype=dtype)], torch.tensor([500.0]).to(dtype), [randn(8, 32, dtype=dtype)],
        [randn(4, length, 4, 4, dtype=dtype)], torch.tensor([[length, 2, 2]]),
    ), {}


def build_wan_animate2(dtype: torch.dtype = torch.float32):
    """1 layer, 2 heads of 24, patch (1, 2, 2); refer_offset_w=0: the default -1 reads the offset from the
    offset_grid_sizes tensor with .item(), and the SymInt that gives cannot key the RoPE table cache
    (``TypeError: unhashable type: non-nested SymInt``)."""
    model = diffusers().WanAnimate2Transformer3DModel(
        patch_size=(1, 2, 2), text_len=8, in_dim=8, dim=48, ffn_dim=64, freq_dim=32, text_dim=32, out_dim=4,
        num_heads=2, num_layers=1, use_img_emb=False, refer_offset_w=0,
    )
    args, kwargs = wan_animate2_inputs(WAN2_FRAMES, dtype)
    reference = WanAnimate2Reference(redraw_zero_parameters(model).to(dtype).eval(), WAN2_FRAMES * 2 * 2)
    return reference.eval(), args, kwargs, None


def mmaudio_inputs(length: int = 1024, dtype: torch.dtype = torch.float32):
    """MMAudioVAE.forward(waveform [1, N] in [-1, 1], return_dict=False): stft with n_fft 64, hop 16."""
    return (torch.rand(1, length).to(dtype) * 2 - 1,), dict(return_dict=False)


def build_mmaudio(dtype: torch.dtype = torch.float32):
    model = diffusers().MMAudioVAE(mel_bins=16, latent_channels=4, hidden_channels=16, channel_multipliers=(1, 2),
                                    layers_per_block=1, sample_rate=16000, n_fft=64, hop_length=16)
    args, kwargs = mmaudio_inputs(1024, dtype)
    samples = 64 * Dim("blocks", min=4, max=64)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, ({0: None, 1: samples}, None)


def cosmos3_audio_inputs(length: int = 1024, dtype: torch.dtype = torch.float32):
    """Cosmos3AVAEAudioTokenizer.forward(waveform [1, 1, N], return_dict=False): spectrogram ConvNeXt encoder
    (stft n_fft 16, hop 4), Oobleck decoder."""
    return (torch.rand(1, 1, length).to(dtype) * 2 - 1,), dict(return_dict=False)


def build_cosmos3_audio(dtype: torch.dtype = torch.float32):
    model = diffusers().Cosmos3AVAEAudioTokenizer(
        sampling_rate=16000, vocoder_input_dim=4, dec_dim=16, dec_c_mults=(1, 2), dec_strides=(2, 2),
        dec_out_channels=1, stereo=False, enc_dim=16, enc_intermediate_dim=32, enc_num_layers=1, enc_num_blocks=1,
        enc_n_fft=16, enc_hop_length=4, enc_latent_dim=8, enc_c_mults=(1, 2), enc_strides=(2, 2),
    )
    args, kwargs = cosmos3_audio_inputs(1024, dtype)
    samples = 64 * Dim("blocks", min=4, max=64)
    return redraw_zero_parameters(model).to(dtype).eval(), args, kwargs, ({2: samples}, None)


VIDEO_AUDIO_MODELS: dict[str, Case] = {case.name: case for case in (
    diffusers_case("anyflow", "AnyFlowTransformer3DModel", f"complex128 tables, split_with_sizes, slice, expand, cat, {ROTARY}",
                   build_anyflow, anyflow_inputs, (2, 4), notes="frames dynamic in [1, 4] (torch.export's guard)"),
    diffusers_case("anyflow_far", "AnyFlowFARTransformer3DModel",
                   f"polar, complex average pooling (torch.complex of pooled parts), cat, {ROTARY}",
                   build_anyflow_far, anyflow_far_inputs, (2,),
                   notes="export under torch.no_grad(): with grad on FlexAttention raises 'FlexAttention does not "
                         "support backward on CPU'; chunk_partition is a Python list, so frames are static"),
    diffusers_case("bria_fibo2", "BriaFibo2Transformer2DModel", f"complex tables indexed by ids, cat, {ROTARY}",
                   build_bria_fibo2, fibo2_inputs, (FIBO_TEXT,),
                   notes="pass no encoder_attention_mask: with one, forward calls mask.sum(1).tolist() "
                         "(GuardOnDataDependentSymNode); text length static (gist counts are Python ints)"),
    diffusers_case("qwen_image21", "QwenImage21Transformer2DModel", f"complex tables indexed by positions, {ROTARY}",
                   build_qwen_image21, qwen_image21_inputs, (0,),
                   notes="does not export: QwenImage21Rope.forward calls image_pad_mask.tolist() on the img_mask input",
                   export_error="GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 0)"),
    diffusers_case("wan_animate2", "WanAnimate2Transformer3DModel", f"polar tables, split, slice, expand, cat, {ROTARY} (float64)",
                   build_wan_animate2, wan_animate2_inputs, (WAN2_FRAMES,),
                   notes="does not export: forward builds grid_sizes = torch.stack([torch.tensor(u.shape[2:])]) and "
                         "rope_apply / unpatchify read it back with grid_sizes.tolist(); export_error comes from that. "
                         "Before it, two user-level changes: build the WanAnimate2KVCache inside forward "
                         "(WanAnimate2Reference; as an input: 'Unsupported input type') and refer_offset_w >= 0 (-1 "
                         "calls .item() on offset_grid_sizes: 'unhashable type: non-nested SymInt'). Static: no export",
                   export_error="GuardOnDataDependentSymNode: Could not guard on data-dependent expression"),
    diffusers_case("mmaudio_vae", "MMAudioVAE", "stft (return_complex=True), abs", build_mmaudio, mmaudio_inputs,
                   (1024, 1600), notes="samples dynamic (multiples of 64): stft over a dynamic frame count"),
    diffusers_case("cosmos3_audio", "Cosmos3AVAEAudioTokenizer", "stft (return_complex=True), view_as_real",
                   build_cosmos3_audio, cosmos3_audio_inputs, (1024, 1600),
                   notes="samples dynamic (multiples of 64): stft over a dynamic frame count"),
)}


# Cases whose export alone takes longer than CI's share allows (SANA-WM: 40-100 s on 2 loaded cores):
# checked through lower(device="cuda") on the H200 and by hand on the CPU (docs/models.md), not in CI.
HEAVY_MODELS: dict[str, Case] = {case.name: case for case in (
    diffusers_case("sana_wm", "SanaWMTransformer3DModel", f"complex RoPE table (plain attribute), permute, unflatten, {ROTARY}",
                   build_sana_wm, sana_wm_inputs, (SANA_FRAMES,),
                   notes="not in CI (export 40-140 s on 2 loaded cores); frames static: the blocks chunk the frames "
                         "with Python ints (chunk_size 10) and the RoPE table is sliced by the Python latent shape; "
                         "float32 eager itself is 2.5e-5 from float64 eager, and the ExportedProgram 1.6e-5 from it"),
)}
