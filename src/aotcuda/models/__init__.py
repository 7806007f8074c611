"""Built-in example programs: the demo's attention block (``attention``), RoPE patterns of public models
(``patterns``), and small library-model builders (``library``)."""

from aotcuda.models.attention import AttentionBlock, attention_block

__all__ = ["AttentionBlock", "attention_block"]
