"""The diffusers suite (tests/models/library: diffusers_suite, diffusers_video_audio): each library class exported as its pipeline
calls it, then ReplaceComplexWithRealPass, lower() + load() in a fresh process (two cases), and CUDA.

Every case is built once per module (fixture `exported`): seeded random weights, one eager call first (Z-Image
and AnyFlow cache their rotary tables on the first call; exporting first would leave FakeTensors in the
eager model's cache), then torch.export under torch.no_grad() as a pipeline runs. Tolerances: relative error
1e-5 for the ExportedProgram and after the pass (same ATen ops, float32), 1e-4 compiled (Inductor reorders
reductions). diffusers is a test dependency; without it every test here skips and says so.

A case whose call cannot export (Case.export_error, the first line of torch.export's error) is not in
the normal tests: test_known_limits_fail_with_their_documented_cause runs the same export and asserts that
error; a fix elsewhere makes it fail with a message to move the case back (clear export_error).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.utils._pytree as pytree

import aotcuda
from aotcuda.passes import ReplaceComplexWithRealPass
from model_checks import assert_fails_with_documented_cause, complex_values_left, relative_error
from tests.models.library import DIFFUSERS_HEAVY, DIFFUSERS_SUITE

EXPORT_TOLERANCE, COMPILED_TOLERANCE = 1e-5, 1e-4
FRESH_PROCESS_CASES = ("qwen_image",)


TABLE = "docs/models.md (diffusers table)"
CASES = [name for name, case in DIFFUSERS_SUITE.items() if not case.export_error]
KNOWN_LIMITS = [name for name, case in DIFFUSERS_SUITE.items() if case.export_error]
# Too slow to export in CI (DIFFUSERS_HEAVY): run by the CUDA test only, which exports, passes and compiles them.
CUDA_CASES = CASES + [name for name, case in DIFFUSERS_HEAVY.items() if not case.export_error]


def tensors_of(outputs) -> tuple[torch.Tensor, ...]:
    return tuple(leaf for leaf in pytree.tree_leaves(outputs) if isinstance(leaf, torch.Tensor))


def run(model, args, kwargs):
    with torch.no_grad():
        return model(*args, **kwargs)


def build(name: str, device: str = "cpu"):
    """(case, eager model, example args, kwargs, dynamic_shapes), warmed up by one eager call on `device`."""
    pytest.importorskip("diffusers", reason=f"{name} needs diffusers (pip install -e '.[test]'; on the H200 "
                                            "install the carried diffusers wheel with --no-deps)")
    case = {**DIFFUSERS_SUITE, **DIFFUSERS_HEAVY}[name]
    torch.manual_seed(0)
    model, args, kwargs, dynamic_shapes = case.build(torch.float32)
    model = model.to(device)
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), (args, kwargs))
    run(model, args, kwargs)
    return case, model, args, kwargs, dynamic_shapes


def fresh_inputs(case, length: int, device: str = "cpu"):
    torch.manual_seed(1000 + length)
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), case.make_inputs(length, torch.float32))


def export(model, args, kwargs, dynamic_shapes) -> torch.export.ExportedProgram:
    """torch.export under torch.no_grad(), as a pipeline runs, then run_decompositions()."""
    with torch.no_grad():
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    return ep.run_decompositions()


@pytest.fixture(scope="module", params=CASES)
def exported(request):
    """(case, eager model, ExportedProgram after run_decompositions) of one diffusers class."""
    case, model, args, kwargs, dynamic_shapes = build(request.param)
    return case, model, export(model, args, kwargs, dynamic_shapes)


@pytest.mark.parametrize("name", KNOWN_LIMITS)
def test_known_limits_fail_with_their_documented_cause(name):
    """The export the fixture runs raises the first error line the case records (export_error)."""
    case, model, args, kwargs, dynamic_shapes = build(name)
    assert_fails_with_documented_cause(name, lambda: export(model, args, kwargs, dynamic_shapes),
                                       re.escape(case.export_error), f"{case.notes} (export_error)",
                                       f"its export_error in tests/models/library and {TABLE}")


def assert_matches_eager_at_every_length(case, model, program, tolerance: float, device: str = "cpu") -> None:
    for length in case.lengths:
        args, kwargs = fresh_inputs(case, length, device)
        error = relative_error(tensors_of(run(program, args, kwargs)), tensors_of(run(model, args, kwargs)))
        print(f"{case.name} on {device} at length {length}: relative error {error:.1e}")
        assert error <= tolerance, f"{case.name} at length {length}: relative error {error:.2e}"


def test_exported_program_matches_eager(exported):
    case, model, ep = exported
    assert_matches_eager_at_every_length(case, model, ep.module(), EXPORT_TOLERANCE)


def test_pass_leaves_no_complex_and_matches_eager(exported):
    case, model, ep = exported
    real = ReplaceComplexWithRealPass(strict=True)(ep)
    assert complex_values_left(real) == []
    assert_matches_eager_at_every_length(case, model, real.module(), EXPORT_TOLERANCE)


def test_every_case_says_why_it_is_static():
    """A case with one length is static: its notes must say which library line makes it so."""
    for case in (*DIFFUSERS_SUITE.values(), *DIFFUSERS_HEAVY.values()):
        assert case.dynamic or "static" in case.notes or case.export_error, f"{case.name}: why is it static?"


# Runs the package on saved inputs in a process that has imported neither diffusers nor the model.
RUN_SAVED = textwrap.dedent("""
    import json, sys, torch, aotcuda
    import torch.utils._pytree as pytree
    package, inputs_path, outputs_path = sys.argv[1:]
    calls = torch.load(inputs_path)
    program = aotcuda.load(package)
    outputs = [[leaf for leaf in pytree.tree_leaves(program(*args, **kwargs)) if isinstance(leaf, torch.Tensor)]
               for args, kwargs in calls]
    torch.save(outputs, outputs_path)
    print(json.dumps({"diffusers_imported": "diffusers" in sys.modules}))
""")


@pytest.mark.parametrize("name", FRESH_PROCESS_CASES)
def test_lowered_package_runs_in_a_fresh_process_and_matches_eager(name, tmp_path):
    case, model, args, kwargs, dynamic_shapes = build(name)
    lowered = aotcuda.lower(model, args, kwargs, dynamic_shapes=dynamic_shapes, device="cpu",
                            package_path=str(tmp_path / f"{name}.pt2"), allow_fallbacks=True)
    assert [k.describe() for k in lowered.fallback_kernels] == []
    calls = [fresh_inputs(case, length) for length in case.lengths]
    torch.save(calls, tmp_path / "inputs.pt")
    done = subprocess.run(
        [sys.executable, "-c", RUN_SAVED, lowered.package_path, str(tmp_path / "inputs.pt"), str(tmp_path / "out.pt")],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"diffusers_imported": False}
    for (call_args, call_kwargs), outputs in zip(calls, torch.load(tmp_path / "out.pt")):
        error = relative_error(tuple(outputs), tensors_of(run(model, call_args, call_kwargs)))
        print(f"{name} in a fresh process: relative error {error:.1e}")
        assert error <= COMPILED_TOLERANCE


@pytest.mark.cuda
@pytest.mark.parametrize("name", CUDA_CASES)
def test_lowered_on_cuda_has_no_fallback_kernels_and_matches_eager(name, tmp_path):
    case, model, args, kwargs, dynamic_shapes = build(name, "cuda")
    with torch.no_grad():
        lowered = aotcuda.lower(model, args, kwargs, dynamic_shapes=dynamic_shapes, device="cuda",
                                package_path=str(tmp_path / f"{name}.pt2"), allow_fallbacks=True)
    assert [k.describe() for k in lowered.fallback_kernels] == [], f"{name} calls fallback kernels"
    assert_matches_eager_at_every_length(case, model, aotcuda.load(lowered.package_path), COMPILED_TOLERANCE, "cuda")
