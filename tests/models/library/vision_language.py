"""transformers vision-language models, from tiny configs with random weights (no download), called as users
call them: ``model(input_ids, pixel_values, use_cache=False)``, the prompt holding one image-token
placeholder per image feature.

Each merges its image features into the text embeddings with ``masked_scatter`` after a data-dependent
check that the two agree (``torch._check_tensor_all``: ``_is_all_true``, ``.item()``, ``sym_ite``,
``_assert_scalar`` in the exported graph), the ops aotcuda lowers to generated code
(aotcuda/lowering/data_dependent.py).

- Llama4ForConditionalGeneration: Llama-4's vision encoder (patch embedding as a linear, pixel shuffle) and
  its text model (complex RoPE, chunked attention, an MoE layer); the sequence is static (the MoE layer's
  guard on a dynamic length: docs/models.md).
- LlavaForConditionalGeneration: a CLIP vision tower, a two-layer projector and a Llama text model; the
  sequence is dynamic.

The image-token placeholders sit at a random offset of each fresh prompt, so that a program that baked in
where the image goes fails the comparison with eager.
"""

from __future__ import annotations

import torch
from torch.export import Dim

from aotcuda.models.case import Case

from ._common import import_library

VLM_BATCH, VLM_VOCAB, IMAGE_TOKEN = 1, 128, 127
OPTIONS = {"use_cache": False}

# Llama-4: a 56x56 image in 14x14 patches is 16 patches; pixel shuffle 0.5 makes them 4 image features.
LLAMA4_IMAGE, LLAMA4_FEATURES, LLAMA4_VLM_SEQ = 56, 4, 12
# LLaVA: a 28x28 image in 7x7 patches is 16 image features (the class embedding is dropped: "default").
LLAVA_IMAGE, LLAVA_FEATURES, LLAVA_SEQ, LLAVA_MAX_SEQ = 28, 16, 24, 64


def prompt_with_image(seq: int, features: int) -> torch.Tensor:
    """input_ids [VLM_BATCH, seq]: text tokens (never the image token) with `features` image tokens in one
    run at a random offset."""
    input_ids = torch.randint(0, IMAGE_TOKEN, (VLM_BATCH, seq))
    start = int(torch.randint(0, seq - features + 1, ()))
    input_ids[:, start:start + features] = IMAGE_TOKEN
    return input_ids


def _vlm_inputs(image: int, features: int):
    def make(seq: int, dtype: torch.dtype = torch.float32):
        return prompt_with_image(seq, features), torch.randn(VLM_BATCH, 3, image, image).to(dtype)

    make.__doc__ = (f"(input_ids [1, seq] with {features} image tokens at a random offset, pixel_values "
                    f"[1, 3, {image}, {image}])")
    return make


def build_llama4_vlm(dtype: torch.dtype = torch.float32):
    """Llama4ForConditionalGeneration: vision hidden 32 (1 layer, 2 heads), projector 64; text as
    build_llama4_text (hidden 64, 2 layers: chunked attention with complex RoPE, then an MoE layer);
    the sequence static at LLAMA4_VLM_SEQ."""
    transformers = import_library("transformers")
    text = dict(vocab_size=VLM_VOCAB, hidden_size=64, intermediate_size=64, intermediate_size_mlp=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
                max_position_embeddings=64, attention_chunk_size=8, no_rope_layer_interval=2)
    vision = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128,
                  vision_output_dim=64, image_size=LLAMA4_IMAGE, patch_size=14, pixel_shuffle_ratio=0.5,
                  projector_input_dim=64, projector_output_dim=64)
    config = transformers.Llama4Config(text_config=text, vision_config=vision, image_token_index=IMAGE_TOKEN)
    model = transformers.Llama4ForConditionalGeneration(config).to(dtype).eval()
    return model, _vlm_inputs(LLAMA4_IMAGE, LLAMA4_FEATURES)(LLAMA4_VLM_SEQ, dtype), None


def build_llava(dtype: torch.dtype = torch.float32):
    """LlavaForConditionalGeneration(input_ids, pixel_values): CLIP vision tower hidden 32 (1 layer, 2 heads, 7x7 patches of a 28x28
    image), Llama text hidden 64 (1 layer, 4 heads, 2 KV heads); the sequence dynamic in
    [LLAVA_FEATURES + 1, LLAVA_MAX_SEQ]."""
    transformers = import_library("transformers")
    text = transformers.LlamaConfig(vocab_size=VLM_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=LLAVA_MAX_SEQ,
                                    use_cache=False)
    vision = transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=LLAVA_IMAGE, patch_size=7,
                                           projection_dim=32)
    config = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_id=IMAGE_TOKEN,
                                      vision_feature_layer=-1)
    model = transformers.LlavaForConditionalGeneration(config).to(dtype).eval()
    seq = Dim("seq", min=LLAVA_FEATURES + 1, max=LLAVA_MAX_SEQ)
    dims = {"input_ids": {1: seq}, "pixel_values": None}
    return model, _vlm_inputs(LLAVA_IMAGE, LLAVA_FEATURES)(LLAVA_SEQ, dtype), dims


VISION_LANGUAGE_SUITE: dict[str, Case] = {case.name: case for case in (
    Case.positional("llama4_vlm", "Llama4ForConditionalGeneration",
                    "polar, view_as_complex, mul, view_as_real (text); masked_scatter, _is_all_true (image merge)",
                    build_llama4_vlm, _vlm_inputs(LLAMA4_IMAGE, LLAMA4_FEATURES), (LLAMA4_VLM_SEQ,),
                    options=OPTIONS, library="transformers"),
    Case.positional("llava", "LlavaForConditionalGeneration", "none; masked_scatter, _is_all_true (image merge)",
                    build_llava, _vlm_inputs(LLAVA_IMAGE, LLAVA_FEATURES), (LLAVA_SEQ, 41),
                    library="transformers"),
)}
