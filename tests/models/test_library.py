"""Library models with complex rotary embeddings (tests/models/library): pass, CPU compile, CUDA compile.

transformers and diffusers are test dependencies (pinned in pyproject.toml); a model's tests skip, with
the import error as the reason, only where its library cannot be imported.

Tolerances (relative error, ‖compiled − eager‖ / ‖eager‖ over the output): whole models reorder
matmul and softmax reductions and, in bfloat16, round intermediates at other places than eager does.
- pass level (`.module()` runs the same ATen ops as eager, in the same precision): float32 1e-5,
  bfloat16 1e-2;
- compiled (AOTInductor fuses, and keeps fused intermediates in float32): float32 1e-4, bfloat16 3e-2.
The DeepSeek-V2 router weights are drawn wide (see library.transformers_models.widen_router_margins) so that these
differences cannot change which experts a token goes to.

One CPU compile per model and dtype (float32 and bfloat16, module-scoped fixture, 30–40 s each on a
2-core machine); the CUDA variants, marked cuda, compile each model in float32 and bfloat16 as well.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from model_checks import (
    assert_matches_eager,
    assert_pass_leaves_no_complex,
    case_params,
    fallback_kernels_of,
    lower_case,
)
from tests.models.library import LIBRARY_MODELS

PASS_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
COMPILED_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
CASES = case_params(LIBRARY_MODELS)


def require_library(name: str) -> None:
    """Skip (with the import error as the reason) where the model's library cannot be imported."""
    module = LIBRARY_MODELS[name].library
    try:
        importlib.import_module(module)
    except ImportError as error:
        pytest.skip(f"{name} needs {module}, which cannot be imported ({error}); pip install -e '.[test]'")


@pytest.mark.parametrize("name_and_dtype", CASES)
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    require_library(name)
    assert_pass_leaves_no_complex(LIBRARY_MODELS[name], dtype, PASS_TOLERANCE[dtype])


@pytest.fixture(scope="module", params=CASES)
def lowered_on_cpu(request, tmp_path_factory):
    """(name, dtype, eager model, lowered program, loaded program) of one CPU compile."""
    name, dtype = request.param
    require_library(name)
    model, lowered, program = lower_case(LIBRARY_MODELS[name], dtype, "cpu", tmp_path_factory.mktemp(name))
    return name, dtype, model, lowered, program


def test_lowered_on_cpu_has_no_fallback_kernels(lowered_on_cpu):
    name, _, _, lowered, _ = lowered_on_cpu
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"


def test_lowered_on_cpu_matches_eager(lowered_on_cpu):
    name, dtype, model, _, program = lowered_on_cpu
    assert_matches_eager(LIBRARY_MODELS[name], dtype, model, program, COMPILED_TOLERANCE[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("name_and_dtype", CASES)
def test_lowered_on_cuda_matches_eager(name_and_dtype, tmp_path):
    name, dtype = name_and_dtype
    require_library(name)
    model, lowered, program = lower_case(LIBRARY_MODELS[name], dtype, "cuda", tmp_path)
    assert_matches_eager(LIBRARY_MODELS[name], dtype, model, program, COMPILED_TOLERANCE[dtype], device="cuda")
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"
