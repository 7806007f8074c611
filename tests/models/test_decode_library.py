"""The decode passes on a library model: transformers' LlamaForCausalLM, one decode step over its
StaticCache exported with transformers' own executorch recipe (tests.models.library.build_llama_decode_step),
at a tiny size. After lower()'s export, decompositions and common passes, ConcatSiblingProductsPass makes
one product of q/k/v and one of gate/up per layer, and SplitCacheAttentionPass rewrites each layer's SDPA
over the repeat_kv-expanded cache; ``.module()`` matches eager step after step (float32, 1e-5)."""

from __future__ import annotations

import pytest
import torch

from aotcuda.lowering.pipeline import before_compile, passes
from aotcuda.passes.decode_attention import SDPA, SplitCacheAttentionPass
from aotcuda.passes.sibling_products import ConcatSiblingProductsPass

from tests.models.library.transformers_models import build_llama_decode_step, llama_decode_config
from comparisons import check_decode_steps

LAYERS, BATCH = 2, 2


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
def test_the_library_llama_decode_step_gets_both_passes_and_matches_eager_step_after_step(kernel):
    # kernel: SplitCacheAttentionPass writes aotcuda::decode_attention (run here by its CPU implementation)
    config = llama_decode_config(dim=64, layers=LAYERS, heads=4, kv_heads=2, ffn=128, vocab=256, max_seq=32)
    step = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=3)
    example = (torch.zeros(BATCH, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    products, attention = ConcatSiblingProductsPass(min_rows=1), SplitCacheAttentionPass(min_cache_len=16, chunk=8, kernel=kernel)
    with torch.no_grad():
        ep = before_compile(step, example, make_passes=lambda: passes() + [products, attention]).program
    assert products.result.counts == {"groups": 2 * LAYERS, "products": 5 * LAYERS, "kept": 0}
    assert attention.result.counts == {"rewritten": LAYERS, "kernel": LAYERS * kernel, "kept": 0}
    assert not [n for n in ep.graph.nodes if n.target is SDPA]
    eager, lowered = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=3), ep.module()
    tokens = torch.randint(0, config.vocab_size, (BATCH, 1), generator=torch.Generator().manual_seed(0))
    check_decode_steps(eager, lowered, tokens, steps=10, rtol=1e-5)  # positions 0-7 leave whole chunks of 8 masked


def test_the_library_llama_decode_step_at_batch_1_folds_its_norms_and_merges_repeated_work():
    """FoldRMSNormIntoProductPass on transformers' LlamaRMSNorm (weight · row.to(dtype)): q/k/v and gate/up after
    each layer's two norms, the LM head after the last; EliminateCommonSubexpressionsPass after them."""
    from aotcuda.passes.common_subexpressions import EliminateCommonSubexpressionsPass
    from aotcuda.passes.norm_products import FoldRMSNormIntoProductPass

    config = llama_decode_config(dim=64, layers=LAYERS, heads=4, kv_heads=2, ffn=128, vocab=256, max_seq=32)
    step = build_llama_decode_step(config, 1, dtype=torch.float32, seed=4)
    example = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    fold, merge = FoldRMSNormIntoProductPass(), EliminateCommonSubexpressionsPass()
    with torch.no_grad():
        ep = before_compile(step, example, make_passes=lambda: passes() + [fold, merge]).program
    assert fold.result.counts == {"rewritten": 5 * LAYERS + 1}
    assert merge.result.changed
    eager, lowered = build_llama_decode_step(config, 1, dtype=torch.float32, seed=4), ep.module()
    tokens = torch.randint(0, config.vocab_size, (1, 1), generator=torch.Generator().manual_seed(1))
    check_decode_steps(eager, lowered, tokens, steps=6, rtol=1e-5)
