"""The table of torch-version fixes (aotcuda.lowering.torch_fixes): every row is complete, names a module
that exists and a lowering step that exists, and every fix that patches torch undoes its patch."""

import importlib
import warnings

import pytest
import torch

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
    from torch._inductor.codecache import AotCodeCompiler
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.lowering import lowerings

    from torch._inductor.fx_passes import joint_graph
    from torch.utils._sympy.functions import MinMaxBase

    repeat_interleave = torch.ops.aten.repeat_interleave.self_int
    return lambda: (CppWrapperCpu.__dict__["codegen_while_loop"], dict(lowerings), list(warnings.filters),
                    torch.backends.opt_einsum.enabled, dict(repeat_interleave.py_kernels),
                    MinMaxBase.__dict__["_find_localzeros"], joint_graph.__dict__["remove_no_ops"],
                    AotCodeCompiler.__dict__["compile"])


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


def test_the_export_step_turns_opt_einsums_contraction_order_off_and_back():
    enabled = torch.backends.opt_einsum.enabled
    with torch_fixes.applied("export"):
        assert torch.backends.opt_einsum.enabled is False
    assert torch.backends.opt_einsum.enabled == enabled


def test_lower_exports_with_opt_einsum_off():
    """lower() enters the export step's fixes: a model that looks at the flag while it is traced, then stops
    the lowering (no compile)."""
    import aotcuda

    class Seen(Exception):
        pass

    class LooksAtTheFlag(torch.nn.Module):
        def forward(self, x):
            raise Seen(torch.backends.opt_einsum.enabled)

    with pytest.raises(Seen) as seen:
        aotcuda.lower(LooksAtTheFlag(), (torch.randn(2),), device="cpu")
    assert seen.value.args == (False,)


class RepeatByFrames(torch.nn.Module):
    """diffusers' UNet3DConditionModel: the time embedding repeated by the frame count, with output_size."""

    def forward(self, emb, sample):
        frames = sample.shape[2]
        return emb.repeat_interleave(frames, dim=0, output_size=emb.shape[0] * frames) * 2


def test_repeat_interleave_by_a_dynamic_frame_count_stays_dynamic_through_export_and_decompose():
    from torch.export import Dim

    from aotcuda.lowering.decompositions import decomposition_table

    with torch_fixes.applied("export"):
        ep = torch.export.export(RepeatByFrames(), (torch.randn(2, 8), torch.randn(1, 4, 3, 8, 8)),
                                 dynamic_shapes=(None, {2: Dim("frames", min=2, max=16)}), strict=False)
    with torch_fixes.applied("decompose"):
        ep = ep.run_decompositions(decomposition_table())
    assert torch.ops.aten.repeat_interleave.self_int not in {node.target for node in ep.graph.nodes}
    for frames in (2, 5, 16):
        emb, sample = torch.randn(2, 8), torch.randn(1, 4, frames, 8, 8)
        assert torch.equal(ep.module()(emb, sample), RepeatByFrames()(emb, sample)), frames


@pytest.mark.parametrize("shape, repeats, dim", [((2, 3), 4, 0), ((2, 3), 2, 1), ((2, 3), 3, -1), ((2, 3), 2, None),
                                                 ((), 3, None), ((), 2, 0), ((2, 3), 2, 2), ((2, 0, 3), 2, 1),
                                                 ((2, 3), 0, 0)])
def test_the_repeat_interleave_formula_matches_eager(shape, repeats, dim):
    x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    try:
        expected = x.repeat_interleave(repeats, dim)
    except IndexError:
        with pytest.raises(IndexError):
            torch_fixes._repeat_interleave_expanded(x, repeats, dim)
        return
    got = torch_fixes._repeat_interleave_expanded(x, repeats, dim, output_size=expected.shape[0 if dim is None else dim])
    assert torch.equal(got, expected) and got.is_contiguous()


def test_the_repeat_interleave_formula_checks_output_size_as_eager_does():
    with pytest.raises(RuntimeError, match="output_size 5 is not 2 \\* 2"):
        torch_fixes._repeat_interleave_expanded(torch.zeros(2), 2, 0, output_size=5)


def test_min_and_max_of_two_multiples_of_one_size_collapse_in_every_step():
    import sympy
    from torch.utils._sympy.functions import Max, Min

    s = sympy.Symbol("s", integer=True, nonnegative=True)
    n = sympy.Symbol("n", integer=True, nonpositive=True)
    t = sympy.Symbol("t", integer=True)
    for step in ("export", "decompose", "passes", "compile"):
        with torch_fixes.applied(step):
            assert (Min(16 * s, 32 * s), Max(16 * s, 32 * s)) == (16 * s, 32 * s)
            assert (Min(16 * n, 32 * n), Max(16 * n, 32 * n)) == (32 * n, 16 * n)
            assert Min(16 * t, 32 * t).func is Min  # sign unknown: left as it is
            assert Min(16 * s, 32 * s, 4).func is Min  # a number among them: torch 2.13 leaves it too


class CondEndingInAViewTimesOne(torch.nn.Module):
    """A cond whose false branch returns a column of a product times 1.0: the view at storage offset 1 that
    torch 2.14's remove_no_ops exposed (test_control_flow.py's complex cond, written with real tensors)."""

    def forward(self, p, y):
        def true_branch(p, y):
            return p[..., 0].abs() + y

        def false_branch(p, y):
            return (p * p)[..., 1] * 1.0

        return torch.cond(y.sum() > 0, true_branch, false_branch, (p, y))


def test_a_cond_branch_returning_a_view_times_one_lowers_and_matches_eager(tmp_path):
    """Failed to compile on torch 2.14.1 and 2.15.0 without identity_arithmetic_keeps_layout ("When merging two
    branches' output in torch.cond, expected same storage_offset but got 0 and 1")."""
    import aotcuda

    module = CondEndingInAViewTimesOne()
    lowered = aotcuda.lower(module, (torch.randn(4, 2), torch.randn(4)), device="cpu",
                            package_path=tmp_path / "cond.pt2")
    program = lowered.load()
    for sign in (1, -1, 1, -1):
        p, y = torch.randn(4, 2), torch.randn(4).abs() * sign
        torch.testing.assert_close(program(p, y), module(p, y), rtol=0, atol=0)


def _identity_graph(base: torch.Tensor, view, times: int = 1) -> torch.fx.GraphModule:
    """x → view(x) * 1.0 (`times` times) → output, with real tensors as metadata."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(view, (x,))
    x.meta["val"], node.meta["val"] = base, view(base)
    for _ in range(times):
        node = graph.call_function(torch.ops.aten.mul.Tensor, (node, 1.0))
        node.meta["val"] = view(base) * 1.0
    graph.output((node,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _output_layout(gm: torch.fx.GraphModule) -> tuple:
    """(stride, storage offset) the graph's output has when run, and what its metadata claims."""
    (node,) = gm.graph.output_node().args[0]
    ran = gm(torch.randn(4, 2))[0]
    claimed = node.meta["val"]
    return (ran.stride(), ran.storage_offset()), (claimed.stride(), claimed.storage_offset())


def test_identity_removal_keeps_a_node_whose_layout_differs_and_removes_the_others():
    """With the wrapper, the graph's output metadata is the layout it computes, on every torch; an identity of
    the same layout is removed or kept exactly as the installed pass does without the wrapper."""
    from torch._inductor.fx_passes import joint_graph

    from aotcuda.lowering.identity_arithmetic import _keeping_layout

    wrapped = _keeping_layout(joint_graph.remove_no_ops)
    for times in (1, 3):  # 3: a chain, whose later identities the pass removes after the first
        offset_view = _identity_graph(torch.zeros(4, 2), lambda t: torch.ops.aten.select.int(t, 1, 1), times)
        wrapped(offset_view, set(), set())
        offset_view.recompile()
        ran, claimed = _output_layout(offset_view)
        assert ran == claimed == ((1,), 0), offset_view.code

    same_layout = [_identity_graph(torch.zeros(4, 2), torch.ops.aten.alias.default) for _ in range(2)]
    wrapped(same_layout[0], set(), set())
    joint_graph.remove_no_ops(same_layout[1], set(), set())
    assert [str(gm.graph) for gm in (same_layout[0], same_layout[1])] == [str(same_layout[1].graph)] * 2
