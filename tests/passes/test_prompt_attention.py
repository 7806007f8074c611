"""PromptAttentionPass: which written-out attentions it makes one scaled_dot_product_attention call, and that
the result is eager's (fresh random inputs, caches and positions; float32 and bfloat16): transformers' eager
form over a grouped cache, our decoder's grouped 5-d prompt form, a decode step left to SplitCacheAttentionPass,
and a chain that is not ``scale · s + bias`` kept as written."""

import dataclasses
import math

import pytest
import torch
from test_decode_attention import CacheAttention, _ep, _inputs, _relative_error, repeat_kv

from aotcuda.models.decoder import DecoderConfig, make_decoder
from aotcuda.passes.decode_attention import SDPA
from aotcuda.passes.prompt_attention import PromptAttentionPass
from aotcuda.lowering.decompositions import decomposition_table

aten = torch.ops.aten
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def _ops(ep, *targets):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target in targets]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformers_eager_attention_of_a_prompt_becomes_one_sdpa_and_matches_eager(dtype):
    torch.manual_seed(0)
    model = CacheAttention("eager")
    rows = 24  # the query rows of a prompt, written at positions pos .. pos + rows - 1
    ep = _ep(model, _inputs(rows=rows, dtype=dtype))
    graph_pass = PromptAttentionPass()
    fused = graph_pass(ep)
    assert graph_pass.result.changed and graph_pass.result.counts == {"rewritten": 1, "kept": 0}
    assert len(_ops(fused, SDPA)) == 1 and not _ops(fused, aten._softmax.default, aten.bmm.default)
    assert _ops(ep, aten._softmax.default)  # the input program is unchanged
    for pos in (0, 17, 40):  # the cache (64 positions) partly hidden, then almost all visible
        args = _inputs(rows=rows, dtype=dtype, pos=pos)
        with torch.no_grad():
            assert _relative_error(fused.module()(*args), model(*args)) < TOLERANCE[dtype], pos


def test_a_decode_step_and_fused_attention_are_left_alone():
    # One query row a head (4 a KV head): SplitCacheAttentionPass's; SDPA calls are fused already.
    for form, rows in (("eager", 1), ("sdpa-bool", 24), ("sdpa-gqa", 24)):
        ep = _ep(CacheAttention(form), _inputs(rows=rows))
        graph_pass = PromptAttentionPass()
        assert graph_pass(ep) is ep and not graph_pass.result.changed, form


class SoftCappedAttention(torch.nn.Module):
    """Gemma-2's soft cap on the scores, tanh(s / c) · c: not affine in s, so not one SDPA."""

    def forward(self, q, k, v, pos):
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
        scores = torch.tanh(scores / 30.0) * 30.0
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def test_a_soft_capped_chain_is_kept_as_written():
    args = _inputs(rows=24)
    ep = _ep(SoftCappedAttention(), (args[0], args[1].repeat_interleave(4, 1), args[2].repeat_interleave(4, 1),
                                     args[3]))
    graph_pass = PromptAttentionPass()
    assert graph_pass(ep) is ep and not graph_pass.result.changed


def _decoder_prompt(dtype, tokens=20, config=None):
    config = config or DecoderConfig.tiny()
    model = make_decoder(config, batch=2, dtype=dtype)
    example = (torch.zeros(2, tokens, dtype=torch.long), torch.arange(tokens))
    with torch.no_grad():
        ep = torch.export.export(model, example).run_decompositions(decomposition_table())
    return config, model, ep


@pytest.mark.parametrize("heads", [(4, 2), (4, 4)], ids=["grouped query heads", "one KV head a query head"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_our_decoders_grouped_prompt_attention_becomes_sdpa_and_matches_eager(dtype, heads):
    torch.manual_seed(1)
    tiny = DecoderConfig.tiny()
    config, model, ep = _decoder_prompt(dtype, config=dataclasses.replace(tiny, n_heads=heads[0], n_kv_heads=heads[1]))
    graph_pass = PromptAttentionPass()
    fused = graph_pass(ep)
    layers = config.n_layers
    assert graph_pass.result.counts == {"rewritten": layers, "kept": 0}
    assert len(_ops(fused, SDPA)) == layers and not _ops(fused, aten._softmax.default)
    # The caches are read as [B, Hkv, L, D] and repeated to the query heads, never the scores.
    assert all(n.args[0].meta["val"].shape[1] == config.n_heads for n in _ops(fused, SDPA))
    lowered = fused.module()
    for start in (0, 7):  # a fresh prompt, then one over the cache the first wrote (each program its own)
        tokens = torch.randint(0, config.vocab_size, (2, 20))
        positions = torch.arange(start, start + 20)
        want = model(tokens, positions)
        got = lowered(tokens, positions)
        assert _relative_error(got, want) < TOLERANCE[dtype], start


class GroupedEager(torch.nn.Module):
    """transformers' eager form with a fixed scale and no mask, over caches that are inputs."""

    def forward(self, q, k, v):
        group = q.shape[1] // k.shape[1]
        k, v = repeat_kv(k, group), repeat_kv(v, group)
        return torch.softmax(torch.matmul(q, k.transpose(2, 3)) * 0.3, dim=-1) @ v


def test_a_dynamic_batch_and_cache_length_stay_symbolic():
    torch.manual_seed(3)
    batch, length = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("length", min=24, max=64)
    shapes = ({0: batch}, {0: batch, 2: length}, {0: batch, 2: length})
    ep = _ep(GroupedEager(), (torch.randn(2, 8, 24, 8), torch.randn(2, 2, 32, 8), torch.randn(2, 2, 32, 8)), shapes)
    graph_pass = PromptAttentionPass()
    fused = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 1, "kept": 0}
    for size, cache in ((1, 24), (3, 40), (8, 64)):
        args = (torch.randn(size, 8, 24, 8), torch.randn(size, 2, cache, 8), torch.randn(size, 2, cache, 8))
        with torch.no_grad():
            assert _relative_error(fused.module()(*args), GroupedEager()(*args)) < 1e-5, (size, cache)


class Float32Bias(torch.nn.Module):
    """Scores of q's dtype upcast and given a float32 bias (ALiBi-like): eager adds it in float32."""

    def forward(self, q, k, v, bias):
        scores = torch.matmul(q, k.transpose(2, 3)).float() / math.sqrt(q.shape[-1]) + bias
        return torch.matmul(torch.softmax(scores, dim=-1).type_as(q), v)


@pytest.mark.parametrize("bias_dtype, rewritten", [(torch.float32, 0), (torch.bfloat16, 1)],
                         ids=["a float32 bias is kept", "a bias of q's dtype is rewritten"])
def test_a_bias_that_q_dtype_would_round_is_kept(bias_dtype, rewritten):
    # SDPA takes the mask in q's dtype: a float32 bias of 100 + N(0, 1) rounded to bfloat16 (spacing 0.5 there)
    # changed the result by 0.11 relative; such an attention stays as written.
    torch.manual_seed(4)

    def args():
        bf = torch.bfloat16
        return (torch.randn(2, 4, 24, 8, dtype=bf), torch.randn(2, 4, 32, 8, dtype=bf),
                torch.randn(2, 4, 32, 8, dtype=bf), (100 + torch.randn(1, 4, 24, 32)).to(bias_dtype))

    ep = _ep(Float32Bias(), args())
    graph_pass = PromptAttentionPass()
    fused = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": rewritten, "kept": 1 - rewritten}
    fresh = args()
    with torch.no_grad():
        assert _relative_error(fused.module()(*fresh), Float32Bias()(*fresh)) < TOLERANCE[torch.bfloat16]


class TwoInARow(torch.nn.Module):
    """The second attention's queries are the first one's result."""

    def forward(self, q, k, v):
        first = torch.softmax(q @ k.transpose(2, 3) * 0.3, -1) @ v
        return torch.softmax(first @ k.transpose(2, 3) * 0.5, -1) @ v


def test_an_attention_that_reads_another_reads_its_new_result():
    torch.manual_seed(5)
    args = (torch.randn(2, 4, 24, 8), torch.randn(2, 4, 32, 8), torch.randn(2, 4, 32, 8))
    graph_pass = PromptAttentionPass()
    fused = graph_pass(_ep(TwoInARow(), args))
    assert graph_pass.result.counts == {"rewritten": 2, "kept": 0}
    assert len(_ops(fused, SDPA)) == 2 and not _ops(fused, aten.bmm.default, aten._softmax.default)
    fresh = tuple(torch.randn_like(a) for a in args)
    with torch.no_grad():
        assert _relative_error(fused.module()(*fresh), TwoInARow()(*fresh)) < 1e-5
