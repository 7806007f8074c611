"""Library models with complex rotary embeddings (aotcuda.models.library): pass, CPU compile, CUDA compile.

transformers and diffusers are test dependencies (pinned in pyproject.toml); a model's tests skip, with
the import error as the reason, only where its library cannot be imported.

Tolerances (relative error, ‖compiled − eager‖ / ‖eager‖ over the output): whole models reorder
matmul and softmax reductions and, in bfloat16, round intermediates at other places than eager does.
- pass level (`.module()` runs the same ATen ops as eager, in the same precision): float32 1e-5,
  bfloat16 1e-2;
- compiled (AOTInductor fuses, and keeps fused intermediates in float32): float32 1e-4, bfloat16 3e-2.
The DeepSeek-V2 router weights are drawn wide (see library.widen_router_margins) so that these
differences cannot change which experts a token goes to.

One CPU compile per model and dtype (float32 and bfloat16, module-scoped fixture, 30–40 s each on a
2-core machine); the CUDA variants, marked cuda, compile each model in float32 and bfloat16 as well.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from aotcuda.models.library import LIBRARY_MODELS
from model_checks import (
    build_seeded,
    complex_values_left,
    eager,
    export_real,
    fallback_kernels_of,
    lower_and_load,
    relative_error,
    to_device,
)

LIBRARY_OF = {"deepseek_v2": "transformers", "qwen_image": "diffusers"}
PASS_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
COMPILED_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}


def require_library(name: str) -> None:
    """Skip (with the import error as the reason) where the model's library cannot be imported."""
    module = LIBRARY_OF[name]
    try:
        importlib.import_module(module)
    except ImportError as error:
        pytest.skip(f"{name} needs {module}, which cannot be imported ({error}); pip install -e '.[test]'")


def _id(name: str, dtype: torch.dtype) -> str:
    return f"{name}-{str(dtype).removeprefix('torch.')}"


CASES = [
    pytest.param((name, dtype), id=_id(name, dtype)) for name in LIBRARY_MODELS for dtype in LIBRARY_MODELS[name].dtypes
]


def compare_at_every_length(name, dtype, model, program, device: str, tolerance: float) -> None:
    case = LIBRARY_MODELS[name]
    for length in case.lengths:
        fresh = to_device(case.make_inputs(length, dtype), device)
        error = relative_error(program(*fresh), eager(model, fresh))
        print(f"{name} {dtype} on {device} at length {length}: relative error {error:.1e}")
        assert error <= tolerance, f"{name} {dtype} on {device} at length {length}: relative error {error:.2e}"


@pytest.mark.parametrize("name_and_dtype", CASES)
def test_pass_leaves_no_complex_and_matches_eager(name_and_dtype):
    name, dtype = name_and_dtype
    require_library(name)
    model, inputs, dynamic_shapes = build_seeded(LIBRARY_MODELS[name], dtype)
    ep = export_real(model, inputs, dynamic_shapes)

    assert complex_values_left(ep) == []
    compare_at_every_length(name, dtype, model, ep.module(), "cpu", PASS_TOLERANCE[dtype])


def lower_case(name: str, dtype: torch.dtype, device: str, directory):
    """(eager model on `device`, lowered program, loaded program) for one library model."""
    require_library(name)
    model, inputs, dynamic_shapes = build_seeded(LIBRARY_MODELS[name], dtype)
    model, inputs = model.to(device), to_device(inputs, device)
    package = directory / f"{_id(name, dtype)}-{device}.pt2"
    lowered, program, seconds = lower_and_load(model, inputs, dynamic_shapes, device, package)
    print(f"\n{name} ({dtype}, {device}): lowered and loaded in {seconds:.1f} s")
    return model, lowered, program


@pytest.fixture(scope="module", params=CASES)
def lowered_on_cpu(request, tmp_path_factory):
    name, dtype = request.param
    model, lowered, program = lower_case(name, dtype, "cpu", tmp_path_factory.mktemp(name))
    return name, dtype, model, lowered, program


def test_lowered_on_cpu_has_no_fallback_kernels(lowered_on_cpu):
    name, _, _, lowered, _ = lowered_on_cpu
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"


def test_lowered_on_cpu_matches_eager(lowered_on_cpu):
    name, dtype, model, _, program = lowered_on_cpu
    compare_at_every_length(name, dtype, model, program, "cpu", COMPILED_TOLERANCE[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(LIBRARY_MODELS))
def test_lowered_on_cuda_matches_eager(name, dtype, tmp_path):
    model, lowered, program = lower_case(name, dtype, "cuda", tmp_path)
    compare_at_every_length(name, dtype, model, program, "cuda", COMPILED_TOLERANCE[dtype])
    assert fallback_kernels_of(lowered) == [], f"{name} calls fallback kernels"
