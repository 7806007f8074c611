"""The rotary-embedding patterns (aotcuda.models.patterns) through the pass and through AOTInductor on the CPU.

Every pattern runs every check, in each of its dtypes; nothing is split off for CI time:
- pass level (cheap): export → run_decompositions → ReplaceComplexWithRealPass(strict=True) leaves no
  complex value, and `.module()` matches eager on fresh random inputs at every length (a second one
  where the length is dynamic);
- compile and run: one AOTInductor compile per (pattern, dtype), shared by a module-scoped fixture:
  aotcuda.lower(device="cpu") with zero fallback kernels, aotcuda.load, compared with eager at every
  length. 12 compiles of 10–20 s each on a 2-core machine; the whole module takes about 3 minutes there.
"""

from __future__ import annotations

import pytest

from aotcuda.models.patterns import PATTERNS
from model_checks import (
    PATTERN_TOLERANCE,
    assert_matches_eager,
    assert_pass_leaves_no_complex,
    case_params,
    fallback_kernels_of,
    lower_case,
)

CASES = case_params(PATTERNS)


@pytest.mark.parametrize("name_and_dtype", CASES)
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    assert_pass_leaves_no_complex(PATTERNS[name], dtype, PATTERN_TOLERANCE[dtype])


@pytest.fixture(scope="module", params=CASES)
def lowered_pattern(request, tmp_path_factory):
    """(name, dtype, eager model, lowered program, loaded program) of one CPU compile."""
    name, dtype = request.param
    model, lowered, program = lower_case(PATTERNS[name], dtype, "cpu", tmp_path_factory.mktemp(name))
    return name, dtype, model, lowered, program


def test_lowered_pattern_has_no_fallback_kernels(lowered_pattern):
    name, _, _, lowered, _ = lowered_pattern
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"


def test_lowered_pattern_matches_eager(lowered_pattern):
    name, dtype, model, _, program = lowered_pattern
    assert_matches_eager(PATTERNS[name], dtype, model, program, PATTERN_TOLERANCE[dtype])
