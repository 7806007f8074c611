"""Rule policy is declared at registration (``@register(..., computes=True)``), and the scan only decides.

complex32 numerics depend on ``Rule.computes`` alone, not on the module a rule is written in; the scan
records which nodes run in float32 and leaves the rules as registered; the rewrite applies half.in_float32.
"""

import torch

from aotcuda.passes.complex_to_real import rules  # noqa: F401  (fills RULES)
from aotcuda.passes.complex_to_real.registry import RULES, rule_for
from aotcuda.passes.complex_to_real.scan import Plan, scan

from .helpers import export

aten = torch.ops.aten


def test_computing_rules_are_the_arithmetic_ones():
    """The declared set: every elementwise, elementary-function, reduction, matrix-product, linear-algebra and
    convolution/pooling rule, polar, the scatters that add or multiply (index_add, scatter_add, put, scatter with
    a reduction, scatter_reduce) and allclose (a magnitude); no rule that only moves or casts values (shape, strided, the other
    indexing rules, creation, conversion, the other comparisons, fft, control flow)."""
    computing = {op for op, rule in RULES.items() if rule.computes}
    by_family = {op for op, rule in RULES.items()
                 if rule.family in ("elementwise", "elementary", "reduction", "linalg", "linalg_embedding",
                                    "linalg_factors", "householder", "lu", "nn")}
    assert computing == by_family | {aten.polar.default, aten.index_add.default, aten.scatter_add.default,
                                     aten.put.default, aten.scatter.reduce, aten.scatter_reduce.two,
                                     aten.allclose.default}
    assert {aten.mul.Tensor, aten.sum.dim_IntList, aten.mm.default, aten.polar.default} <= computing
    assert not {aten.view.default, aten.index_select.default, aten.view_as_complex.default} & computing


def test_derived_rules_keep_the_declared_policy():
    """A *_copy view op's rule and a dim-order op's rule are as computing as the rule they come from."""
    assert rule_for(aten.permute_copy.default).computes is False
    assert rule_for(aten.alias_copy.default).computes is RULES[aten.alias.default].computes is True


class _Mixed(torch.nn.Module):
    def forward(self, z, w):
        return torch.view_as_real((z * w).reshape(-1))


def test_the_scan_decides_float32_and_leaves_the_rules_as_registered():
    z = torch.randn(3, 4, dtype=torch.complex64).to(torch.complex32)
    ep = export(_Mixed(), (z, z.clone()))
    plan = scan(ep)
    assert isinstance(plan, Plan)
    for node, rule in plan.rules.items():
        assert rule is rule_for(node.target)  # never wrapped by the scan
    upcast = {node.target for node in plan.in_float32}
    assert aten.mul.Tensor in upcast and not upcast & {aten.view.default, aten.view_as_complex.default}
