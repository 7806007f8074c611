"""The catalogue of built-in programs (aotcuda.models.catalogue): every pattern is in it, and the programs
that are not patterns (the demo's attention block, the decode step, the spectral filter) pass the pass-level check
the patterns pass (export → decompose → ReplaceComplexWithRealPass(strict) leaves no complex value, `.module()`
matches eager). Their compiled checks are the demo's and tests/models/test_decode.py's."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from aotcuda.models.catalogue import CASES
from aotcuda.models.patterns import PATTERNS
from aotcuda.models.spectral_filter import SpectralFilter
from model_checks import PATTERN_TOLERANCE, assert_pass_leaves_no_complex, case_params


def test_every_pattern_is_in_the_catalogue():
    assert {name: CASES[name] for name in PATTERNS} == PATTERNS


@pytest.mark.parametrize("name_and_dtype", case_params({k: v for k, v in CASES.items() if k not in PATTERNS}))
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    assert_pass_leaves_no_complex(CASES[name], dtype, PATTERN_TOLERANCE[dtype])


def _forward_body(cls: ast.ClassDef) -> str | None:
    """The statements of a class's forward, docstring left out: the program whatever the names and annotations."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            return "\n".join(ast.dump(statement) for statement in body)
    return None


def test_the_spectral_filter_is_written_once():
    """benchmarks/scripts/cpu_threads_tail.py (which times it) and tests/lowering/test_pipeline.py (which lowers it)
    each wrote the spectral filter: a change to one would have timed a program other than the one tested. Both
    import aotcuda.models.spectral_filter now, and no other class in src, tests or benchmarks has its forward."""
    ours = _forward_body(ast.parse(textwrap.dedent(inspect.getsource(SpectralFilter))).body[0])
    root = Path(__file__).resolve().parents[2]
    holders = sorted(str(path.relative_to(root)) for folder in ("src", "tests", "benchmarks")
                     for path in (root / folder).rglob("*.py")
                     for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.ClassDef) and _forward_body(node) == ours)
    assert holders == ["src/aotcuda/models/spectral_filter.py"], holders
