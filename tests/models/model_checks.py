"""Checks shared by the model tests: export + pass, complex-value scan, relative error, lowering, loading.

Relative error is ‖actual − expected‖ / ‖expected‖ over each output, in float64; the worst output counts.
"""

from __future__ import annotations

import re
import time

import pytest
import torch
import torch.utils._pytree as pytree

import aotcuda
from aotcuda.lowering.exporting import export_program
from aotcuda.models.case import Case
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


def eager(model: torch.nn.Module, args: tuple, kwargs: dict | None = None):
    with torch.no_grad():
        return model(*args, **(kwargs or {}))


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


def export_real(model: torch.nn.Module, inputs: tuple, dynamic_shapes, kwargs: dict | None = None) -> torch.export.ExportedProgram:
    """aotcuda's export step (torch.export, with the guards torch cannot prove checked over the Dim ranges:
    aotcuda.lowering.exporting) → run_decompositions → ReplaceComplexWithRealPass(strict=True)."""
    ep = export_program(model, inputs, kwargs, dynamic_shapes).run_decompositions()
    return ReplaceComplexWithRealPass(strict=True)(ep)


def to_device(values, device: str):
    """`values` (args, kwargs, or both) with every tensor in it moved to `device`."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), values)


def assert_matches_eager(case: Case, dtype, model, program, tolerance: float, device: str = "cpu") -> None:
    """`program` (an ExportedProgram's module or a loaded package) against eager `model` on fresh random
    inputs at each of case.lengths."""
    for length in case.lengths:
        args, kwargs = to_device(case.make_inputs(length, dtype), device)
        error = relative_error(program(*args, **kwargs), eager(model, args, kwargs))
        print(f"{case.name} {dtype} on {device} at length {length}: relative error {error:.1e}")
        assert error <= tolerance, f"{case.name} {dtype} on {device} at length {length}: relative error {error:.2e}"


def assert_pass_leaves_no_complex(case: Case, dtype, tolerance: float) -> None:
    """Export, decompose, rewrite strictly; no complex value may be left and `.module()` must match eager."""
    model, args, kwargs, dynamic_shapes = build_seeded(case, dtype)
    ep = export_real(model, args, dynamic_shapes, kwargs)
    assert complex_values_left(ep) == []
    assert_matches_eager(case, dtype, model, ep.module(), tolerance)


def lower_case(case: Case, dtype, device: str, directory) -> tuple[torch.nn.Module, object, object]:
    """(eager model on `device`, lowered program, loaded program): aotcuda.lower then aotcuda.load.

    Lowers with allow_fallbacks=True so that a fallback kernel and a wrong result show up as two separate
    test failures; tests assert `fallback_kernels_of(lowered) == []` themselves.
    """
    model, args, kwargs, dynamic_shapes = build_seeded(case, dtype)
    model, (args, kwargs) = model.to(device), to_device((args, kwargs), device)
    package = directory / f"{case.name}-{str(dtype).removeprefix('torch.')}-{device}.pt2"
    start = time.perf_counter()
    lowered = aotcuda.lower(
        model, args, kwargs, dynamic_shapes=dynamic_shapes, device=device, package_path=str(package), allow_fallbacks=True
    )
    program = aotcuda.load(lowered.package_path)
    print(f"\n{case.name} ({dtype}, {device}): lowered and loaded in {time.perf_counter() - start:.1f} s")
    return model, lowered, program


def fallback_kernels_of(lowered) -> list[str]:
    """The lowered program's fallback kernels outside the allow-list, each with the source line that made it."""
    return [kernel.describe() for kernel in lowered.fallback_kernels]


def case_params(cases: dict[str, Case]) -> list:
    """pytest params ((name, dtype), id "name-dtype") for every case in each of its dtypes."""
    return [
        pytest.param((name, dtype), id=f"{name}-{str(dtype).removeprefix('torch.')}")
        for name, case in cases.items()
        for dtype in case.dtypes
    ]


def assert_fails_with_documented_cause(name: str, step, match: str, cause: str, table: str) -> None:
    """Run `step()`, a case's export/pass/lower step that fails today for a documented limitation: it must
    raise an error whose text matches the regex `match` (the first error line recorded for the case).

    A step that now succeeds means a fix elsewhere lifted the limit: the test fails and says to move the case
    back to the normal (passing) cases and to update `table` (docs/models.md). A different error means the
    cause changed, and the documented one is stale.
    """
    try:
        step()
    except Exception as error:  # noqa: BLE001 - any error is checked against the documented cause below
        text = f"{type(error).__name__}: {error}"
        assert re.search(match, text), (
            f"{name} still fails, but not with its documented cause {match!r} ({cause}); it raised:\n"
            f"{text[:2000]}\nUpdate the case's recorded error and {table}."
        )
        return
    pytest.fail(f"{name} no longer fails ({cause}): a fix lifted the limit. Move {name} out of the known limits "
                f"back to the normal cases (so that its result is checked against eager) and update {table}.",
                pytrace=False)
