"""docs/ops.md is generated from the rule registry and must be up to date."""

from pathlib import Path

from aotcuda.passes.complex_to_real.docs import render
from aotcuda.passes.complex_to_real.registry import RULES, op_name

OPS_MD = Path(__file__).resolve().parents[3] / "docs" / "ops.md"


def test_committed_ops_md_is_what_the_generator_prints():
    assert OPS_MD.read_text() == render(), (
        "docs/ops.md is stale: run `python -m aotcuda.passes.complex_to_real.docs > docs/ops.md`")


def test_every_registered_op_is_listed():
    text = render()
    assert RULES and all(f"`{op_name(op)}`" in text for op in RULES)


def test_refusals_read_in_public_terms_never_as_internal_names():
    """docs/ops.md once listed `aten.pow.Tensor_Scalar`: _complex_exponent (a check without a docstring
    shown by its function name): every refusal line must say what a user writes, from its docstring."""
    import pytest

    from aotcuda.passes.complex_to_real import docs
    from aotcuda.passes.complex_to_real.scan import REFUSAL_CHECKS

    text = render()
    checks = [*REFUSAL_CHECKS, *{rule.refuses for rule in RULES.values() if rule.refuses is not None}]
    assert checks and all(check.__name__ not in text for check in checks)
    assert "`torch.pow(z, p)` with a complex scalar p" in text

    def undocumented(node):
        return None

    with pytest.raises(ValueError, match="undocumented has no docstring"):
        docs._first_line(undocumented)
