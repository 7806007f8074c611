"""Complex prod and cumprod over a dynamic dim (rules/reduction.py).

Seventh new user (2026-12-07): a linear recurrent unit's powers ``torch.cumprod(lam.expand(L, -1), 0)`` and a
``torch.cumprod(z, 1)`` with a Dim on L were refused: ``cannot rewrite aten.cumprod.default ... prod/cumprod over a
dim of dynamic size has no rule (the product tree needs its length)``, with no way out but a static length. The scan
now runs the rounds the Dim's max needs (a round whose shift passes a call's length multiplies by ones), and prod
over a dynamic dim is the scan's last product; a Dim without a max is refused with that fix.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, export


def rewritten(fn, example, dynamic_shapes, n_complex=1):
    module = ComplexFn(fn, n_complex)
    ep = export(module, example, {"args": dynamic_shapes})
    return module, ReplaceComplexWithRealPass(strict=True)(ep)


def assert_eagers(module, new, *args):
    """Products in another order than eager's loop: compared in double precision, relative to the norm."""
    expected = module(*[a.double() if a.is_floating_point() else a for a in args])
    actual = new.module()(*args)
    for e, a in zip(expected if isinstance(expected, tuple) else (expected,),
                    actual if isinstance(actual, tuple) else (actual,)):
        assert a.shape == e.shape
        assert ((a.double() - e).norm() / e.norm()).item() < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cumprod_and_prod_over_a_dynamic_dim_match_eager_at_every_length(dtype):
    length = Dim("length", min=2, max=40)

    def products(z):
        return (torch.cumprod(z, 1), torch.cumprod(z, -1), torch.prod(z, 1), torch.prod(z, -1, keepdim=True),
                z.prod(), torch.cumprod(z, 0))

    module, new = rewritten(products, (torch.randn(3, 6, 2, dtype=dtype),), ({1: length},))
    for n in (2, 3, 6, 17, 32, 33, 40):
        assert_eagers(module, new, torch.randn(3, n, 2, dtype=dtype) * 0.9)


def test_a_linear_recurrent_units_powers_over_a_dynamic_length_match_eager():
    """The user's program: lam^1 .. lam^L by cumprod over the sequence, L dynamic."""
    def powers(lam, x):
        return torch.cumprod(lam.expand(x.shape[1], -1), 0) * x.to(lam.dtype)

    module, new = rewritten(powers, (torch.randn(4, 2) * 0.5, torch.randn(2, 6, 4)),
                            (None, {1: Dim("L", min=2, max=64)}))
    for n in (2, 9, 64):
        assert_eagers(module, new, torch.randn(4, 2) * 0.5, torch.randn(2, n, 4))


def test_a_dynamic_dim_without_a_max_is_refused_with_the_fix():
    module = ComplexFn(lambda z: torch.cumprod(z, 1))
    ep = export(module, (torch.randn(3, 6, 2),), {"args": ({1: Dim("length")},)})
    with pytest.raises(UnsupportedComplexOpError) as caught:
        ReplaceComplexWithRealPass(strict=True)(ep)
    message = str(caught.value)
    assert "prod/cumprod over dim 1 of dynamic size" in message and "with no upper bound" in message, message
    assert "give its torch.export.Dim a max" in message, message


@pytest.mark.parametrize("length", [0, 1])
@pytest.mark.parametrize("fn", [lambda z: torch.cumprod(z, 1), lambda z: torch.prod(z, 1),
                                lambda z: torch.prod(z, 1, keepdim=True)], ids=["cumprod", "prod", "prod keepdim"])
def test_products_over_a_dim_of_length_0_or_1_are_new_tensors_carrying_their_source_line(fn, length):
    """fix39: a scan with no round (cumprod over a length of 0 or 1) and a product tree of one factor gave back their
    operand, so the rule added no node: the helper found the op's source line lost (its check is right), and the
    program's output was its input (cumprod, prod with keepdim) or a view of it (prod), where eager's result is a new
    tensor: a write into it wrote into the caller's input. Now a new tensor, matching eager."""
    from .helpers import check

    x = torch.randn(3, length, 4, 2)
    new = check(fn, x)  # exports, rewrites strictly, checks every source line kept, compares with eager
    out = new.module()(x)
    assert out.numel() == 0 or out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
