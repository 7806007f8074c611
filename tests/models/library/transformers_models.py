"""transformers models with complex math, built from tiny configs with random weights (no download).

- DeepseekV2Model: rotary rotations made with torch.polar each call, applied through view_as_complex,
  mul and view_as_real inside multi-head latent attention (MoE layer included).

Each builder returns (model, example_inputs, dynamic_shapes), made a Case by Case.positional (aotcuda.models.case).
transformers is a test-only dependency: it is imported inside the builders.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models.case import Case

from ._common import dims_by_name, import_library

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
    "deepseek_v2": Case.positional(
        "deepseek_v2", "transformers DeepseekV2Model",
        "polar, mul by real scalar, view_as_complex, unsqueeze, mul, view_as_real",
        build_deepseek_v2, deepseek_v2_inputs, (DEEPSEEK_SEQ, 29), (torch.float32, torch.bfloat16),
        library="transformers",
    ),
}


# --- the transformers suite: each library class itself, called with the keyword arguments users pass ----

SUITE_BATCH = 2


def _seeded_ids(vocab: int, seq: int) -> torch.Tensor:
    return torch.randint(0, vocab, (SUITE_BATCH, seq))


def _token_inputs(vocab: int, padded: bool):
    """make_inputs for a token model: input_ids [2, seq] (and, when padded, an attention mask [2, seq]
    whose last row ends in 1–3 padding tokens, as a padded batch has)."""

    def make(seq: int, dtype: torch.dtype = torch.float32):
        input_ids = _seeded_ids(vocab, seq)
        if not padded:
            return (input_ids,)
        attention_mask = torch.ones_like(input_ids)
        attention_mask[-1, seq - int(torch.randint(1, 4, ())) :] = 0
        return input_ids, attention_mask

    return make


def _token_dims(model: nn.Module, names: tuple[str, ...], options: dict, low: int, high: int) -> dict:
    """dynamic_shapes for torch.export: dim 1 of each of `names` is `seq` in [low, high]; `options` get None."""
    seq = Dim("seq", min=low, max=high)
    return dims_by_name(model, {name: {1: seq} for name in names}, options)


# use_cache=False: a DynamicCache output cannot leave an exported program. return_dict is left at its
# default (a ModelOutput comes back): given as a keyword, it goes through **kwargs, where torch.export
# (2.11-2.13) cannot pair it with dynamic_shapes ("Must provide a tree_name when there might be a mismatch").
TOKEN_OPTIONS = {"use_cache": False}


def build_deepseek_v2_moe(dtype: torch.dtype = torch.float32):
    """DeepseekV2Model with its library defaults for attention and experts (grouped_mm experts: histc,
    cumsum and transformers' grouped_mm op), 2 layers (dense, then MoE with 4 routed experts)."""
    transformers = import_library("transformers")
    config = deepseek_v2_config()
    config._experts_implementation = None  # the library's default, as a user gets it
    config._attn_implementation = None
    model = transformers.DeepseekV2Model(config)
    widen_router_margins(model)
    dims = _token_dims(model, ("input_ids", "attention_mask"), TOKEN_OPTIONS, 4, DEEPSEEK_MAX_SEQ)
    return model.to(dtype).eval(), _token_inputs(DEEPSEEK_VOCAB, True)(DEEPSEEK_SEQ), dims


def build_deepseek_v2_dense(dtype: torch.dtype = torch.float32):
    """DeepseekV2Model with one dense layer (num_hidden_layers = first_k_dense_replace = 1): one layer runs
    the complex RoPE a checkpoint runs in every layer."""
    transformers = import_library("transformers")
    config = deepseek_v2_config(num_hidden_layers=1, first_k_dense_replace=1)
    config._attn_implementation = None
    model = transformers.DeepseekV2Model(config)
    dims = _token_dims(model, ("input_ids", "attention_mask"), TOKEN_OPTIONS, 4, DEEPSEEK_MAX_SEQ)
    return model.to(dtype).eval(), _token_inputs(DEEPSEEK_VOCAB, True)(DEEPSEEK_SEQ), dims


LLAMA4_VOCAB, LLAMA4_SEQ, LLAMA4_MAX_SEQ, LLAMA4_CHUNK = 128, 12, 64, 8


def _llama4_builder(dynamic: bool):
    def build(dtype: torch.dtype = torch.float32):
        model, inputs, dims = build_llama4_text(dtype)
        return model, inputs, dims if dynamic else None

    build.__doc__ = (f"build_llama4_text with the sequence length {'dynamic' if dynamic else 'static'} (torch.export "
                     "cannot prove the MoE layer's guard on a dynamic length: docs/models.md).")
    return build


def build_llama4_text(dtype: torch.dtype = torch.float32):
    """Llama4TextModel: hidden 64, 2 layers (a dense chunked-attention layer with complex RoPE, chunk 8 <
    the sequence, then a NoPE full-attention MoE layer), 4 heads of 16, 2 KV heads, 4 local experts;
    dynamic_shapes with the sequence in [2, 64]."""
    transformers = import_library("transformers")
    config = transformers.Llama4TextConfig(
        vocab_size=LLAMA4_VOCAB, hidden_size=64, intermediate_size=64, intermediate_size_mlp=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
        max_position_embeddings=LLAMA4_MAX_SEQ, attention_chunk_size=LLAMA4_CHUNK, no_rope_layer_interval=2,
    )
    model = transformers.Llama4TextModel(config)
    dims = _token_dims(model, ("input_ids",), TOKEN_OPTIONS, 2, LLAMA4_MAX_SEQ)
    return model.to(dtype).eval(), _token_inputs(LLAMA4_VOCAB, False)(LLAMA4_SEQ), dims


LLAMA_VOCAB, LLAMA_SEQ, LLAMA_MAX_SEQ = 128, 12, 64


def llama_config():
    transformers = import_library("transformers")
    return transformers.LlamaConfig(
        vocab_size=LLAMA_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=LLAMA_MAX_SEQ,
    )


def build_llama_causal_lm(dtype: torch.dtype = torch.float32):
    """LlamaForCausalLM (no complex math: the control of the suite), hidden 64, 1 layer, 4 heads;
    input_ids only, as the first call a user writes."""
    transformers = import_library("transformers")
    model = transformers.LlamaForCausalLM(llama_config())
    dims = _token_dims(model, ("input_ids",), {"use_cache": False}, 2, LLAMA_MAX_SEQ)
    return model.to(dtype).eval(), _token_inputs(LLAMA_VOCAB, False)(LLAMA_SEQ), dims


CODEC_FRAMES, CODEC_MAX_FRAMES = 10, 64


def _codec_config(config_class):
    """Xcodec2/NeuCodec: hidden 32, 1 transformer layer, 2 heads; downsampling (2, 2) → hop 4, n_fft 16
    (the ISTFT head's irfft is over 16 points); a tiny semantic-model config (only its width is used)."""
    return config_class(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        head_dim=16, downsampling_ratios=[2, 2], encoder_hidden_size=8, quantization_dim=32,
        semantic_model_config={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                               "intermediate_size": 32},
    )


def _codec_decoder_builder(config_name: str, decoder_name: str):
    def build(dtype: torch.dtype = torch.float32):
        transformers = import_library("transformers")
        module = import_library(f"transformers.models.{config_name.lower().removesuffix('config')}."
                                f"modeling_{config_name.lower().removesuffix('config')}")
        config = _codec_config(getattr(transformers, config_name))
        decoder = getattr(module, decoder_name)(config)
        inputs = _codec_inputs(config.hidden_size + config.semantic_model_config.hidden_size)(CODEC_FRAMES, dtype)
        return decoder.to(dtype).eval(), inputs, {"hidden_states": {1: Dim("frames", min=2, max=CODEC_MAX_FRAMES)}}

    build.__doc__ = (f"{decoder_name}, the acoustic decoder its model's decode() calls on latents "
                     "[B, frames, 48] → audio [B, 1, 4 · frames]; the ISTFT head makes a complex spectrogram "
                     "with torch.polar and inverts it with irfft.")
    return build


def _codec_inputs(width: int):
    def make(frames: int, dtype: torch.dtype = torch.float32):
        return (torch.randn(SUITE_BATCH, frames, width).to(dtype),)

    return make


FNET_VOCAB, FNET_SEQ, FNET_MAX_SEQ = 128, 12, 64


def _fnet_builder(dynamic: bool):
    def build(dtype: torch.dtype = torch.float32):
        transformers = import_library("transformers")
        config = transformers.FNetConfig(
            vocab_size=FNET_VOCAB, hidden_size=32, num_hidden_layers=1, intermediate_size=64,
            max_position_embeddings=FNET_MAX_SEQ, use_tpu_fourier_optimizations=False,
        )
        model = transformers.FNetModel(config)
        dims = _token_dims(model, ("input_ids",), {"return_dict": False}, 2, FNET_MAX_SEQ) if dynamic else None
        return model.to(dtype).eval(), _token_inputs(FNET_VOCAB, False)(FNET_SEQ), dims

    build.__doc__ = (f"FNetModel, hidden 32, 1 layer, use_tpu_fourier_optimizations=False (the default: "
                     f"torch.fft.fftn over sequence and hidden dims); sequence {'dynamic' if dynamic else 'static'}.")
    return build


AUTOFORMER_CONTEXT, AUTOFORMER_PREDICTION, AUTOFORMER_LAGS, AUTOFORMER_FEATURES = 12, 6, (1, 2, 3), 2


def build_autoformer(dtype: torch.dtype = torch.float32):
    """AutoformerModel: d_model 16, 1 encoder and 1 decoder layer, 2 heads, context 12, prediction 6,
    lags (1, 2, 3), 2 time features. Its auto-correlation attention is rfft · conj(rfft) → irfft over time."""
    transformers = import_library("transformers")
    config = transformers.AutoformerConfig(
        prediction_length=AUTOFORMER_PREDICTION, context_length=AUTOFORMER_CONTEXT,
        lags_sequence=list(AUTOFORMER_LAGS), num_time_features=AUTOFORMER_FEATURES, d_model=16,
        encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=16, decoder_ffn_dim=16, label_length=4, moving_average=3,
    )
    model = transformers.AutoformerModel(config)
    return model.to(dtype).eval(), autoformer_inputs(0, dtype), None


def autoformer_inputs(length: int = 0, dtype: torch.dtype = torch.float32):
    """(past_values [2, 15], past_time_features [2, 15, 2], past_observed_mask [2, 15], static_categorical
    None, static_real None, future_values [2, 6], future_time_features [2, 6, 2]); `length` is ignored
    (Autoformer's window lengths come from its config)."""
    past = AUTOFORMER_CONTEXT + max(AUTOFORMER_LAGS)
    return (
        torch.randn(SUITE_BATCH, past).to(dtype),
        torch.randn(SUITE_BATCH, past, AUTOFORMER_FEATURES).to(dtype),
        torch.ones(SUITE_BATCH, past).to(dtype),
        None, None,
        torch.randn(SUITE_BATCH, AUTOFORMER_PREDICTION).to(dtype),
        torch.randn(SUITE_BATCH, AUTOFORMER_PREDICTION, AUTOFORMER_FEATURES).to(dtype),
    )


def _suite_case(name, cls, complex_ops, build, make_inputs, lengths, options=None) -> Case:
    """One transformers class in float32, called with its tensors positional and `options` as keywords."""
    return Case.positional(name, cls, complex_ops, build, make_inputs, lengths, options=options,
                           library="transformers")


TRANSFORMERS_SUITE: dict[str, Case] = {case.name: case for case in (
    _suite_case("deepseek_v2_moe", "DeepseekV2Model",
                "polar, view_as_complex, mul, view_as_real (MoE: histc, cumsum, grouped_mm)",
                build_deepseek_v2_moe, _token_inputs(DEEPSEEK_VOCAB, True), (DEEPSEEK_SEQ, 29), TOKEN_OPTIONS),
    _suite_case("deepseek_v2_dense", "DeepseekV2Model",
                "polar, view_as_complex, mul, view_as_real",
                build_deepseek_v2_dense, _token_inputs(DEEPSEEK_VOCAB, True), (DEEPSEEK_SEQ, 29), TOKEN_OPTIONS),
    _suite_case("llama4_text", "Llama4TextModel",
                "polar, view_as_complex, mul, view_as_real (chunked attention mask)",
                _llama4_builder(False), _token_inputs(LLAMA4_VOCAB, False), (LLAMA4_SEQ,), TOKEN_OPTIONS),
    _suite_case("llama4_text_dynamic", "Llama4TextModel",
                "polar, view_as_complex, mul, view_as_real (chunked attention mask)",
                _llama4_builder(True), _token_inputs(LLAMA4_VOCAB, False), (LLAMA4_SEQ, 27), TOKEN_OPTIONS),
    _suite_case("xcodec2_decoder", "Xcodec2Decoder", "polar, irfft (n_fft 16)",
                _codec_decoder_builder("Xcodec2Config", "Xcodec2Decoder"), _codec_inputs(48),
                (CODEC_FRAMES, 23)),
    _suite_case("neucodec_decoder", "NeuCodecDecoder", "polar, irfft (n_fft 16)",
                _codec_decoder_builder("NeuCodecConfig", "NeuCodecDecoder"), _codec_inputs(48),
                (CODEC_FRAMES, 23)),
    _suite_case("fnet", "FNetModel", "fftn over (sequence, hidden), real part",
                _fnet_builder(False), _token_inputs(FNET_VOCAB, False), (FNET_SEQ,), {"return_dict": False}),
    _suite_case("fnet_dynamic", "FNetModel", "fftn over (sequence, hidden), real part",
                _fnet_builder(True), _token_inputs(FNET_VOCAB, False), (FNET_SEQ, 30), {"return_dict": False}),
    _suite_case("autoformer", "AutoformerModel", "rfft, conj, mul, irfft (auto-correlation)",
                build_autoformer, autoformer_inputs, (0,), {"use_cache": False, "return_dict": False}),
    _suite_case("llama_causal_lm", "LlamaForCausalLM", "none (the control)",
                build_llama_causal_lm, _token_inputs(LLAMA_VOCAB, False), (LLAMA_SEQ, 33), {"use_cache": False}),
)}


class LlamaDecodeStep(nn.Module):
    """One decode step (or prefill) of transformers' LlamaForCausalLM over its StaticCache, as users export
    it: ``TorchExportableModuleForDecoderOnlyLM(model, batch_size, max_cache_len).export(input_ids=,
    cache_position=)`` (transformers.integrations.executorch, the ExecuTorch recipe), then the exported
    program's module. forward(input_ids [B, S] int64, cache_position [S] int64) → logits of the last token
    [B, vocab] float32, writing the cache (buffers key_cache_i / value_cache_i of the program). S is the
    length it was exported with (1: a decode step). The recipe takes the positions from cache_position[0]
    on (the cache's cumulative length), so cache_position must be consecutive; the model computes the
    logits of all S tokens (the recipe passes no ``logits_to_keep``) and this keeps the last."""

    def __init__(self, exported: nn.Module):
        super().__init__()
        self.exported = exported

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        return self.exported(input_ids=input_ids, cache_position=cache_position).float()[:, -1]


def llama_decode_config(dim=2048, layers=16, heads=32, kv_heads=8, ffn=8192, vocab=32000, max_seq=2048):
    """LlamaConfig of benchmarks/decode.py's decoder (Llama-3 1B-shaped; the defaults), or a tiny one."""
    transformers = import_library("transformers")
    return transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=dim, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_seq,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)


def build_llama_decode_step(config, batch: int, device="cpu", dtype=torch.bfloat16, seed: int = 0,
                            tokens: int = 1) -> LlamaDecodeStep:
    """LlamaForCausalLM(config) with seeded random weights (std 0.02, norms 1) in ``dtype`` on ``device``,
    one call of ``tokens`` tokens (1: a decode step; more: a prefill) exported with transformers' own
    recipe at cache length config.max_position_embeddings, an empty cache."""
    transformers = import_library("transformers")
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.fill_(1.0) if name.endswith("norm.weight") else param.normal_(0.0, 0.02)
    # Module.to(dtype) also casts the rotary embedding's inv_freq buffers; in bfloat16 their frequencies are off by
    # up to 2**-9 relative, so angles drift by radians at positions in the thousands (a 2048-token prefill in
    # bf16 then differed from float32 eager by 0.5 relative). Checkpoints loaded as users load them keep them
    # in float32: so do we.
    frequencies = {name: buffer.float() for name, buffer in model.named_buffers() if name.endswith("inv_freq")}
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    for name, buffer in frequencies.items():
        owner, _, attribute = name.rpartition(".")
        model.get_submodule(owner)._buffers[attribute] = buffer.to(device)
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    # The recipe's keywords moved between transformers releases (max_batch_size -> batch_size; device added).
    accepted = inspect.signature(TorchExportableModuleForDecoderOnlyLM.__init__).parameters
    sizes = {"batch_size" if "batch_size" in accepted else "max_batch_size": batch,
             "max_cache_len": config.max_position_embeddings, **({"device": device} if "device" in accepted else {})}
    recipe = TorchExportableModuleForDecoderOnlyLM(model, **sizes)
    ids = torch.zeros(batch, tokens, dtype=torch.long, device=device)
    with torch.no_grad():
        exported = recipe.export(input_ids=ids, cache_position=torch.arange(tokens, device=device))
    return LlamaDecodeStep(exported.module())  # an exported module refuses train()/eval()
