"""EliminateCommonSubexpressionsPass: which nodes merge, which never do, and that the program still computes
what eager does (fresh random inputs)."""

import pytest
import torch

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.passes.common_subexpressions import EliminateCommonSubexpressionsPass
from aotcuda.passes.decode_attention import SplitCacheAttentionPass
from comparisons import check_decode_steps

aten = torch.ops.aten


def _ep(model, args):
    with torch.no_grad():
        return torch.export.export(model, args).run_decompositions(decomposition_table())


def _count(ep, *targets):
    return sum(node.target in targets for node in ep.graph.nodes)


class Layers(torch.nn.Module):
    """Each of three "layers" builds the same mask from the position, as our decoder's attention does."""

    def forward(self, x, position):
        for _ in range(3):
            visible = torch.arange(x.shape[-1]) <= position
            x = torch.softmax(x + torch.where(visible, 0.0, float("-inf")), -1) * 2.0
        return x


def test_a_mask_built_in_every_layer_is_built_once_and_the_program_matches_eager():
    model = Layers()
    ep = _ep(model, (torch.randn(4, 16), torch.tensor([5])))
    assert _count(ep, aten.arange.start_step, aten.arange.default, aten.arange.start) == 3
    graph_pass = EliminateCommonSubexpressionsPass()
    merged = graph_pass(ep)
    assert graph_pass.result.changed and graph_pass.result.counts["merged"] >= 3 * 2  # arange, le, where: twice
    assert _count(merged, aten.arange.start_step, aten.arange.default, aten.arange.start) == 1
    assert _count(ep, aten.arange.start_step, aten.arange.default, aten.arange.start) == 3  # ep itself unchanged
    for position in (0, 7, 15):
        x, at = torch.randn(4, 16), torch.tensor([position])
        torch.testing.assert_close(merged.module()(x, at), model(x, at), rtol=1e-5, atol=1e-6)


def test_the_decode_step_builds_its_attention_mask_once_and_matches_eager_over_steps():
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()
    model = make_decoder(config, 2, dtype=torch.float32, seed=5)
    ep = _ep(model, (torch.zeros(2, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes() + [SplitCacheAttentionPass(min_cache_len=16, chunk=8, kernel=False)]:
        ep = graph_pass(ep)
    compares = (aten.le.Tensor, aten.le.Scalar, aten.ge.Tensor, aten.gt.Tensor, aten.lt.Tensor)
    assert _count(ep, *compares) >= config.n_layers
    graph_pass = EliminateCommonSubexpressionsPass()
    merged = graph_pass(ep)
    assert _count(merged, *compares) < config.n_layers
    eager, lowered = make_decoder(config, 2, dtype=torch.float32, seed=5), merged.module()
    tokens = torch.randint(0, config.vocab_size, (2, 1))
    check_decode_steps(eager, lowered, tokens, steps=3, rtol=1e-5)


class Twice(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) + 1.0, torch.sin(x) + 1.0, torch.cos(x)


def test_outputs_that_become_one_node_name_it_in_both_slots():
    ep = _ep(Twice(), (torch.randn(5),))
    merged = EliminateCommonSubexpressionsPass()(ep)
    names = [spec.arg.name for spec in merged.graph_signature.output_specs]
    assert names[0] == names[1] != names[2]
    output = next(node for node in merged.graph.nodes if node.op == "output")
    assert [node.name for node in output.args[0]] == names
    x = torch.randn(5)
    for got, want in zip(merged.module()(x), Twice()(x)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


class Random(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x), x + torch.rand_like(x)


def test_random_ops_are_never_merged():
    ep = _ep(Random(), (torch.randn(64),))
    graph_pass = EliminateCommonSubexpressionsPass()
    merged = graph_pass(ep)
    a, b = merged.module()(torch.zeros(64))
    assert not torch.equal(a, b)
    assert graph_pass.result.counts["merged"] == 0


class SignedZeros(torch.nn.Module):
    def forward(self, x):
        return x + 0.0, x + (-0.0), x * float("nan"), x * float("nan")


def test_equal_looking_constants_that_differ_keep_their_nodes():
    """0.0 and -0.0 give different results for x = -0.0; NaN equals nothing, so its nodes are not merged."""
    ep = _ep(SignedZeros(), (torch.randn(3),))
    graph_pass = EliminateCommonSubexpressionsPass()
    merged = graph_pass(ep)
    assert graph_pass.result.counts["merged"] == 0 and merged is ep
    x = torch.tensor([-0.0, 1.0, -2.0])
    got, want = merged.module()(x), SignedZeros()(x)
    assert torch.equal(torch.signbit(got[0]), torch.signbit(want[0]))
    assert torch.equal(torch.signbit(got[1]), torch.signbit(want[1]))


def test_a_graph_that_writes_in_place_is_left_as_it_is():
    ep = _ep(Twice(), (torch.randn(5),))
    graph = ep.graph_module.graph
    sin = next(node for node in graph.nodes if node.target == aten.sin.default)
    with graph.inserting_after(sin):
        graph.call_function(aten.relu_.default, (sin,))
    graph_pass = EliminateCommonSubexpressionsPass()
    assert graph_pass(ep) is ep and not graph_pass.result.changed


def test_cuda_lowering_runs_it_last_when_its_switch_is_on_and_cpu_lowering_never(monkeypatch):
    """Off by default until a decode step on the device says it wins (switches.py)."""
    cuda = DEVICE_PROFILES["cuda"]
    monkeypatch.delenv("AOTCUDA_COMMON_SUBEXPRESSIONS", raising=False)
    assert EliminateCommonSubexpressionsPass not in cuda.enabled_passes()
    monkeypatch.setenv("AOTCUDA_COMMON_SUBEXPRESSIONS", "1")
    assert cuda.enabled_passes()[-1] is EliminateCommonSubexpressionsPass
    monkeypatch.setenv("AOTCUDA_COMMON_SUBEXPRESSIONS", "0")
    assert EliminateCommonSubexpressionsPass not in cuda.enabled_passes()
    monkeypatch.setenv("AOTCUDA_COMMON_SUBEXPRESSIONS", "1")
    assert EliminateCommonSubexpressionsPass not in DEVICE_PROFILES["cpu"].enabled_passes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_merging_keeps_values_bit_for_bit(dtype):
    """A merge reuses a node computing the same op on the same inputs: the results are identical, not close."""
    ep = _ep(Layers(), (torch.randn(4, 16, dtype=dtype), torch.tensor([5])))
    merged = EliminateCommonSubexpressionsPass()(ep)
    x, at = torch.randn(4, 16, dtype=dtype), torch.tensor([9])
    assert torch.equal(merged.module()(x, at), ep.module()(x, at))
