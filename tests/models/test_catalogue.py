"""The catalogue of built-in programs (aotcuda.models.catalogue): every pattern is in it, and the programs
that are not patterns (the demo's attention block, the decode step) pass the pass-level check the patterns
pass (export → decompose → ReplaceComplexWithRealPass(strict) leaves no complex value, `.module()` matches
eager). Their compiled checks are the demo's and tests/models/test_decode.py's."""

from __future__ import annotations

import pytest

from aotcuda.models.catalogue import CASES
from aotcuda.models.patterns import PATTERNS
from model_checks import PATTERN_TOLERANCE, assert_pass_leaves_no_complex, case_params


def test_every_pattern_is_in_the_catalogue():
    assert {name: CASES[name] for name in PATTERNS} == PATTERNS


@pytest.mark.parametrize("name_and_dtype", case_params({k: v for k, v in CASES.items() if k not in PATTERNS}))
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    assert_pass_leaves_no_complex(CASES[name], dtype, PATTERN_TOLERANCE[dtype])
