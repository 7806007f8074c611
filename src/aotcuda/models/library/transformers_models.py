"""transformers models with complex math, built from tiny configs with random weights (no download).

- DeepseekV2Model: rotary rotations made with torch.polar each call, applied through view_as_complex,
  mul and view_as_real inside multi-head latent attention (MoE layer included).

Each builder returns (model, example_inputs, dynamic_shapes) like the patterns' (see patterns._common.Case).
transformers is a test-only dependency: it is imported inside the builders.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.library._common import import_library
from aotcuda.models.patterns._common import Case

DEEPSEEK_BATCH, DEEPSEEK_SEQ, DEEPSEEK_MAX_SEQ, DEEPSEEK_VOCAB = 2, 12, 64, 128


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
    transformers = import_library("transformers")
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
    transformers = import_library("transformers")
    model = transformers.DeepseekV2Model(deepseek_v2_config())
    widen_router_margins(model)
    model = model.to(dtype).eval()
    seq = Dim("seq", min=4, max=DEEPSEEK_MAX_SEQ)
    return DeepseekV2Hidden(model), deepseek_v2_inputs(DEEPSEEK_SEQ, dtype), ({1: seq}, {1: seq})


TRANSFORMERS_MODELS: dict[str, Case] = {
    "deepseek_v2": Case(
        "deepseek_v2", "transformers DeepseekV2Model",
        "polar, mul by real scalar, view_as_complex, unsqueeze, mul, view_as_real",
        build_deepseek_v2, deepseek_v2_inputs, (DEEPSEEK_SEQ, 29), (torch.float32, torch.bfloat16),
    ),
}
