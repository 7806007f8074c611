"""score_chain.affine_chain through SplitCacheAttentionPass(kernel=True): each way code scales and masks
attention scores that reads as ``scale · s + bias`` becomes the kernel op and matches eager; a chain that
does not (a tensor scale, a finite fill that does not hide) keeps the plain-ATen form, which matches too."""

import math

import pytest
import torch

import aotcuda.kernels.decode_attention  # noqa: F401 - registers aotcuda::decode_attention
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.passes.decode_attention import SplitCacheAttentionPass

B, HQ, HKV, D, L = 2, 4, 2, 16, 64
LOW = torch.finfo(torch.float32).min


def _visible(length, pos):
    return torch.arange(length)[None, :] <= pos  # [1, L]


CHAINS = {  # name: (scores, visible, pos) → logits, and whether it reads as scale · s + bias
    "scale then additive mask": (lambda s, m, p: s * 0.25 + torch.zeros(m.shape).masked_fill(~m, -math.inf), True),
    "mask then divide": (lambda s, m, p: (s + torch.zeros(m.shape).masked_fill(~m, LOW)) / 4.0, True),
    "where with -inf": (lambda s, m, p: torch.where(m, s * 0.3, -math.inf), True),
    "where, scores second": (lambda s, m, p: torch.where(~m, torch.tensor(LOW), s / 3.0), True),
    "masked_fill with finfo.min": (lambda s, m, p: (s / 4.0).masked_fill(~m, LOW), True),
    "mask minus scores": (lambda s, m, p: torch.zeros(m.shape).masked_fill(~m, -math.inf) - s * 0.5, True),
    "a bias per position and a mask": (lambda s, m, p: s * 0.25 + torch.linspace(-1, 1, m.shape[-1])
                                       + torch.zeros(m.shape).masked_fill(~m, -math.inf), True),
    "a scale per head (a tensor)": (lambda s, m, p: s * torch.linspace(0.1, 0.4, HQ)[:, None, None]
                                    + torch.zeros(m.shape).masked_fill(~m, -math.inf), False),
    "a finite fill that does not hide": (lambda s, m, p: torch.where(m, s * 0.25, 0.0), False),
}


class Chain(torch.nn.Module):
    def __init__(self, chain):
        super().__init__()
        self.chain = chain

    def forward(self, q, k, v, pos):
        group = q.shape[1] // k.shape[1]
        k = k[:, :, None].expand(-1, -1, group, -1, -1).reshape(k.shape[0], -1, *k.shape[2:])
        v = v[:, :, None].expand(-1, -1, group, -1, -1).reshape(v.shape[0], -1, *v.shape[2:])
        scores = torch.matmul(q, k.transpose(2, 3))
        logits = self.chain(scores, _visible(k.shape[2], pos), pos)
        return torch.matmul(torch.softmax(logits.float(), -1).to(q.dtype), v)


def _inputs(pos):
    return (torch.randn(B, HQ, 1, D), torch.randn(B, HKV, L, D), torch.randn(B, HKV, L, D), torch.tensor(pos))


@pytest.mark.parametrize("name", list(CHAINS))
def test_each_scale_and_mask_form_is_read_or_left_and_matches_eager(name):
    chain, affine = CHAINS[name]
    torch.manual_seed(3)
    model = Chain(chain)
    with torch.no_grad():
        ep = torch.export.export(model, _inputs(5)).run_decompositions(decomposition_table())
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=True)
    rewritten = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": int(affine), "kept": 0}
    for pos in (0, 17, 63):
        args = _inputs(pos)
        with torch.no_grad():
            got, want = rewritten.module()(*args), model(*args)
        assert ((got - want).norm() / want.norm()).item() < 1e-5, pos


def _run_pass_and_compare(model, make_inputs, kernel_count=1):
    torch.manual_seed(3)
    with torch.no_grad():
        ep = torch.export.export(model, make_inputs()).run_decompositions(decomposition_table())
    graph_pass = SplitCacheAttentionPass(min_cache_len=32, chunk=16, kernel=True)
    rewritten = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 1, "kernel": kernel_count, "kept": 0}
    for seed in range(3):
        torch.manual_seed(seed)
        args = make_inputs()
        with torch.no_grad():
            got, want = rewritten.module()(*args), model(*args)
        assert torch.equal(got.isnan(), want.isnan()), seed
        assert ((got - want).nan_to_num().norm() / want.nan_to_num().norm()).item() < 1e-5, seed


class Biased(Chain):
    """Chain with a mask given as an input: chain(scores, mask)."""

    def forward(self, q, k, v, mask):
        group = q.shape[1] // k.shape[1]
        k = k[:, :, None].expand(-1, -1, group, -1, -1).reshape(k.shape[0], -1, *k.shape[2:])
        v = v[:, :, None].expand(-1, -1, group, -1, -1).reshape(v.shape[0], -1, *v.shape[2:])
        logits = self.chain(torch.matmul(q, k.transpose(2, 3)), mask)
        return torch.matmul(torch.softmax(logits.float(), -1).to(q.dtype), v)


@pytest.mark.parametrize("mask_dtype", [torch.bfloat16, torch.float16])
def test_a_low_precision_mask_on_float32_scores_is_scaled_in_float32_as_eager_does(mask_dtype):
    # Eager adds a bf16/fp16 position bias to float32 scores in float32, then scales the sum in float32.
    # The bias rebuilt from a 0-d float32 zero took the mask's dtype (a dimensioned operand wins type
    # promotion), so (0 + mask) / 3 was rounded to bf16: a logit off by |mask| / 256.
    model = Biased(lambda s, m: (s + m) / 3.0)
    _run_pass_and_compare(model, lambda: (*_inputs(5)[:3], torch.randn(L).to(mask_dtype) * 4))


def test_a_float16_finfo_min_mask_scaled_up_stays_finite_as_in_eager():
    # (s + m) * 2 with m = finfo(float16).min everywhere: float32 in eager (-131008, a uniform softmax); a
    # bias scaled in float16 overflowed to -inf and the row became NaN.
    model = Biased(lambda s, m: (s + m) * 2.0)
    low = torch.finfo(torch.float16).min
    _run_pass_and_compare(model, lambda: (*_inputs(5)[:3], torch.full((L,), low, dtype=torch.float16)))


@pytest.mark.parametrize("convert", [lambda s: (s * 3).long().float(), lambda s: s.to(torch.int32) * 0.5,
                                     lambda s: s.bool().float()], ids=["to int64", "to int32", "to bool"])
def test_a_conversion_to_an_integer_or_bool_is_not_read_as_the_identity(convert):
    # A conversion to a float dtype only rounds; one to an integer (quantized scores) or bool changes the
    # values, so the chain is not scale · s + bias: the plain-ATen form, which runs the program's own ops.
    model = Biased(lambda s, m: convert(s) + m)
    _run_pass_and_compare(model, lambda: (*_inputs(5)[:3], torch.randn(L)), kernel_count=0)


@pytest.mark.parametrize("hide", [lambda s, m: torch.where(m, s * 0.25, -math.inf),
                                  lambda s, m: (s * 0.25).masked_fill(~m, -math.inf)], ids=["where", "masked_fill"])
def test_a_key_the_mask_replaces_by_minus_inf_is_not_read_even_if_it_is_not_finite(hide):
    # A cache of torch.empty (or a stale fp16 overflow) past the filled positions: where / masked_fill
    # replace those scores by -inf, so eager never sees their NaN; scale · NaN + (-inf) is NaN, so the kernel
    # op must treat a bias of -inf as a hidden position, not add to it.
    def inputs():
        q, k, v, _ = _inputs(5)
        pos = int(torch.randint(0, L - 1, ()))
        k[:, :, pos + 1:] = torch.tensor([math.nan, math.inf, -math.inf])[torch.randint(0, 3, (L - pos - 1,))][:, None]
        return q, k, v, torch.arange(L) <= pos

    _run_pass_and_compare(Biased(hide), inputs)
