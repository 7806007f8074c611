"""ReplaceComplexWithRealEdgePass on Edge-dialect programs, at the ExportedProgram level (no compile).

Every rule keyed by an ATen overload applies to its Edge op; every RoPE pattern, lowered to Edge, is
rewritten in place and matches eager; the entry point keeps ExecuTorch's pass conventions (called with
the ExportedProgram, rewrites it in place, returns a PassResult) and refuses what it cannot do in place.
"""

import logging

import pytest

pytest.importorskip("executorch.exir", reason="needs ExecuTorch: pip install -e '.[executorch]'")

import et_programs  # noqa: E402
import torch  # noqa: E402
from executorch.exir import EdgeCompileConfig, to_edge  # noqa: E402
from executorch.exir.dialects._ops import ops as exir_ops  # noqa: E402
from executorch.exir.dialects.edge._ops import EdgeOpOverload  # noqa: E402
from torch.fx.passes.infra.pass_base import PassResult  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

from aotcuda.errors import UnsupportedComplexOpError  # noqa: E402
from aotcuda.executorch import ReplaceComplexWithRealEdgePass, aten_overload, complex_pass_in  # noqa: E402
from aotcuda.models.patterns import PATTERNS  # noqa: E402
from aotcuda.passes.complex_to_real.registry import RULES, op_name, rule_for  # noqa: E402
from aotcuda.passes.complex_to_real.scan import program_has_complex  # noqa: E402


def edge_program(model, args, dynamic_shapes=None) -> torch.export.ExportedProgram:
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    # The Edge IR check refuses complex dtypes for most ops; ExecuTorch's AOTI flow lowers without it.
    return to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).exported_program()


def edge_op(op: torch._ops.OpOverload):
    return getattr(getattr(exir_ops.edge.aten, op._opname), op._overloadname)


ATEN_RULES = [op for op in RULES if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten"]


def test_every_aten_rule_applies_to_its_edge_op():
    for op in ATEN_RULES:
        edge = edge_op(op)
        assert isinstance(edge, EdgeOpOverload) and aten_overload(edge) is op
        rule = rule_for(edge)
        assert rule is not None and rule.fn is RULES[op].fn and rule.op is op, op_name(edge)
        assert (rule.refuses is None) == (RULES[op].refuses is None)
    assert op_name(edge_op(torch.ops.aten.mul.Tensor)) == "aten.mul.Tensor (EdgeOpOverload)"


def test_edge_copy_ops_get_their_views_rule():
    rule = rule_for(exir_ops.edge.aten.view_as_complex_copy.default)
    assert rule.op is torch.ops.aten.view_as_complex_copy.default and rule.family == "creation"
    assert rule_for(exir_ops.edge.aten.linalg_eig.default) is None  # no ATen rule, no Edge rule


def test_refusal_checks_see_the_aten_op():
    """The FFT rules' length check reads node.target (c2r's output length is an argument): on an Edge
    node it must see aten._fft_c2r, or it would check the wrong length."""
    x = torch.randn(4, 10000, dtype=torch.complex64)

    class Irfft(torch.nn.Module):
        def forward(self, pair):
            return torch.fft.irfft(torch.view_as_complex(pair), n=8)

    ep = edge_program(Irfft(), (torch.view_as_real(x),))
    node = next(n for n in ep.graph.nodes if aten_overload(n.target) is torch.ops.aten._fft_c2r.default)
    assert isinstance(node.target, EdgeOpOverload)
    assert rule_for(node.target).refuses(node) == RULES[torch.ops.aten._fft_c2r.default].refuses(node) is None


@pytest.mark.parametrize("name", list(PATTERNS))
def test_every_pattern_as_an_edge_program_is_rewritten_in_place_and_matches_eager(name):
    case = PATTERNS[name]
    model, args, _, dynamic_shapes = case.build(torch.float32)  # positional: no keyword arguments
    ep = edge_program(model, args, dynamic_shapes)
    assert any(isinstance(n.target, EdgeOpOverload) for n in ep.graph.nodes) and program_has_complex(ep)
    result = ReplaceComplexWithRealEdgePass()(ep)
    assert isinstance(result, PassResult) and result.modified and result.graph_module is ep.graph_module
    assert not program_has_complex(ep)
    for length in case.lengths:
        inputs, _ = case.make_inputs(length, torch.float32)
        for got, expected in zip(pytree.tree_leaves(ep.module()(*inputs)), pytree.tree_leaves(model(*inputs))):
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_program_without_complex_values_is_left_alone():
    ep = edge_program(torch.nn.Linear(4, 3), (torch.randn(2, 4),))
    graph_module = ep.graph_module
    result = ReplaceComplexWithRealEdgePass()(ep)
    assert not result.modified and ep.graph_module is graph_module


class ComplexIO(torch.nn.Module):
    def forward(self, z, x):
        return z * 2, x + 1


def test_complex_inputs_and_outputs_are_refused_by_name():
    ep = edge_program(ComplexIO(), (torch.randn(3, dtype=torch.complex64), torch.randn(3)))
    with pytest.raises(UnsupportedComplexOpError, match=r"z \(torch.complex64\).*before to_edge"):
        ReplaceComplexWithRealEdgePass()(ep)
    assert program_has_complex(ep)  # unchanged


def test_non_strict_logs_and_leaves_the_program_unchanged(caplog):
    ep = edge_program(ComplexIO(), (torch.randn(3, dtype=torch.complex64), torch.randn(3)))
    graph_module = ep.graph_module
    with caplog.at_level(logging.WARNING, logger="aotcuda"):
        result = ReplaceComplexWithRealEdgePass(strict=False)(ep)
    assert not result.modified and ep.graph_module is graph_module
    assert "left the program unchanged" in caplog.text and "z (torch.complex64)" in caplog.text


def test_a_graph_module_is_refused_with_the_reason():
    model, args, _, dynamic_shapes = et_programs.PROGRAMS["llama2"].build(torch.float32)
    ep = edge_program(model, args, dynamic_shapes)
    assert ReplaceComplexWithRealEdgePass.requires_exported_program  # AotiBackend then passes the program
    with pytest.raises(TypeError, match="rewrites an ExportedProgram.*got GraphModule"):
        ReplaceComplexWithRealEdgePass()(ep.graph_module)


class Backend:
    """Shaped like an AOTI backend class: get_custom_passes(compile_specs) is a classmethod."""

    @classmethod
    def get_custom_passes(cls, compile_specs):
        return ["own pass"]


class Subclass(Backend):
    pass


@pytest.mark.parametrize("backend", [Backend, Subclass])
def test_complex_pass_in_appends_the_pass_and_restores_the_backend(backend):
    with complex_pass_in(backend, strict=False):
        with complex_pass_in(backend):
            passes = backend.get_custom_passes([])
        assert passes[0] == "own pass" and isinstance(passes[1], ReplaceComplexWithRealEdgePass)
        assert passes[2].strict and len(passes) == 3  # the outer block's pass, then the inner one's
    assert backend.get_custom_passes([]) == ["own pass"] and ("get_custom_passes" in vars(backend)) == (backend is Backend)
    with pytest.raises(ValueError), complex_pass_in(backend):
        raise ValueError
    assert backend.get_custom_passes([]) == ["own pass"]
    with pytest.raises(TypeError, match="no get_custom_passes"), complex_pass_in(object):
        pass
