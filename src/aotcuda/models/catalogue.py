"""The built-in example programs, one Case each (aotcuda.models.case): the demo's attention block, the
Llama-3-shaped decode step at its tiny config, a spectral filter (a convolution by FFT), and the rotary-embedding
patterns of public models (aotcuda.models.patterns). The library models (transformers, diffusers) are test-only:
their factories live beside the tests, in tests/models/library, with the same Case type.
"""

from __future__ import annotations

import torch

from aotcuda.models.attention import attention_block
from aotcuda.models.case import Case
from aotcuda.models.decoder import DecoderConfig, make_decoder
from aotcuda.models.patterns import PATTERNS
from aotcuda.models.spectral_filter import SpectralFilter

ATTENTION_BATCH, ATTENTION_SEQ, DECODER_BATCH, FILTER_BATCH, FILTER_LENGTH = 2, 64, 2, 8, 100


def _attention_build(dtype: torch.dtype = torch.float32):
    """The demo's AttentionBlock (dim 256, 4 heads), x [2, 64, 256]; static, as the demo lowers it."""
    model, inputs = attention_block(dtype=dtype, batch=ATTENTION_BATCH, seq=ATTENTION_SEQ)
    return model, inputs, None


def _attention_inputs(length: int = ATTENTION_SEQ, dtype: torch.dtype = torch.float32):
    return (torch.randn(ATTENTION_BATCH, length, 256).to(dtype),)


def _decoder_build(dtype: torch.dtype = torch.float32):
    """The decode step at DecoderConfig.tiny() (2 layers, dim 64), batch 2, an empty cache; tokens and
    position 0."""
    model = make_decoder(DecoderConfig.tiny(), DECODER_BATCH, dtype=dtype, seed=1)
    return model, _decoder_inputs(0, dtype), None


def _decoder_inputs(position: int = 0, dtype: torch.dtype = torch.float32):
    """(tokens [2, 1] int64, input_pos [1] int64): one decode step writing the cache at `position`."""
    tokens = torch.randint(0, DecoderConfig.tiny().vocab_size, (DECODER_BATCH, 1))
    return tokens, torch.tensor([position])


def _filter_build(dtype: torch.dtype = torch.float32):
    """SpectralFilter, x [8, 100] (the CPU-threads benchmark's); static."""
    return SpectralFilter().to(dtype), _filter_inputs(FILTER_LENGTH, dtype), None


def _filter_inputs(length: int = FILTER_LENGTH, dtype: torch.dtype = torch.float32):
    return (torch.randn(FILTER_BATCH, length, dtype=dtype),)


CASES: dict[str, Case] = {
    case.name: case
    for case in [
        Case.positional("attention_block", "the demo: a Llama-style transformer block",
                        "polar, view_as_complex, mul, view_as_real", _attention_build, _attention_inputs,
                        (ATTENTION_SEQ,)),
        Case.positional("decoder", "a Llama-3-shaped decode step with a static KV cache",
                        "complex buffer, index, view_as_complex, mul, view_as_real", _decoder_build,
                        _decoder_inputs, (0,), notes="static: one step at a tensor position; `length` is the "
                        "position the step writes"),
        Case.positional("spectral_filter", "a convolution by FFT with a short kernel, as a new user wrote it",
                        "rfft, mul, irfft", _filter_build, _filter_inputs, (FILTER_LENGTH,)),
        *PATTERNS.values(),
    ]
}

__all__ = ["CASES"]
