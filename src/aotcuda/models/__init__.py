"""Built-in example programs: the demo's attention block (``attention``), the decode step (``decoder``), a spectral
filter (``spectral_filter``) and RoPE patterns of public models (``patterns``), each a Case (``case``) of one
catalogue (``catalogue.CASES``).
Library-model factories (transformers, diffusers) are test-only and live in tests/models/library."""

from aotcuda.models.attention import AttentionBlock, attention_block
from aotcuda.models.case import Case

__all__ = ["AttentionBlock", "Case", "attention_block"]
