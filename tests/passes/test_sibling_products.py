"""ConcatSiblingProductsPass: which products become one, and that the program still computes what eager does
(fresh random inputs, at sizes other than the example's where dims are dynamic)."""

import pytest
import torch
from torch.nn import functional as F

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.passes.decode_attention import SplitCacheAttentionPass
from aotcuda.passes.prompt_attention import PromptAttentionPass
from aotcuda.passes.sibling_products import ConcatSiblingProductsPass
from comparisons import check_decode_steps

aten = torch.ops.aten
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


class Block(torch.nn.Module):
    """q/k/v of one normalized activation, then a SwiGLU MLP of another: two groups of siblings."""

    def __init__(self, dim=32, kv=16, hidden=48, bias=False):
        super().__init__()
        self.wq = torch.nn.Linear(dim, dim, bias=bias)
        self.wk = torch.nn.Linear(dim, kv, bias=bias)
        self.wv = torch.nn.Linear(dim, kv, bias=bias)
        self.w1 = torch.nn.Linear(dim, hidden, bias=bias)
        self.w3 = torch.nn.Linear(dim, hidden, bias=bias)
        self.w2 = torch.nn.Linear(hidden, dim, bias=bias)

    def forward(self, x):
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        h = x + q * torch.cat([k, v], -1).sum(-1, keepdim=True)
        return self.w2(F.silu(self.w1(h)) * self.w3(h))


class TiedAndMixed(torch.nn.Module):
    """a and b read x, but b's weight is also an embedding table, and c has a bias where a has none."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 8, bias=False)
        self.b = torch.nn.Linear(16, 12, bias=False)
        self.c = torch.nn.Linear(16, 4, bias=True)

    def forward(self, x, ids):
        return self.a(x), self.b(x), self.c(x), F.embedding(ids, self.b.weight)


class Flattened(torch.nn.Module):
    """A consumer that flattens a product's rows and columns together: a view the slice cannot be."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 8, bias=False)
        self.b = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        return self.a(x).view(-1) * 2, self.b(x)


def _ep(model, args, dynamic_shapes=None):
    with torch.no_grad():
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(decomposition_table())


def _products(ep):
    return [n for n in ep.graph.nodes if n.target in (aten.mm.default, aten.addmm.default)]


def _state_bytes(ep):
    return sum(t.numel() * t.element_size() for t in ep.state_dict.values())


def _check(model, ep, *shapes, dtype=torch.float32):
    for shape in shapes:
        x = torch.randn(shape, dtype=dtype)
        with torch.no_grad():
            want, got = model(x), ep.module()(x)
        error = ((got.float() - want.float()).norm() / want.float().norm()).item()
        assert error < TOLERANCE[dtype], (shape, error)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True], ids=["no bias", "bias"])
def test_qkv_and_w1_w3_become_one_product_each_with_dynamic_batch_and_sequence(dtype, bias):
    torch.manual_seed(0)
    model = Block(bias=bias).to(dtype).eval()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=1, max=64)
    ep = _ep(model, (torch.randn(2, 5, 32, dtype=dtype),), ({0: batch, 1: seq},))
    graph_pass = ConcatSiblingProductsPass(min_rows=1)
    fused = graph_pass(ep)
    assert graph_pass.result.changed and graph_pass.result.counts == {"groups": 2, "products": 5, "kept": 0}
    assert len(_products(fused)) == 3 and len(_products(ep)) == 6  # the input program is unchanged
    assert all(p.target is (aten.addmm.default if bias else aten.mm.default) for p in _products(fused))
    names = set(fused.state_dict)
    assert {"cat_wq_wk_wv.weight", "cat_w1_w3.weight"} <= names and not names & {"wq.weight", "w1.weight"}
    assert ("cat_wq_wk_wv.bias" in names) is bias
    assert _state_bytes(fused) == _state_bytes(ep)  # the same bytes: stacked, not copied beside
    assert torch.equal(fused.state_dict["cat_w1_w3.weight"], torch.cat([model.w1.weight, model.w3.weight]))
    _check(model, fused, (1, 1, 32), (3, 17, 32), (8, 64, 32), dtype=dtype)


def test_by_default_only_products_of_eight_rows_or_more_are_fused_a_symbolic_count_by_its_lower_bound():
    # The measured rule (switches.py): one-row products of a batch-1 decode step stay Inductor's fused
    # reductions; a batch of 8 (cuBLAS GEMMs) is fused. A dynamic batch may be 1, unless its min says not.
    torch.manual_seed(2)
    model = Block().eval()
    for rows, dynamic, fused in [(1, None, False), (7, None, False), (8, None, True),
                                 (8, torch.export.Dim("batch", min=1, max=64), False),
                                 (8, torch.export.Dim("batch", min=8, max=64), True)]:
        ep = _ep(model, (torch.randn(rows, 32),), None if dynamic is None else ({0: dynamic},))
        graph_pass = ConcatSiblingProductsPass()
        out = graph_pass(ep)
        want = {"groups": 2, "products": 5, "kept": 0} if fused else {"groups": 0, "products": 0, "kept": 2}
        assert graph_pass.result.counts == want, (rows, dynamic)
        assert (out is ep) is not fused
        _check(model, out, (rows, 32), (9, 32) if dynamic is not None else (rows, 32))
    with pytest.raises(ValueError, match="min_rows must be an int of at least 1"):
        ConcatSiblingProductsPass(min_rows=0)


def test_a_shared_weight_and_a_bias_mismatch_keep_their_products():
    model = TiedAndMixed().eval()
    ep = _ep(model, (torch.randn(3, 16), torch.tensor([1, 2])))
    graph_pass = ConcatSiblingProductsPass(min_rows=1)
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"groups": 0, "products": 0, "kept": 0}


def test_a_consumer_that_cannot_view_the_columns_reads_a_contiguous_copy():
    torch.manual_seed(1)
    model = Flattened().eval()
    ep = ConcatSiblingProductsPass(min_rows=1)(_ep(model, (torch.randn(3, 16),)))
    assert len(_products(ep)) == 1
    x = torch.randn(3, 16)
    with torch.no_grad():
        for want, got in zip(model(x), ep.module()(x)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_decode_step_fuses_qkv_and_w1_w3_of_every_layer_and_matches_eager():
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()
    model = make_decoder(config, 2, dtype=torch.float32, seed=4)
    ep = _ep(model, (torch.zeros(2, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes():
        ep = graph_pass(ep)
    graph_pass = ConcatSiblingProductsPass(min_rows=1)
    fused = graph_pass(ep)
    assert graph_pass.result.counts == {"groups": 2 * config.n_layers, "products": 5 * config.n_layers, "kept": 0}
    assert abs(_state_bytes(fused) - _state_bytes(ep)) <= 0.01 * _state_bytes(ep)
    eager, lowered = make_decoder(config, 2, dtype=torch.float32, seed=4), fused.module()
    tokens = torch.randint(0, config.vocab_size, (2, 1))
    check_decode_steps(eager, lowered, tokens, steps=3, rtol=1e-5)


@pytest.mark.parametrize("graph_pass, switch, by_default", [
    (ConcatSiblingProductsPass, "AOTCUDA_SIBLING_PRODUCTS", True),  # 1186.3 against 1406.4 µs a batch-8 step
    (SplitCacheAttentionPass, "AOTCUDA_DECODE_ATTENTION", True),  # 939.0 against 1051.1 µs a batch-1 step
    (PromptAttentionPass, "AOTCUDA_PROMPT_ATTENTION", True),  # 9.64 against 14.96 ms a 2048-token prefill
])
def test_cuda_lowering_runs_each_decode_pass_only_when_its_switch_is_on_and_cpu_lowering_never(
        monkeypatch, graph_pass, switch, by_default):
    """Unset, the switch's default (switches.py says what the H200 measured); 1 and 0 turn the pass on and off."""
    cuda = DEVICE_PROFILES["cuda"]
    monkeypatch.delenv(switch, raising=False)
    assert (graph_pass in cuda.enabled_passes()) is by_default
    monkeypatch.setenv(switch, "1")
    assert graph_pass in cuda.enabled_passes()
    monkeypatch.setenv(switch, "0")
    assert graph_pass not in cuda.enabled_passes()
    monkeypatch.setenv(switch, "1")
    assert graph_pass not in DEVICE_PROFILES["cpu"].enabled_passes()
