"""Each pass keeps what its last call did (``pass.result``, a PassResult): changed, counts, refusal; every
pass lowering runs keeps the contract (passes/result.py GraphPass)."""

import pytest
import torch

from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.lowering.pipeline import passes
from aotcuda.passes import ReplaceComplexWithRealPass, ReplaceViewCopyWithViewPass
from aotcuda.passes.result import GraphPass, PassResult


class _Rotate(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.view_as_complex(x) * 2j)


class _Eigvals(torch.nn.Module):
    def forward(self, x):  # no rule rewrites linalg_eigvals (or linalg_eig) on complex values
        return torch.view_as_real(torch.linalg.eigvals(torch.view_as_complex(x)))


class _Slices(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.slice_copy.Tensor(x, 0, 0, 2) + 1


def _export(module, *args):
    return torch.export.export(module, args).run_decompositions({})


def test_the_complex_pass_counts_what_it_rewrote_and_names_a_refusal():
    complex_pass = ReplaceComplexWithRealPass()
    complex_pass(_export(_Rotate(), torch.randn(3, 2)))
    assert complex_pass.result.changed and complex_pass.result.refusal is None
    assert complex_pass.result.counts == {"rewritten nodes": 3, "in float32": 0}  # view_as_complex, mul, view_as_real
    complex_pass(_export(_Eigvals(), torch.randn(3, 3, 2)))
    assert not complex_pass.result.changed and complex_pass.result.refusal.op == "aten.linalg_eigvals.default"
    assert not hasattr(complex_pass, "refusal")  # the refusal lives only in result
    complex_pass(_export(_Slices(), torch.randn(3, 2)))  # no complex value: nothing to do
    assert not complex_pass.result.changed and complex_pass.result.refusal is None


def test_the_view_copy_pass_counts_replaced_and_kept():
    views = ReplaceViewCopyWithViewPass()
    views(_export(_Slices(), torch.randn(3, 2)))
    assert views.result.changed and views.result.counts == {"replaced": 1, "kept": 0}
    assert views.result.summary() == "ReplaceViewCopyWithViewPass: changed (replaced 1, kept 0)"


def _every_pass():
    return passes() + [make() for profile in DEVICE_PROFILES.values() for make in profile.passes]


@pytest.mark.parametrize("graph_pass", _every_pass(), ids=lambda p: type(p).__name__)
def test_every_pass_keeps_the_contract(graph_pass):
    """A GraphPass: a fresh result before a call, a new one (of its own name) after each, the program back."""
    assert isinstance(graph_pass, GraphPass)
    assert graph_pass.result == PassResult(type(graph_pass).__name__)
    ep = _export(_Slices(), torch.randn(3, 2))
    for _ in range(2):
        before = graph_pass.result
        new = graph_pass(ep)
        assert isinstance(new, torch.export.ExportedProgram)
        assert isinstance(graph_pass.result, PassResult) and graph_pass.result.name == type(graph_pass).__name__
        assert graph_pass.result is not before
        assert graph_pass.result.refusal is None and graph_pass.result.changed == (new is not ep)
