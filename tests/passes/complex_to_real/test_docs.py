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
