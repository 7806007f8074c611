"""SplitCacheAttentionPass: which attentions it rewrites, and that the split-cache form computes what eager
does (fresh random inputs and caches, positions whose mask hides whole chunks, fp32 and bf16)."""

import math

import pytest
import torch
from torch.nn import functional as F

import aotcuda.kernels.decode_attention  # noqa: F401 - registers aotcuda::decode_attention
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.passes.decode_attention import SDPA, SplitCacheAttentionPass
from comparisons import check_decode_steps

aten = torch.ops.aten
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
B, HQ, HKV, D, L = 2, 8, 2, 16, 64


def repeat_kv(x, times):
    """transformers' repeat_kv: [B, Hkv, L, D] → [B, Hkv · times, L, D] through expand and reshape."""
    b, h, length, d = x.shape
    return x[:, :, None, :, :].expand(b, h, times, length, d).reshape(b, h * times, length, d)


class CacheAttention(torch.nn.Module):
    """q [B, Hq, Sq, D] over a cache k, v [B, Hkv, L, D] (inputs) masked past ``pos``, in one of the ways
    libraries write it: "eager" (transformers' eager attention: repeat_kv, matmul · scaling + additive
    mask, softmax in float32, matmul), "sdpa-bool" (repeat_kv, then SDPA with a bool mask), "sdpa-gqa"
    (SDPA with enable_gqa and a float mask)."""

    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, q, k, v, pos):
        length, rows = k.shape[2], q.shape[2]
        visible = torch.arange(length)[None, :] <= pos + torch.arange(rows)[:, None]  # [Sq, L]
        group = q.shape[1] // k.shape[1]
        if self.form == "eager":
            k, v = repeat_kv(k, group), repeat_kv(v, group)
            mask = torch.zeros(visible.shape, dtype=q.dtype).masked_fill(~visible, torch.finfo(q.dtype).min)
            scores = torch.matmul(q, k.transpose(2, 3)) * (1 / math.sqrt(q.shape[-1])) + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            return torch.matmul(probs, v)
        if self.form == "sdpa-bool":
            return F.scaled_dot_product_attention(q, repeat_kv(k, group), repeat_kv(v, group), attn_mask=visible)
        mask = torch.zeros(visible.shape, dtype=q.dtype).masked_fill(~visible, -math.inf)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, scale=0.3)


def _inputs(rows=1, dtype=torch.float32, batch=B, pos=10):
    return (torch.randn(batch, HQ, rows, D, dtype=dtype), torch.randn(batch, HKV, L, D, dtype=dtype),
            torch.randn(batch, HKV, L, D, dtype=dtype), torch.tensor(pos))


def _ep(model, args, dynamic_shapes=None):
    with torch.no_grad():
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(decomposition_table())


def _relative_error(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def _attention_ops(ep):
    return [n for n in ep.graph.nodes if n.target in (aten.bmm.default, aten._softmax.default, SDPA)]


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", ["eager", "sdpa-bool", "sdpa-gqa"])
def test_decode_attention_over_a_grouped_cache_is_rewritten_and_matches_eager(form, dtype, kernel):
    # kernel: the aotcuda::decode_attention op, run here by its CPU implementation (the Triton kernels
    # themselves: tests/kernels); the test checks the pass's scale and bias against eager.
    torch.manual_seed(0)
    model = CacheAttention(form)
    ep = _ep(model, _inputs(dtype=dtype))
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=kernel)
    split = graph_pass(ep)
    assert graph_pass.result.changed
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": int(kernel), "kept": 0}
    assert _attention_ops(split) == [] and _attention_ops(ep) != []  # the input program is unchanged
    kernels = [n for n in split.graph.nodes if n.target is torch.ops.aotcuda.decode_attention.default]
    assert len(kernels) == int(kernel)
    # Each KV head is read as it is: no repeat of the cache (expand to [B, Hkv, group, L, D]) is left.
    assert not [n for n in split.graph.nodes if n.target is aten.expand.default and len(n.meta["val"].shape) == 5]
    for pos in (0, 10, 31, 63):  # 0 and 10: chunks the mask hides entirely
        args = _inputs(dtype=dtype, pos=pos)
        with torch.no_grad():
            assert _relative_error(split.module()(*args), model(*args)) < TOLERANCE[dtype], pos


def test_repeat_kv_traced_through_whole_dim_slices_is_still_undone():
    # Some torch versions trace x[:, :, None] as slice(x, 0, 0, max) → slice(1, ...) → unsqueeze(2): the
    # same program with those slices put in front of each unsqueeze is matched the same way.
    torch.manual_seed(2)
    model = CacheAttention("eager")
    ep = _ep(model, _inputs())
    graph = ep.graph_module.graph
    for unsqueeze in [n for n in graph.nodes if n.target is aten.unsqueeze.default and n.args[1] == 2
                      and len(n.meta["val"].shape) == 5]:
        source, (expand,) = unsqueeze.args[0], list(unsqueeze.users)
        with graph.inserting_before(unsqueeze):
            before = graph.call_function(aten.slice.Tensor, (source, 1, 0, 2 ** 63 - 1))
        with graph.inserting_after(unsqueeze):
            after = graph.call_function(aten.slice.Tensor, (unsqueeze, 3, 0, 2 ** 63 - 1))
        before.meta["val"], after.meta["val"] = source.meta["val"], unsqueeze.meta["val"]
        unsqueeze.replace_input_with(source, before)
        expand.replace_input_with(unsqueeze, after)
    ep.graph_module.recompile()
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=False)
    split = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": 0, "kept": 0}
    assert not [n for n in split.graph.nodes if n.target is aten.expand.default and len(n.meta["val"].shape) == 5]
    args = _inputs(pos=20)
    with torch.no_grad():
        assert _relative_error(split.module()(*args), model(*args)) < 1e-5


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
def test_a_dynamic_batch_is_kept_symbolic(kernel):
    torch.manual_seed(1)
    model = CacheAttention("eager")
    batch = torch.export.Dim("batch", min=1, max=16)
    ep = _ep(model, _inputs(), dynamic_shapes=({0: batch}, {0: batch}, {0: batch}, None))
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=kernel)
    split = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": int(kernel), "kept": 0}
    for size in (1, 5, 16):
        args = _inputs(batch=size, pos=40)
        with torch.no_grad():
            assert _relative_error(split.module()(*args), model(*args)) < 1e-5


@pytest.mark.parametrize("rows, pass_options", [(16, {"min_cache_len": 32}), (1, {"min_cache_len": 128})],
                         ids=["many query rows (prefill)", "a short cache"])
def test_outside_its_limits_attention_is_kept(rows, pass_options):
    ep = _ep(CacheAttention("sdpa-bool"), _inputs(rows=rows))
    graph_pass = SplitCacheAttentionPass(**pass_options)
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0, "kernel": 0, "kept": 1}


def test_causal_sdpa_is_not_matched():
    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    ep = _ep(Causal(), (torch.randn(1, 2, 1, D), torch.randn(1, 2, L, D), torch.randn(1, 2, L, D)))
    graph_pass = SplitCacheAttentionPass(min_cache_len=32)
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0, "kernel": 0, "kept": 0}


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_decode_step_is_rewritten_in_every_layer_and_matches_eager_step_after_step(dtype, kernel):
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()  # a cache of 32 positions, in chunks of 8
    model = make_decoder(config, 2, dtype=dtype, seed=5)
    ep = _ep(model, (torch.zeros(2, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes():
        ep = graph_pass(ep)
    graph_pass = SplitCacheAttentionPass(min_cache_len=16, chunk=8, kernel=kernel)
    split = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": config.n_layers, "kernel": config.n_layers * kernel, "kept": 0}
    assert not _attention_ops(split)
    eager, lowered = make_decoder(config, 2, dtype=dtype, seed=5), split.module()
    tokens = torch.randint(0, config.vocab_size, (2, 1))
    check_decode_steps(eager, lowered, tokens, steps=12, rtol=TOLERANCE[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [1, 8])
def test_a_cuda_lowering_of_a_decode_step_with_a_long_cache_runs_both_passes_and_matches_eager(tmp_path, batch,
                                                                                                  monkeypatch):
    # The tiny decoder with a cache long enough for the default limits (1024 positions, chunks of 128):
    # the package's generated kernels, not just the rewritten program, against eager (bf16).
    import dataclasses

    import aotcuda
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    monkeypatch.delenv("AOTCUDA_DECODE_ATTENTION", raising=False)  # both on by default (switches.py says why)
    monkeypatch.delenv("AOTCUDA_SIBLING_PRODUCTS", raising=False)
    config = dataclasses.replace(DecoderConfig.tiny(), max_seq_len=1024)
    model = make_decoder(config, batch, device="cuda", dtype=torch.bfloat16, seed=6)
    example = (torch.zeros(batch, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"))
    lowered = aotcuda.lower(model, example, device="cuda", package_path=tmp_path / "decode.pt2")
    counts = {r.name: r.counts for r in lowered.pass_results}
    assert counts["SplitCacheAttentionPass"] == {"rewritten": config.n_layers, "kernel": config.n_layers, "kept": 0}
    fused = 2 * config.n_layers if batch >= 8 else 0  # products of 8 rows or more
    assert counts["ConcatSiblingProductsPass"] == {"groups": fused, "products": 5 * fused // 2,
                                                   "kept": 2 * config.n_layers - fused}
    assert lowered.fallback_kernels == []
    eager, program = make_decoder(config, batch, device="cuda", dtype=torch.bfloat16, seed=6), aotcuda.load(lowered.package_path)
    tokens = torch.randint(0, config.vocab_size, (batch, 1), device="cuda")
    with torch.no_grad():
        for position in range(200):  # past the first chunk
            at = torch.tensor([position], device="cuda")
            want, got = eager(tokens, at), program(tokens, at)
            if position % 20 == 0 or position > 190:
                assert _relative_error(got, want) < 1e-2, position
            tokens = want.argmax(-1, keepdim=True)


@pytest.mark.parametrize("kernel", [False, True], ids=["plain ATen", "kernel op"])
def test_an_sdpa_scale_of_zero_is_kept_not_taken_for_the_default(kernel):
    # scale=0.0 is a scale (uniform weights over the visible positions), not "None": `scale or 1/√d` read it
    # as the default.
    class Uniform(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, scale=0.0)

    def inputs():
        visible = torch.arange(L) <= torch.randint(0, L, ())
        return (*_inputs()[:3], torch.zeros(1, L).masked_fill(~visible, -math.inf))

    torch.manual_seed(4)
    model = Uniform()
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=kernel)
    split = graph_pass(_ep(model, inputs()))
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": int(kernel), "kept": 0}
    for seed in range(3):
        torch.manual_seed(seed)
        args = inputs()
        with torch.no_grad():
            assert _relative_error(split.module()(*args), model(*args)) < 1e-5, seed
