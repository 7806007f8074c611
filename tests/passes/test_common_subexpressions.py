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


def test_identical_outputs_stay_two_tensors_while_what_they_share_is_computed_once():
    """Two outputs merged into one node would come back as one tensor: a write into one would reach the other."""
    ep = _ep(Twice(), (torch.randn(5),))
    merged = EliminateCommonSubexpressionsPass()(ep)
    names = [spec.arg.name for spec in merged.graph_signature.output_specs]
    assert len(set(names)) == 3 and _count(merged, aten.sin.default) == 1
    x = torch.randn(5)
    got = merged.module()(x)
    for g, want in zip(got, Twice()(x)):
        torch.testing.assert_close(g, want, rtol=1e-6, atol=1e-7)
    got[0].add_(1.0)
    assert not torch.equal(got[0], got[1])


class Recorder(torch.nn.Module):
    """Each layer records the position it ran at: two buffers get the same new value."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(1, dtype=torch.long))

    def forward(self, x, position):
        self.seen.copy_(position + 1)
        return x * 2


class TwoRecorders(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Recorder(), Recorder()

    def forward(self, x, position):
        return self.b(self.a(x, position), position)


class CacheAndResult(torch.nn.Module):
    """A buffer's new value equal to a user output."""

    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(4))

    def forward(self, x):
        self.k.copy_(x * 2)
        return x * 2


def test_buffers_given_the_same_value_keep_their_own_outputs():
    ep = _ep(TwoRecorders(), (torch.randn(4), torch.tensor([3])))
    merged = EliminateCommonSubexpressionsPass()(ep)
    model, lowered = TwoRecorders(), merged.module()
    x, at = torch.randn(4), torch.tensor([7])
    torch.testing.assert_close(lowered(x, at), model(x, at))
    assert lowered.a.seen.item() == lowered.b.seen.item() == 8


def test_a_buffers_new_value_and_an_equal_result_stay_apart():
    ep = _ep(CacheAndResult(), (torch.randn(4),))
    lowered = EliminateCommonSubexpressionsPass()(ep).module()
    first = lowered(torch.ones(4))
    lowered(torch.full((4,), 5.0))
    assert first.tolist() == [2.0] * 4 and first.data_ptr() != lowered.k.data_ptr()


class Sub(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) + 1.0


class TwoSubs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Sub(), Sub()

    def forward(self, x):
        return self.a(x) * self.b(x)


def test_a_program_that_preserves_module_call_signatures_is_left_as_it_is():
    with torch.no_grad():
        ep = torch.export.export(TwoSubs(), (torch.randn(5),), preserve_module_call_signature=("a", "b"))
    ep = ep.run_decompositions(decomposition_table())
    graph_pass = EliminateCommonSubexpressionsPass()
    assert graph_pass(ep) is ep and not graph_pass.result.changed


class ComplexZeros(torch.nn.Module):
    def forward(self, x):
        return x * complex(-0.0, 0.0), x * complex(0.0, 0.0)


def test_complex_constants_that_differ_in_a_zeros_sign_keep_their_nodes():
    graph_pass = EliminateCommonSubexpressionsPass()
    graph_pass(_ep(ComplexZeros(), (torch.tensor([1 + 0j, -2 + 0j]),)))
    assert graph_pass.result.counts["merged"] == 0


class CondRandom(torch.nn.Module):
    def forward(self, x):
        def plus(x):
            return x + torch.rand_like(x)

        def minus(x):
            return x - torch.rand_like(x)

        return torch.cond(x.sum() > 0, plus, minus, (x,)), torch.cond(x.sum() > 0, plus, minus, (x,))


def test_higher_order_ops_are_never_merged_even_over_one_shared_subgraph():
    """is_impure does not look into a cond's branches: two conds sharing random branches must stay two."""
    ep = _ep(CondRandom(), (torch.randn(8),))
    graph = ep.graph_module.graph
    conds = [node for node in graph.nodes if node.target is torch.ops.higher_order.cond]
    first, second = conds
    second.args = (first.args[0], first.args[1], first.args[2], second.args[3])  # one subgraph, as a dedup would
    graph.eliminate_dead_code()
    ep.graph_module.recompile()
    graph_pass = EliminateCommonSubexpressionsPass()
    a, b = graph_pass(ep).module()(torch.randn(8))
    assert not torch.equal(a, b)


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
