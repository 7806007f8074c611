"""The pass with and without its speed-ups (replay, copying unchanged nodes: the uses of torch internals
that only save time, torch_internals.py) gives the same graph: same ops in the same order with the same
arguments, same values, on random registry programs (program_gen.py) and on a dynamic-shape RoPE chain."""

import warnings

import torch
from hypothesis import HealthCheck, given, settings

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real import torch_internals

from program_gen import ProgramModule, programs


def _graph(ep: torch.export.ExportedProgram) -> list[tuple]:
    """Each node as (op, target, arguments by position in the graph, dtype/shape of its value)."""
    position = {node: i for i, node in enumerate(ep.graph.nodes)}

    def argument(a):
        return ("node", position[a]) if isinstance(a, torch.fx.Node) else a

    nodes = []
    for node in ep.graph.nodes:
        args, kwargs = torch.utils._pytree.tree_map(argument, (node.args, node.kwargs))
        value = node.meta.get("val")
        described = (value.dtype, str(tuple(value.shape))) if isinstance(value, torch.Tensor) else str(value)
        nodes.append((node.op, str(node.target), str(args), str(kwargs), described))
    return nodes


def _both_ways(ep: torch.export.ExportedProgram):
    fast = ReplaceComplexWithRealPass(strict=True, speedups=True)(ep)
    plain = ReplaceComplexWithRealPass(strict=True, speedups=False)(ep)
    assert _graph(fast) == _graph(plain)
    kinds = lambda ep: ([(s.kind, s.target) for s in ep.graph_signature.input_specs],  # noqa: E731
                        [(s.kind, s.target) for s in ep.graph_signature.output_specs])
    assert kinds(fast) == kinds(plain)  # names differ: a copied node keeps the original's
    return fast, plain


def _assert_same_values(fast, plain, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, b in zip(fast.module()(*inputs), plain.module()(*inputs)):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(program=programs(max_ops=6))
def test_random_programs_give_the_same_graph_both_ways(program):
    module = ProgramModule(program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, program.fresh_inputs(seed=0)).run_decompositions()
    fast, plain = _both_ways(ep)
    _assert_same_values(fast, plain, program.fresh_inputs(seed=1))


class _Chain(torch.nn.Module):
    """benchmarks/pass_scaling.py's worst case, short: rotary steps on a dynamic length, where replay and
    copying matter (symbolic shapes), real nodes between complex ones."""

    def __init__(self):
        super().__init__()
        angles = torch.rand(64, 8)
        self.register_buffer("freqs", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x):
        f = self.freqs[: x.shape[1]]
        for _ in range(3):
            z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * f
            z = torch.cat([z[..., :4] * 1j, z[..., 4:] + f[:, 4:]], -1)
            x = torch.relu(torch.view_as_real(z).flatten(-2)) * 0.5 + x
        return x


def test_a_dynamic_shape_chain_gives_the_same_graph_both_ways(monkeypatch):
    length = torch.export.Dim("length", max=64)
    ep = torch.export.export(_Chain(), (torch.randn(2, 16, 16),), dynamic_shapes=({1: length},)).run_decompositions()
    fast, plain = _both_ways(ep)
    _assert_same_values(fast, plain, (torch.randn(2, 9, 16),))
    monkeypatch.setenv(torch_internals.SPEEDUPS_VARIABLE, "0")
    assert ReplaceComplexWithRealPass().speedups is False
    monkeypatch.delenv(torch_internals.SPEEDUPS_VARIABLE)
    assert ReplaceComplexWithRealPass().speedups is True


class _Sin(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.sin(torch.view_as_complex(x)))


def test_a_replayed_factory_call_traces_no_detach():
    """sin's rule calls torch.ones_like twice on values of one shape, so the second call is replayed. Its result
    was also meta["val"] of the new node; autograd's make_variable, behind torch.ones_like, detached such a
    shared result again, and make_fx traced that detach into the fast graph only."""
    ep = torch.export.export(_Sin(), (torch.randn(3, 2),)).run_decompositions()
    fast, plain = _both_ways(ep)
    assert "aten.detach.default" not in {str(n.target) for n in fast.graph.nodes}
    _assert_same_values(fast, plain, (torch.randn(3, 2),))
