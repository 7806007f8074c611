"""Comparison and truth rules: complex → bool (==, !=, isnan, isinf, logical_*, any;
all exports as any and logical_not).

Eager's truth of a complex value is "either part nonzero" (nan counts as nonzero), so `0+1j` is True;
two complex values are equal when both parts are. Each rule compares the parts with torch's own ops,
which promote a pair's part against a real operand exactly as eager promotes the complex value (a part
keeps the complex value's rank, so 0-dim operands still defer to dimensioned ones).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real import pair_math
from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.conversion import real_value

aten = torch.ops.aten


def parts(value) -> tuple:
    """(real, imaginary) of any operand: a Pair's parts, (x, 0) for a real tensor or number."""
    if isinstance(value, Pair):
        return value.re, value.im
    if isinstance(value, complex):
        return value.real, value.imag
    return value, 0


def truth(value):
    """The bool of an operand as eager's logical ops see it (a real tensor passes through: they cast it)."""
    return real_value(value, torch.bool) if isinstance(value, Pair) else value


@register(aten.eq.Tensor, aten.eq.Scalar)
def eq(out, a, b):
    """Both parts equal (a real operand has a zero imaginary part)."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    return torch.logical_and(ar == br, ai == bi)


@register(aten.ne.Tensor, aten.ne.Scalar)
def ne(out, a, b):
    """Either part differs (nan differs from everything, as in eager)."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    return torch.logical_or(ar != br, ai != bi)


@register(aten.isnan.default)
def isnan(out, a):
    """Either part is nan."""
    return torch.logical_or(torch.isnan(a.re), torch.isnan(a.im))


@register(aten.isinf.default)
def isinf(out, a):
    """Either part is ±inf."""
    return torch.logical_or(torch.isinf(a.re), torch.isinf(a.im))


@register(aten.logical_not.default)
def logical_not(out, a):
    """Both parts zero."""
    return torch.logical_not(truth(a))


@register(aten.logical_and.default)
def logical_and(out, a, b):
    """Both operands true (a complex one is true where either part is nonzero)."""
    return torch.logical_and(truth(a), truth(b))


@register(aten.logical_or.default)
def logical_or(out, a, b):
    """Either operand true."""
    return torch.logical_or(truth(a), truth(b))


@register(aten.logical_xor.default)
def logical_xor(out, a, b):
    """Exactly one operand true."""
    return torch.logical_xor(truth(a), truth(b))


@register(aten.any.default, aten.any.dim, aten.any.dims)
def any_(out, a, dim=None, keepdim=False):
    """any over the complex dims of the truth of a (the pair dim is already folded into it)."""
    return aten.any.dims(truth(a), _dims(dim), keepdim)


def _dims(dim) -> list[int] | None:
    """any.dim's int, any.dims' list, or None (every dim): complex dims, the same dims of the truth."""
    return [dim] if isinstance(dim, int) else dim


@register(aten.allclose.default, computes=True)
def allclose(out, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Eager's isclose on every element, then all: equal, or |a − b| finite and ≤ atol + rtol·|b| (complex
    magnitudes); with equal_nan, nan (in either part) on both sides counts as close. Returns a Python bool
    (an unbacked SymBool when traced: export itself refuses allclose, whose result steers Python)."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    close = torch.logical_and(ar == br, ai == bi)
    if equal_nan:
        close = close | (isnan(None, a) & isnan(None, b))
    error = pair_math.magnitude(ar - br, ai - bi)
    close = close | (torch.isfinite(error) & (error <= atol + rtol * pair_math.magnitude(br, bi)))
    return torch.all(close).item()


@register(aten.nonzero.default)
def nonzero(out, a):
    """The indices where either part is nonzero (the truth of a complex value)."""
    return aten.nonzero.default(truth(a))


@register(aten.nonzero_static.default)
def nonzero_static(out, a, *, size, fill_value=-1):
    """nonzero_static of the truth of each element (either part nonzero)."""
    return aten.nonzero_static.default(truth(a), size=size, fill_value=fill_value)
