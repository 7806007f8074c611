"""The rotary-embedding patterns (aotcuda.models.patterns) through the pass and through AOTInductor on the CPU.

Every pattern runs every check, nothing is split off for CI time:
- pass level, each pattern in each of its dtypes (cheap): export → run_decompositions →
  ReplaceComplexWithRealPass(strict=True) leaves no complex value, and `.module()` matches eager on
  fresh random inputs at every length (a second one where the length is dynamic);
- compile and run, each pattern in each of its dtypes, one AOTInductor compile per (pattern, dtype)
  shared by a module-scoped fixture: aotcuda.lower(device="cpu") with zero fallback kernels,
  aotcuda.load, compared with eager at every length. 12 compiles of 10–20 s each on a 2-core machine.
"""

from __future__ import annotations

import pytest
import torch

from aotcuda.models.patterns import PATTERNS
from model_checks import (
    PATTERN_TOLERANCE,
    build_seeded,
    complex_values_left,
    eager,
    export_real,
    fallback_kernels_of,
    lower_and_load,
    relative_error,
)

CASES = [
    pytest.param((name, dtype), id=f"{name}-{str(dtype).removeprefix('torch.')}")
    for name, case in PATTERNS.items()
    for dtype in case.dtypes
]


@pytest.mark.parametrize("name_and_dtype", CASES)
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    case = PATTERNS[name]
    model, inputs, dynamic_shapes = build_seeded(case, dtype)
    ep = export_real(model, inputs, dynamic_shapes)

    assert complex_values_left(ep) == []
    rewritten = ep.module()
    for length in case.lengths:
        fresh = case.make_inputs(length, dtype)
        error = relative_error(rewritten(*fresh), eager(model, fresh))
        assert error <= PATTERN_TOLERANCE[dtype], f"{name} {dtype} at length {length}: relative error {error:.2e}"


@pytest.fixture(scope="module", params=CASES)
def lowered_pattern(request, tmp_path_factory):
    """(name, dtype, eager model, lowered program, loaded program): one AOTInductor CPU compile per case."""
    name, dtype = request.param
    model, inputs, dynamic_shapes = build_seeded(PATTERNS[name], dtype)
    package = tmp_path_factory.mktemp(name) / f"{name}.pt2"
    lowered, program, seconds = lower_and_load(model, inputs, dynamic_shapes, "cpu", package)
    print(f"\n{name} ({dtype}): lowered and loaded in {seconds:.1f} s")
    return name, dtype, model, lowered, program


def test_lowered_pattern_has_no_fallback_kernels(lowered_pattern):
    name, _, _, lowered, _ = lowered_pattern
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"


def test_lowered_pattern_matches_eager(lowered_pattern):
    name, dtype, model, _, program = lowered_pattern
    case = PATTERNS[name]
    for length in case.lengths:
        fresh = case.make_inputs(length, dtype)
        error = relative_error(program(*fresh), eager(model, fresh))
        assert error <= PATTERN_TOLERANCE[dtype], f"{name} {dtype} at length {length}: relative error {error:.2e}"
