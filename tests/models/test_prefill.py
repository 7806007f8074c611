"""A prefill of S prompt tokens (aotcuda.models.decoder with tokens [B, S], input_pos [S]; transformers'
LlamaForCausalLM exported with S tokens by its executorch recipe) against the same tokens decoded one by one
from an empty cache, at the tiny config in float32: the last logits agree, and so do the decode steps that
follow on the cache the prefill wrote. Eager and ExportedProgram level, plus one AOTInductor CPU compile
(the prefill package against eager), as benchmarks/prefill.py runs it."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.models.decoder import DecoderConfig, make_decoder

from comparisons import relative_error

BATCH, PROMPT, STEPS = 2, 7, 4


def prompt_tokens(vocab: int, batch: int = BATCH, length: int = PROMPT) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(0))


def decode_one_by_one(model, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Each token of tokens [B, S] as its own decode step at start, start + 1, ...; the last logits."""
    for i in range(tokens.shape[1]):
        logits = model(tokens[:, i:i + 1], torch.tensor([start + i]))
    return logits


def check_decode_continues(prefilled, stepped, logits: torch.Tensor, start: int) -> None:
    """STEPS greedy decode steps on both models' caches from position ``start``: the same logits."""
    tokens = logits.argmax(-1, keepdim=True)
    for position in range(start, start + STEPS):
        want = stepped(tokens, torch.tensor([position]))
        got = prefilled(tokens, torch.tensor([position]))
        assert relative_error(got, want) < 1e-5, position
        tokens = want.argmax(-1, keepdim=True)


def test_a_prefill_matches_the_prompt_decoded_token_by_token_and_decoding_continues_from_it():
    config = DecoderConfig.tiny()
    prefilled = make_decoder(config, BATCH, dtype=torch.float32, seed=1)
    stepped = make_decoder(config, BATCH, dtype=torch.float32, seed=1)
    tokens = prompt_tokens(config.vocab_size)
    with torch.no_grad():
        logits = prefilled(tokens, torch.arange(PROMPT))
        want = decode_one_by_one(stepped, tokens)
        assert logits.shape == (BATCH, config.vocab_size) and logits.dtype == torch.float32
        assert relative_error(logits, want) < 1e-5
        for got, ref in zip(prefilled.buffers(), stepped.buffers()):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)  # the caches the prompt wrote
        check_decode_continues(prefilled, stepped, want, PROMPT)


def test_a_second_prefill_attends_to_the_first_prompts_rows():
    # Two prompts of 7 into one cache: the second, at positions 7-13, sees positions 0-6 and its own
    # earlier tokens, never a later one (the causal mask is on positions, not on the call).
    config = DecoderConfig.tiny()
    prefilled = make_decoder(config, BATCH, dtype=torch.float32, seed=2)
    stepped = make_decoder(config, BATCH, dtype=torch.float32, seed=2)
    tokens = prompt_tokens(config.vocab_size, length=2 * PROMPT)
    with torch.no_grad():
        prefilled(tokens[:, :PROMPT], torch.arange(PROMPT))
        logits = prefilled(tokens[:, PROMPT:], torch.arange(PROMPT, 2 * PROMPT))
        want = decode_one_by_one(stepped, tokens)
        assert relative_error(logits, want) < 1e-5
        check_decode_continues(prefilled, stepped, want, 2 * PROMPT)


def test_the_exported_prefill_matches_eager_and_reads_the_cache_without_repeating_it():
    config = DecoderConfig.tiny()
    model = make_decoder(config, BATCH, dtype=torch.float32, seed=3)
    example = (torch.zeros(BATCH, PROMPT, dtype=torch.long), torch.arange(PROMPT))
    with torch.no_grad():
        ep = torch.export.export(model, example)
    # The cache is read as it is: no repeat_kv expansion of it (an expand of a cache-shaped tensor).
    cache_shape = (BATCH, config.n_kv_heads, config.max_seq_len, config.head_dim)
    assert not [n for n in ep.graph.nodes if n.target is torch.ops.aten.expand.default
                and tuple(n.args[0].meta["val"].shape) == cache_shape]
    eager = make_decoder(config, BATCH, dtype=torch.float32, seed=3)
    exported = ep.module()
    tokens = prompt_tokens(config.vocab_size)
    with torch.no_grad():
        assert relative_error(exported(tokens, torch.arange(PROMPT)), eager(tokens, torch.arange(PROMPT))) < 1e-5


def test_the_library_llama_prefill_exported_by_its_recipe_matches_its_decode_steps():
    from tests.models.library.transformers_models import build_llama_decode_step, llama_decode_config

    config = llama_decode_config(dim=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=256, max_seq=32)
    prefill = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=4, tokens=PROMPT)
    stepped = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=4)
    tokens = prompt_tokens(config.vocab_size)
    with torch.no_grad():
        logits = prefill(tokens, torch.arange(PROMPT))
        want = decode_one_by_one(stepped, tokens)
    assert logits.shape == (BATCH, config.vocab_size) and relative_error(logits, want) < 1e-5


def test_a_lowered_prefill_package_matches_eager_and_leaves_the_cache_for_decode(tmp_path):
    # The one AOTInductor compile of this file: the tiny prefill for the CPU, as benchmarks/prefill.py builds it.
    config = DecoderConfig.tiny()
    model = make_decoder(config, BATCH, dtype=torch.float32, seed=5)
    example = (torch.zeros(BATCH, PROMPT, dtype=torch.long), torch.arange(PROMPT))
    lowered = aotcuda.lower(model, example, device="cpu", package_path=tmp_path / "prefill.pt2")
    assert lowered.fallback_kernels == []
    mutated = set(lowered.exported_program.graph_signature.buffers_to_mutate.values())
    assert {f"layers.{i}.attention.cache_{kv}" for i in range(config.n_layers) for kv in "kv"} <= mutated
    program = aotcuda.load(lowered.package_path)
    eager = make_decoder(config, BATCH, dtype=torch.float32, seed=5)
    tokens = prompt_tokens(config.vocab_size)
    with torch.no_grad():
        want = eager(tokens, torch.arange(PROMPT))
        got = program(tokens, torch.arange(PROMPT))
        assert got.shape == (BATCH, config.vocab_size) and relative_error(got, want) < 1e-5
        # The package wrote the prompt's cache rows: the same prompt a second time at the next positions
        # now sees them (the result differs from a first prefill's), as eager does.
        later = torch.arange(PROMPT, 2 * PROMPT)
        again, repeated = program(tokens, later), eager(tokens, later)
    assert relative_error(again, repeated) < 1e-5
    assert relative_error(again, want) > 1e-3


def _through_the_cuda_passes(model, example, kernel: bool = True):
    """The program lower() would give Inductor for CUDA (its steps before the compile: the common passes, then
    the CUDA profile's passes in its order), built on the CPU; the attention pass's cache-length limit lowered to
    the tiny cache so that only its rows limit decides; ``kernel``: its aotcuda::decode_attention form (run
    here by the op's CPU implementation) or its plain-ATen one. → (program, {pass name: counts})."""
    from aotcuda.lowering.pipeline import before_compile, passes
    from aotcuda.passes.decode_attention import SplitCacheAttentionPass
    from aotcuda.passes.row_products import RowProductsPass
    from aotcuda.passes.sibling_products import ConcatSiblingProductsPass
    from aotcuda.passes.vector_operands import StoreVectorOperandsPass

    cuda_passes = [ConcatSiblingProductsPass(), SplitCacheAttentionPass(min_cache_len=16, chunk=8, kernel=kernel),
                   RowProductsPass(), StoreVectorOperandsPass()]
    with torch.no_grad():
        ep = before_compile(model, example, make_passes=lambda: passes() + cuda_passes).program
    return ep, {type(graph_pass).__name__: graph_pass.result.counts for graph_pass in cuda_passes}


@pytest.mark.parametrize("prompt", [2, PROMPT])
def test_the_cuda_passes_leave_a_prefill_that_matches_eager(prompt):
    # At 2 tokens the group's query rows (2 · 2 per KV head) are within SplitCacheAttentionPass's limit, but
    # a prefill's attention is not its pattern (the mask is per query position): it must be left alone,
    # whatever the sizes (the pass does not even count it as kept).
    config = DecoderConfig.tiny()
    model = make_decoder(config, BATCH, dtype=torch.float32, seed=6)
    ep, counts = _through_the_cuda_passes(model, (torch.zeros(BATCH, prompt, dtype=torch.long), torch.arange(prompt)))
    assert counts["SplitCacheAttentionPass"] == {"rewritten": 0, "kernel": 0, "kept": 0}  # not its pattern
    # q/k/v and w1/w3 as one product each where the products have 8 rows or more (B·S), as for decode
    assert counts["ConcatSiblingProductsPass"]["groups"] == (2 * config.n_layers if BATCH * prompt >= 8 else 0)
    eager, lowered = make_decoder(config, BATCH, dtype=torch.float32, seed=6), ep.module()
    tokens = prompt_tokens(config.vocab_size, length=prompt)
    with torch.no_grad():
        want = eager(tokens, torch.arange(prompt))
        assert relative_error(lowered(tokens, torch.arange(prompt)), want) < 1e-5


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
@pytest.mark.parametrize("prompt", [2, PROMPT])
def test_the_decode_attention_pass_rewrites_a_short_library_llama_prefill_that_still_matches_eager(prompt, kernel):
    # transformers' SDPA over the StaticCache with 2 · prompt ≤ 16 query rows per KV head is the pass's
    # pattern (a causal mask per query row); its result must keep SDPA's [B, S, H, hd] memory order, which
    # the model's transpose-then-view after it relies on (with one token any order views).
    from tests.models.library.transformers_models import build_llama_decode_step, llama_decode_config

    config = llama_decode_config(dim=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=256, max_seq=32)
    step = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=7, tokens=prompt)
    example = (torch.zeros(BATCH, prompt, dtype=torch.long), torch.arange(prompt))
    ep, counts = _through_the_cuda_passes(step, example, kernel)
    assert counts["SplitCacheAttentionPass"] == {"rewritten": 2, "kernel": 2 * kernel, "kept": 0}
    eager = build_llama_decode_step(config, BATCH, dtype=torch.float32, seed=7, tokens=prompt)
    tokens = prompt_tokens(config.vocab_size, length=prompt)
    with torch.no_grad():
        want = eager(tokens, torch.arange(prompt))
        assert relative_error(ep.module()(tokens, torch.arange(prompt)), want) < 1e-5
