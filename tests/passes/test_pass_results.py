"""Each pass keeps what its last call did (``pass.result``, a PassResult): changed, counts, refusal."""

import torch

from aotcuda.passes import ReplaceComplexWithRealPass, ReplaceViewCopyWithViewPass


class _Rotate(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.view_as_complex(x) * 2j)


class _Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.view_as_complex(x).tanh())


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
    complex_pass(_export(_Tanh(), torch.randn(3, 2)))
    assert not complex_pass.result.changed and complex_pass.result.refusal is complex_pass.refusal
    assert complex_pass.result.refusal.op == "aten.tanh.default"
    complex_pass(_export(_Slices(), torch.randn(3, 2)))  # no complex value: nothing to do
    assert not complex_pass.result.changed and complex_pass.result.refusal is None


def test_the_view_copy_pass_counts_replaced_and_kept():
    views = ReplaceViewCopyWithViewPass()
    views(_export(_Slices(), torch.randn(3, 2)))
    assert views.result.changed and views.result.counts == {"replaced": 1, "kept": 0}
    assert views.result.summary() == "ReplaceViewCopyWithViewPass: changed (replaced 1, kept 0)"
