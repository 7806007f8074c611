"""The ``*_copy`` view ops (as Edge programs hold them) are rewritten by their view's rule into a fresh tensor.

No ExecuTorch needed: ATen has the copy ops too. One table entry per copy op whose view has a rule; the
table must cover them all, so a view rule added later without a sample here fails the coverage test.
"""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import RULES, rule_for, view_of_copy

aten = torch.ops.aten

# copy op → (complex shape, the op's other arguments)
SAMPLES = {
    aten._conj_copy.default: ((3, 4), ()),
    aten._neg_view_copy.default: ((3, 4), ()),
    aten.alias_copy.default: ((3, 4), ()),
    aten.as_strided_copy.default: ((3, 4), ([2, 3], [4, 1], 1)),
    aten.detach_copy.default: ((3, 4), ()),
    aten.diagonal_copy.default: ((2, 3, 4), (1, 0, -1)),
    aten.lift_fresh_copy.default: ((3, 4), ()),
    aten.expand_copy.default: ((1, 4), ([3, 4],)),
    aten.narrow_copy.default: ((4, 6), (1, 1, 3)),
    aten.permute_copy.default: ((2, 3, 4), ([2, 0, 1],)),
    aten.select_copy.int: ((4, 6), (-1, 2)),
    aten.slice_copy.Tensor: ((4, 6), (1, 1, 5, 2)),
    aten.split_copy.Tensor: ((3, 6), (2, -1)),
    aten.split_with_sizes_copy.default: ((3, 6), ([1, 2, 3], 1)),
    aten.squeeze_copy.default: ((3, 1, 4), ()),
    aten.squeeze_copy.dim: ((3, 1, 4), (1,)),
    aten.squeeze_copy.dims: ((3, 1, 4, 1), ([1, -1],)),
    aten.t_copy.default: ((3, 4), ()),
    aten.transpose_copy.int: ((2, 3, 4), (0, -1)),
    aten.unbind_copy.int: ((3, 4), (-1,)),
    aten.unfold_copy.default: ((3, 5), (1, 2, 2)),
    aten.unsqueeze_copy.default: ((3, 4), (-1,)),
    aten.view_copy.default: ((2, 3, 4), ([6, 4],)),
    aten.view_as_real_copy.default: ((3, 4), ()),
}


def copy_twins() -> dict:
    """copy op → view, for every view op with a rule whose ``_copy`` twin exists in ATen."""
    rule_for(None)  # imports the rule modules, filling RULES
    twins = {}
    for view in RULES:
        if isinstance(view, torch._ops.OpOverload) and view.namespace == "aten" and view.is_view:
            copy_op = getattr(getattr(aten, f"{view._opname}_copy", None), view._overloadname, None)
            if copy_op is not None and view_of_copy(copy_op) is view:
                twins[copy_op] = view
    return twins


def test_every_copy_op_with_a_view_rule_has_a_rule_and_a_sample():
    twins = copy_twins()
    assert set(twins) - {aten.view_as_complex_copy.default} == set(SAMPLES)
    for copy_op, view in twins.items():
        assert rule_for(copy_op).family == RULES[view].family and rule_for(copy_op).op is copy_op
    assert view_of_copy(aten._to_copy.default) is None and view_of_copy(aten.slice_copy.Tensor_out) is None


class CopyOp(torch.nn.Module):
    """forward(pair) = view_as_real(op(view_as_complex(pair), *args) * 1j) (a real result: as it is)."""

    def __init__(self, op, args):
        super().__init__()
        self.op, self.args = op, args

    def forward(self, x):
        result = self.op(torch.view_as_complex(x), *self.args)
        lift = lambda t: torch.view_as_real(t * 1j) if t.is_complex() else t * 2  # noqa: E731
        return [lift(t) for t in result] if isinstance(result, (list, tuple)) else lift(result)


@pytest.mark.parametrize("op", list(SAMPLES), ids=str)
def test_copy_op_in_a_program_matches_eager(op, dtype=torch.float32):
    shape, args = SAMPLES[op]
    module = CopyOp(op, args)
    ep = torch.export.export(module, (torch.randn(*shape, 2, dtype=dtype),))  # not decomposed: the copy op stays
    assert op in {n.target for n in ep.graph.nodes}
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    x = torch.randn(*shape, 2, dtype=dtype)
    expected, got = module(x), new.module()(x)
    for e, g in zip(expected if isinstance(expected, list) else [expected], got if isinstance(got, list) else [got]):
        torch.testing.assert_close(g, e, rtol=0, atol=0)  # moves elements only: exact


@pytest.mark.parametrize("op", [*SAMPLES, aten.view_as_complex_copy.default], ids=str)
def test_copy_rule_result_is_a_fresh_contiguous_tensor(op):
    shape, args = SAMPLES.get(op, ((3, 4), ()))
    z = torch.randn(*shape, dtype=torch.complex64)
    if op is aten.view_as_complex_copy.default:
        source = torch.view_as_real(z)
        expected = op(source)
        result = rule_for(op).fn(expected, source)
    else:
        source = torch.view_as_real(z)
        expected = op(z, *args)
        result = rule_for(op).fn(expected, Pair(source), *args)
    results = result if isinstance(result, list) else [result]
    for value, eager in zip(results, expected if isinstance(expected, (list, tuple)) else [expected]):
        t = value.t if isinstance(value, Pair) else value
        assert t.is_contiguous() and t.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()
        torch.testing.assert_close(t, torch.view_as_real(eager) if eager.is_complex() else eager, rtol=0, atol=0)
