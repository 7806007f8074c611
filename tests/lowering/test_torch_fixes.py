"""The table of torch-version fixes (aotcuda.lowering.torch_fixes): every row is complete, names a module
that exists and a lowering step that exists, and every fix that patches torch undoes its patch."""

import importlib
import warnings

import pytest

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.pipeline import STEPS


@pytest.mark.parametrize("fix", torch_fixes.FIXES, ids=lambda fix: fix.name[:40])
def test_each_row_is_complete_and_points_at_real_code(fix):
    for field in ("name", "torch", "upstream", "detected_by", "remove_when", "where"):
        assert getattr(fix, field).strip(), f"{fix.name}: {field} is empty"
    importlib.import_module(fix.where)
    assert set(fix.steps) <= set(STEPS)
    assert (fix.apply is None) == (not fix.steps), "a fix that patches torch names its steps, and only such a fix"


def _patch_targets():
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.lowering import lowerings

    return lambda: (CppWrapperCpu.__dict__["codegen_while_loop"], dict(lowerings), list(warnings.filters))


@pytest.mark.parametrize("step", STEPS)
def test_every_patch_is_undone_when_its_step_ends(step):
    state = _patch_targets()
    before = state()
    with torch_fixes.applied(step):
        pass
    assert state() == before


def test_the_while_loop_backport_is_entered_only_where_torch_lacks_the_fix():
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    original = CppWrapperCpu.__dict__["codegen_while_loop"]
    with torch_fixes.while_loop_mutated_carries():
        patched = CppWrapperCpu.__dict__["codegen_while_loop"]
    has_fix = hasattr(CppWrapperCpu, "_get_while_loop_carried_output_names")
    assert (patched is original) == has_fix
