"""Checks shared by the model tests: export + pass, complex-value scan, relative error, lowering, loading.

Relative error is ‖actual − expected‖ / ‖expected‖ over each output, in float64; the worst output counts.
"""

from __future__ import annotations

import time

import torch

import aotcuda
from aotcuda.models.patterns import Case
from aotcuda.passes import ReplaceComplexWithRealPass

# Where the model is computed in the same precision as eager, only rounding order differs.
PATTERN_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float64: 1e-10}


def as_tuple(outputs) -> tuple[torch.Tensor, ...]:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def relative_error(actual, expected) -> float:
    """Worst ‖a − e‖ / ‖e‖ over paired outputs; shapes and dtypes must agree first."""
    actual, expected = as_tuple(actual), as_tuple(expected)
    assert len(actual) == len(expected), f"{len(actual)} outputs, eager has {len(expected)}"
    worst = 0.0
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, f"got {a.dtype}{list(a.shape)}, eager {e.dtype}{list(e.shape)}"
        assert torch.isfinite(e).all(), "eager output is not finite: the case itself is broken"
        e64, a64 = e.detach().cpu().double(), a.detach().cpu().double()
        worst = max(worst, ((a64 - e64).norm() / e64.norm()).item())
    return worst


def eager(model: torch.nn.Module, inputs: tuple):
    with torch.no_grad():
        return model(*inputs)


def _holds_complex(value) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_complex()
    if isinstance(value, (list, tuple)):
        return any(_holds_complex(v) for v in value)
    return False


def complex_values_left(ep: torch.export.ExportedProgram) -> list[str]:
    """Names of graph nodes, state entries and constants that still hold a complex value."""
    nodes = [f"node {n.name} ({n.target})" for n in ep.graph.nodes if _holds_complex(n.meta.get("val"))]
    state = [f"state {k}" for k, v in ep.state_dict.items() if _holds_complex(v)]
    constants = [f"constant {k}" for k, v in ep.constants.items() if _holds_complex(v)]
    return nodes + state + constants


def build_seeded(case: Case, dtype: torch.dtype, seed: int = 0):
    """case.build(dtype) with the global RNG seeded, so that the weights are the same every run."""
    torch.manual_seed(seed)
    return case.build(dtype)


def export_real(model: torch.nn.Module, inputs: tuple, dynamic_shapes) -> torch.export.ExportedProgram:
    """torch.export → run_decompositions → ReplaceComplexWithRealPass(strict=True)."""
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes).run_decompositions()
    return ReplaceComplexWithRealPass(strict=True)(ep)


def lower_and_load(model, inputs, dynamic_shapes, device: str, package_path) -> tuple[object, object, float]:
    """aotcuda.lower(...) then aotcuda.load(...); returns (lowered, program, seconds spent).

    Lowers with allow_fallbacks=True so that a fallback kernel and a wrong result show up as two separate
    test failures; fallback_free() then asserts that there is none.
    """
    start = time.perf_counter()
    lowered = aotcuda.lower(
        model, inputs, dynamic_shapes=dynamic_shapes, device=device, package_path=str(package_path), allow_fallbacks=True
    )
    program = aotcuda.load(lowered.package_path)
    return lowered, program, time.perf_counter() - start


def fallback_kernels_of(lowered) -> list[str]:
    """The lowered program's fallback kernels outside the allow-list, each with the source line that made it."""
    return [kernel.describe() for kernel in lowered.fallback_kernels]


def to_device(values: tuple, device: str) -> tuple:
    return tuple(v.to(device) if isinstance(v, torch.Tensor) else v for v in values)
