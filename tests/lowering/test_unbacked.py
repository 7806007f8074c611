"""Unbacked sizes through every step of lower() that re-traces the program (issue 28, item 1): export,
the torch 2.11 sym_ite rewrite (lowering/unbacked.py), whole-tensor writes, run_decompositions (custom ops
included), and the passes (the complex pass re-traces the whole graph with make_fx).

Enumerated over the node kinds torch.export emits for data-dependent code: nonzero, .item(), masked_select,
masked_scatter after transformers' check, sum().item() checks with torch._check, torch._check_tensor_all,
unique, boolean-mask indexing, repeat_interleave by a tensor, bincount, tolist() slicing, sym_min. Each
program also rotates its data-dependent result as complex numbers (polar, mul, view_as_real), so the
complex pass re-traces a graph whose sizes are unbacked, and a buffer is written whole (copy_). The
ExportedProgram after the passes must match eager on fresh inputs (exact, or float32 rounding for the
complex product). No compile: the lowering tests compile the vision-language models that use these ops.
"""

from __future__ import annotations

import pytest
import torch

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.exporting import export_program
from aotcuda.lowering.pipeline import _decomposed, passes
from aotcuda.lowering.unbacked import sym_ite_for_symbool_casts
from aotcuda.lowering.whole_tensor_writes import convert_whole_tensor_writes


def _nonzero(x, ids):
    rows = torch.nonzero(x[:, 0] > 0).squeeze(1)
    return x[rows]


def _item_sized(x, ids):
    k = (x > 0).sum().item()
    torch._check(k >= 0)
    torch._check(k <= x.numel())
    return x.new_ones(k) * x.mean()


def _masked_select(x, ids):
    return x.masked_select(x > 0)


def _masked_scatter_after_check(x, ids):  # transformers' vision-language merge
    mask = ids == 3
    torch._check_tensor_all(mask.sum() * x.shape[-1] == 2 * x.shape[-1])
    return torch.zeros(ids.shape[0], x.shape[-1]).masked_scatter(mask.unsqueeze(-1), x[:2])


def _sum_item_check(x, ids):
    n = (ids == 3).sum().item()
    torch._check(n >= 1)
    torch._check(n <= ids.numel())
    return x[:2] * n


def _check_tensor_all(x, ids):
    torch._check_tensor_all((ids >= 0).all())
    return x + 1


def _unique(x, ids):
    return torch.unique(ids).float()


def _boolean_mask(x, ids):
    return x[ids > 2]


def _repeat_interleave(x, ids):
    return torch.repeat_interleave(x[:, 0], ids.clamp(min=0, max=3))


def _bincount(x, ids):
    return torch.bincount(ids).float()


def _tolist_slices(x, ids):
    a, b = (ids[:2] % 3 + 1).tolist()
    torch._check(a + b <= x.shape[0])
    return torch.cat([x[:a].sum(0, keepdim=True), x[a:a + b]])


def _sym_min(x, ids):
    k = (ids > 2).sum().item()
    return x[: torch.sym_min(k, 4)]


KINDS = {fn.__name__.lstrip("_"): fn for fn in (
    _nonzero, _item_sized, _masked_select, _masked_scatter_after_check, _sum_item_check, _check_tensor_all,
    _unique, _boolean_mask, _repeat_interleave, _bincount, _tolist_slices, _sym_min)}


class DataDependent(torch.nn.Module):
    """kind(x, ids), rotated as complex numbers; a buffer written whole with x's column sums."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x, ids):
        self.seen.copy_(x.sum(0))
        r = self.kind(x, ids).float()
        rotated = torch.view_as_real(torch.polar(r.abs() + 1, r) * torch.polar(torch.ones(()), torch.tensor(0.5)))
        return r, rotated, self.seen * 2


def inputs():
    """x [6, 4] with both signs; ids [6] in [0, 5] with exactly two 3s (the masked_scatter check)."""
    x = torch.randn(6, 4)
    ids = torch.randint(0, 5, (6,))
    ids[ids == 3] = 4
    ids[torch.randperm(6)[:2]] = 3
    return x, ids


def through_the_passes(model, args):
    """lower()'s steps up to the compile, in its order (lowering/pipeline.py)."""
    ep = export_program(model, args, {}, None)
    sym_ite_for_symbool_casts(ep)
    convert_whole_tensor_writes(ep)
    with torch_fixes.applied("decompose"):
        ep, untraced = _decomposed(ep)
    assert untraced == {}
    with torch_fixes.applied("passes"):
        for graph_pass in passes():
            ep = graph_pass(ep)
            assert graph_pass.result.refusal is None, graph_pass.result.summary()
    return ep


@pytest.mark.parametrize("kind", list(KINDS))
def test_data_dependent_programs_survive_every_retrace_and_match_eager(kind):
    torch.manual_seed(0)
    ep = through_the_passes(DataDependent(KINDS[kind]), inputs())
    unbacked = [n.name for n in ep.graph.nodes if n.op == "call_function" and "unbacked_bindings" in n.meta]
    assert unbacked, "the program should have data-dependent sizes"
    for seed in (1, 2):
        torch.manual_seed(seed)
        fresh = inputs()
        actual = ep.module()(*fresh)
        expected = DataDependent(KINDS[kind])(*fresh)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)
