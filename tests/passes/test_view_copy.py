"""ReplaceViewCopyWithViewPass on ExportedPrograms written in the copy-op dialect, against eager."""

import pytest
import torch

from aotcuda.passes.view_copy import VIEW_OF_COPY, ReplaceViewCopyWithViewPass

aten = torch.ops.aten


def _targets(ep):
    return {n.target for n in ep.graph.nodes if n.op == "call_function"}


def _relative_error(actual, expected):
    return ((actual - expected).norm() / expected.norm().clamp_min(1e-30)).item()


class EveryCopyKind(torch.nn.Module):
    """One of each view-copy op, each feeding the next, in the copy dialect."""

    def forward(self, x):
        a = aten.slice_copy.Tensor(x, 1, 1, 5)            # [4, 4, 6]
        b = aten.permute_copy.default(a, [2, 0, 1])        # [6, 4, 4]
        c = aten.transpose_copy.int(b, 0, 1)               # [4, 6, 4]
        d = aten.view_copy.default(c.clone(memory_format=torch.contiguous_format), [4, 24])
        e = aten.t_copy.default(d)                          # [24, 4]
        f = aten.unsqueeze_copy.default(e, 0)              # [1, 24, 4]
        g = aten.expand_copy.default(f, [3, 24, 4])
        h = aten.squeeze_copy.dims(aten.select_copy.int(g, 0, 1).unsqueeze(0), [0])  # [24, 4]
        i = aten.alias_copy.default(h)
        j = aten.detach_copy.default(i)
        p, q = aten.unbind_copy.int(aten.split_copy.Tensor(j, 12)[1], 1)[:2]
        r = aten.diagonal_copy.default(x[:, :4, :4])
        s = aten.squeeze_copy.dim(aten.unsqueeze_copy.default(r, 1), 1)
        t = aten.squeeze_copy.default(aten.unsqueeze_copy.default(s, 0))
        return p * 2 + q, t.sin(), g.sum(0)


def test_every_copy_op_becomes_its_view_and_matches_eager():
    module = EveryCopyKind()
    x = torch.randn(4, 6, 6)
    ep = torch.export.export(module, (x,), strict=False)
    before = _targets(ep)
    assert before & set(VIEW_OF_COPY), "the program should be in the copy dialect"
    view_pass = ReplaceViewCopyWithViewPass()
    out = view_pass(ep)

    assert not _targets(out) & set(VIEW_OF_COPY)
    assert view_pass.kept == []
    assert _targets(ep) == before, "the argument program must stay as it was"
    fresh = torch.randn(4, 6, 6)
    for got, want in zip(out.module()(fresh), module(fresh)):
        assert got.shape == want.shape
        assert _relative_error(got, want) < 1e-6


def test_meta_val_has_the_views_strides():
    class Transposed(torch.nn.Module):
        def forward(self, x):
            return aten.transpose_copy.int(x, 0, 1) + 1

    ep = ReplaceViewCopyWithViewPass()(torch.export.export(Transposed(), (torch.randn(3, 5),), strict=False))
    (node,) = [n for n in ep.graph.nodes if n.target == aten.transpose.int]
    assert node.meta["val"].stride() == (1, 5)
    assert node.meta.get("stack_trace") and "transpose_copy" in node.meta["stack_trace"]


def test_view_copy_of_a_non_contiguous_view_stays_a_copy():
    """A copy is contiguous, a transpose is not: view_copy after it cannot become a view."""

    class Flatten(torch.nn.Module):
        def forward(self, x):
            return aten.view_copy.default(aten.transpose_copy.int(x, 0, 1), [-1]) * 2

    module = Flatten()
    ep = torch.export.export(module, (torch.randn(3, 5),), strict=False)
    view_pass = ReplaceViewCopyWithViewPass()
    out = view_pass(ep)
    assert {aten.transpose.int, aten.view_copy.default} <= _targets(out)
    assert len(view_pass.kept) == 1 and len(view_pass.replaced) == 1
    x = torch.randn(3, 5)
    assert torch.equal(out.module()(x), module(x))


class MutatesTheCopy(torch.nn.Module):
    """y is a copy of a slice of x; writing y must not change x (nor the returned x + 0)."""

    def forward(self, x):
        y = aten.slice_copy.Tensor(x, 0, 0, 2)
        y.add_(10.0)
        z = aten.select_copy.int(x, 0, 3)  # same base, so it stays a copy as well (conservative)
        return y, x + 0, z


def test_mutated_copy_stays_a_copy_and_matches_eager():
    module = MutatesTheCopy()
    ep = torch.export.export(module, (torch.randn(4, 3),), strict=False)
    assert aten.add_.Tensor in _targets(ep), "export should keep the in-place op in this dialect"
    view_pass = ReplaceViewCopyWithViewPass()
    out = view_pass(ep)
    assert {aten.slice_copy.Tensor, aten.select_copy.int} <= _targets(out)
    assert len(view_pass.kept) == 2 and view_pass.replaced == []
    x = torch.randn(4, 3)
    for got, want in zip(out.module()(x.clone()), module(x.clone())):
        assert torch.equal(got, want)


def test_copy_of_a_mutated_buffer_stays_a_copy():
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(4, 3))

        def forward(self, x):
            before = aten.slice_copy.Tensor(self.cache, 0, 0, 4)
            self.cache.add_(x)
            return before * 1, self.cache * 1

    ep = torch.export.export(Cache(), (torch.randn(4, 3),), strict=False).run_decompositions()
    view_pass = ReplaceViewCopyWithViewPass()
    out = view_pass(ep)
    assert aten.slice_copy.Tensor in _targets(out)
    eager, exported = Cache(), out.module()
    for _ in range(2):  # the second call sees the buffer written by the first
        x = torch.randn(4, 3)
        for got, want in zip(exported(x), eager(x)):
            assert torch.equal(got, want)


def test_functionalized_program_has_no_mutation_left_so_copies_become_views():
    module = MutatesTheCopy()
    ep = torch.export.export(module, (torch.randn(4, 3),), strict=False).run_decompositions()
    view_pass = ReplaceViewCopyWithViewPass()
    out = view_pass(ep)
    assert view_pass.kept == [] and len(view_pass.replaced) == 2
    x = torch.randn(4, 3)
    for got, want in zip(out.module()(x.clone()), module(x.clone())):
        assert torch.equal(got, want)


def test_program_without_copies_is_returned_as_is():
    ep = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),), strict=False)
    assert ReplaceViewCopyWithViewPass()(ep) is ep


@pytest.mark.parametrize("name", ["slice", "select", "view", "permute", "expand", "unsqueeze", "squeeze",
                                  "transpose", "t", "alias", "detach", "unbind", "split", "view_as_real",
                                  "view_as_complex"])
def test_table_covers(name):
    copies = {op.name() for op in VIEW_OF_COPY}
    assert any(c.startswith(f"aten::{name}_copy") for c in copies)
    for copy_op, view_op in VIEW_OF_COPY.items():
        assert view_op.is_view and copy_op.name().replace("_copy", "", 1) == view_op.name()
