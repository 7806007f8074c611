"""Programs the pass must leave as they are (strict=False, one log line) or refuse (strict=True)."""

import logging

import pytest
import torch

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, export, pair


class MutatedComplexInput(torch.nn.Module):
    def forward(self, z):
        z.mul_(2)
        return z.real


class NoRule(torch.nn.Module):
    """A general matrix's eigenvalues: no rule rewrites them on complex values (no_rule.py says why; check rule_for
    before choosing another: QR, the example until issue 27, has a rule now)."""

    def forward(self, x):
        z = torch.view_as_complex(x)
        return torch.view_as_real(torch.linalg.eigvals(z))


@torch.compiler.nested_compile_region
def _squared_pair(x):
    z = torch.view_as_complex(x)
    return torch.view_as_real(z * z)


class ComplexInInvokeSubgraph(torch.nn.Module):
    """A complex region that strict export keeps as one invoke_subgraph (the pass has no rule for it)."""

    strict_export = True

    def forward(self, x):
        return _squared_pair(x) + _squared_pair(x)


CASES = [
    ("mutated_input", MutatedComplexInput(), (torch.randn(4, dtype=torch.complex64),), "aten.mul.Tensor",
     "z.mul_(2)", "mutated complex program inputs"),
    ("no_rule", NoRule(), (pair(3, 3),), "aten.linalg_eig.default", "torch.linalg.eigvals(z)", "no rule"),
    ("invoke_subgraph", ComplexInInvokeSubgraph(), (pair(4),), "torch.ops.higher_order.invoke_subgraph",
     "_squared_pair(x) + _squared_pair(x)", "invoke_subgraph subgraphs are not supported"),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def refused(request):
    name, module, args, op, line, reason = request.param
    if getattr(module, "strict_export", False):
        return torch.export.export(module, args, strict=True).run_decompositions(), op, line, reason
    return export(module, args), op, line, reason


def test_strict_false_returns_the_program_untouched_and_logs_one_line(refused, caplog):
    ep, op, line, reason = refused
    code_before = ep.graph_module.code
    with caplog.at_level(logging.WARNING, logger="aotcuda"):
        result = ReplaceComplexWithRealPass()(ep)
    assert result is ep and ep.graph_module.code == code_before
    records = [r for r in caplog.records if r.name == "aotcuda"]
    assert len(records) == 1
    message = records[0].getMessage()
    assert "\n" not in message
    assert op in message and line in message and "test_refusals.py:" in message and reason in message


def test_strict_true_raises_with_the_same_facts(refused):
    ep, op, line, reason = refused
    with pytest.raises(UnsupportedComplexOpError) as info:
        ReplaceComplexWithRealPass(strict=True)(ep)
    error = info.value
    assert op in error.op and line in error.stack_trace and reason in error.reason
    assert op in str(error)


def test_one_unsupported_op_keeps_every_other_complex_op_unchanged(caplog):
    def fn(a):
        return torch.linalg.eigvals(a * 1j)  # mul has a rule, linalg_eig does not: nothing is rewritten

    ep = export(ComplexFn(fn), (pair(3, 3),))
    with caplog.at_level(logging.WARNING, logger="aotcuda"):
        assert ReplaceComplexWithRealPass()(ep) is ep
    assert any(n.meta["val"].dtype.is_complex for n in ep.graph.nodes
               if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor))


def test_an_argument_a_rule_does_not_cover_is_refused_before_any_change(caplog):
    # (this test's example was `a ** (1 + 1j)` until pow with a complex scalar exponent got its rule)
    ep = export(ComplexFn(lambda a: torch.linalg.eigh(a * 2)[1]), (pair(3, 3),))
    with caplog.at_level(logging.WARNING, logger="aotcuda"):
        assert ReplaceComplexWithRealPass()(ep) is ep
    assert "aten._linalg_eigh.default" in caplog.text and "only the values have a rule" in caplog.text
    assert any(n.meta["val"].dtype.is_complex for n in ep.graph.nodes  # mul has a rule, and is left as it was
               if n.target is torch.ops.aten.mul.Tensor)


def test_a_rule_that_fails_leaves_the_program_unchanged(monkeypatch, caplog):
    import dataclasses

    from aotcuda.passes.complex_to_real import registry

    def broken(out, a, b):
        raise ValueError("boom")

    op = torch.ops.aten.mul.Tensor
    monkeypatch.setitem(registry.RULES, op, dataclasses.replace(registry.rule_for(op), fn=broken))
    ep = export(ComplexFn(lambda a: a * a), (pair(3),))
    code = ep.graph_module.code
    with caplog.at_level(logging.WARNING, logger="aotcuda"):
        assert ReplaceComplexWithRealPass()(ep) is ep
    assert ep.graph_module.code == code
    assert "aten.mul.Tensor" in caplog.text and "ValueError: boom" in caplog.text
    with pytest.raises(UnsupportedComplexOpError, match="boom"):
        ReplaceComplexWithRealPass(strict=True)(ep)
