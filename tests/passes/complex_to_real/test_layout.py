"""Rule results laid out as eager lays them out (layout.py), and what goes wrong without it.

Found by an adversarial review: a DFT rule's result is a permutation of eager's layout, and a real op on a
transposed pair came out contiguous where eager kept the order. Export had already turned reshapes into
views that only eager's layout allows (a crash in the pass), and as_strided read other storage positions
than eager's (a silent wrong answer).
"""

import pytest
import torch

from aotcuda.passes.complex_to_real.layout import as_laid_out_in_eager
from aotcuda.passes.complex_to_real.pair import Pair

from .helpers import assert_matches, rewrite

aten = torch.ops.aten


class SpectrumReshaped(torch.nn.Module):
    """|rfft2(x)| flattened per batch: export makes the reshape a view of eager's contiguous result."""

    def forward(self, x):
        return torch.fft.rfft2(x).abs().reshape(x.shape[0], -1)


class SpectrumAsStrided(torch.nn.Module):
    """as_strided on the pairs of an rfft2: reads storage positions, so the layout decides the values."""

    def forward(self, x):
        return torch.view_as_real(torch.fft.rfft2(x)).as_strided((4, 60), (60, 1))


class TransposedExp(torch.nn.Module):
    """exp of a transposed complex tensor keeps eager's transposed order; as_strided and a view read it."""

    def forward(self, x):
        e = torch.view_as_complex(x).t().exp()
        return e.abs().as_strided((20,), (1,)), torch.view_as_real(e).reshape(-1)


class CondOfTransposed(torch.nn.Module):
    """Both branches give eager's transposed layout; the rewritten branches must agree as well."""

    def forward(self, x, y):
        z = torch.view_as_complex(x)
        return torch.view_as_real(torch.cond(y.sum() > 0, lambda z: z.t().exp(), lambda z: z.t() * 1, (z,)))


@pytest.mark.parametrize("module, make_args, dynamic_shapes", [
    (SpectrumReshaped(), lambda: (torch.randn(4, 6, 8),), None),
    (SpectrumReshaped(), lambda: (torch.randn(4, 6, 8),), ({0: torch.export.Dim("batch", min=2, max=16)},)),
    (SpectrumAsStrided(), lambda: (torch.randn(4, 6, 8),), None),
    (TransposedExp(), lambda: (torch.randn(4, 5, 2),), None),
    (CondOfTransposed(), lambda: (torch.randn(4, 5, 2), torch.randn(3)), None),
], ids=["rfft2_then_view", "rfft2_then_view_dynamic_batch", "rfft2_then_as_strided", "exp_of_transpose",
        "cond_of_transpose"])
def test_results_that_strides_are_read_from_match_eager(module, make_args, dynamic_shapes):
    _, new = rewrite(module, make_args(), dynamic_shapes=dynamic_shapes)
    for _ in range(2):
        args = make_args()
        expected, actual = module(*args), new.module()(*args)
        scale = max(e.abs().max().item() for e in (expected if isinstance(expected, tuple) else (expected,)))
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5 * scale)


def test_a_pair_in_another_layout_is_copied_into_eagers():
    eager = torch.randn(5, 4, dtype=torch.complex64).t()  # [4, 5], strides (1, 4)
    contiguous = Pair(torch.view_as_real(eager.contiguous()))
    laid_out = as_laid_out_in_eager(contiguous, eager)
    assert laid_out.t.stride() == (2, 8, 1) and torch.equal(laid_out.t, torch.view_as_real(eager))
    same = Pair(torch.view_as_real(eager))
    assert as_laid_out_in_eager(same, eager) is same  # nothing added where the layouts agree


def test_size_one_dims_expanded_and_empty_values_are_left_as_they_are():
    eager = torch.randn(1, 3, dtype=torch.complex64)
    odd_size_one_stride = Pair(torch.view_as_real(torch.randn(3, 1, dtype=torch.complex64).t()))
    assert as_laid_out_in_eager(odd_size_one_stride, eager) is odd_size_one_stride
    expanded = torch.randn(3).expand(4, 3)
    assert as_laid_out_in_eager(expanded.contiguous(), expanded).stride() == (3, 1)  # no copy into stride 0
    empty = torch.empty(0, 3)
    assert as_laid_out_in_eager(torch.empty(3, 0).t(), empty).stride() == torch.empty(3, 0).t().stride()


def test_the_rotary_embedding_gets_no_copy():
    """The layouts agree for the RoPE the benchmarks measure: the step adds no node there."""
    from tests.passes.complex_to_real.rope_models import LlamaRope

    q = torch.randn(2, 8, 3, 16)
    ep, new = rewrite(LlamaRope(), (q, torch.randn_like(q)))
    assert aten.copy.default not in {n.target for n in new.graph.nodes}
    assert_matches(LlamaRope()(q, q), new.module()(q, q), torch.float32)
