"""Elementary-function rules: trigonometric, hyperbolic and their inverses, log1p, expm1, log2, log10, sigmoid,
rsqrt and pow with a tensor exponent.

Each is one call into pair_elementary (the formulas, and why each is accurate) or a composition of rules that
exist (sigmoid is 1 / (1 + exp(−z)) as eager computes it, with the rules' division). Unary functions take one
Pair; their result is a Pair of its dtype (eager keeps the dtype).
"""

from __future__ import annotations

import cmath
import math

import torch

from aotcuda.passes.complex_to_real import pair_elementary, pair_math
from aotcuda.passes.complex_to_real.pair import Pair, scalar_pair
from aotcuda.passes.complex_to_real.pair_algebra import as_addend, cast, log_pair, multiply, result_dtype
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


def of_parts(function):
    """The rule of a unary complex function `function(re, im) -> pair tensor` from pair_elementary."""

    def rule(out, a):
        return Pair(function(a.re, a.im))

    rule.__doc__ = (function.__doc__ or "").strip().splitlines()[0]
    rule.__name__ = rule.__qualname__ = function.__name__
    return rule


for _op, _function in (
    (aten.sin.default, pair_elementary.sin), (aten.cos.default, pair_elementary.cos),
    (aten.tan.default, pair_elementary.tan), (aten.sinh.default, pair_elementary.sinh),
    (aten.cosh.default, pair_elementary.cosh), (aten.tanh.default, pair_elementary.tanh),
    (aten.asin.default, pair_elementary.asin), (aten.acos.default, pair_elementary.acos),
    (aten.atan.default, pair_elementary.atan), (aten.asinh.default, pair_elementary.asinh),
    (aten.acosh.default, pair_elementary.acosh), (aten.atanh.default, pair_elementary.atanh),
    (aten.log1p.default, pair_elementary.log1p), (aten.expm1.default, pair_elementary.expm1),
):
    register(_op, computes=True)(of_parts(_function))


@register(aten.log2.default, computes=True)
def log2(out, a):
    """log z / log 2, as eager divides (both parts by the real log 2)."""
    return Pair(log_pair(a).t / math.log(2))


@register(aten.log10.default, computes=True)
def log10(out, a):
    """log z / log 10, as eager divides (both parts by the real log 10)."""
    return Pair(log_pair(a).t / math.log(10))


@register(aten.sigmoid.default, computes=True)
def sigmoid(out, a):
    """1 / (1 + exp(−z)), as eager's kernel computes it, divided as `div` divides."""
    e = pair_math.exp(-a.re, -a.im)
    one = scalar_pair(1, 0, a.dtype, a.t.device)
    return Pair(pair_math.divide(one, e + one))


@register(aten.rsqrt.default, computes=True)
def rsqrt(out, a):
    """1 / sqrt z, divided as `div` divides."""
    return Pair(pair_math.divide(scalar_pair(1, 0, a.dtype, a.t.device), pair_math.sqrt(a.re, a.im)))


@register(aten.pow.Tensor_Tensor, aten.pow.Scalar, computes=True)
def pow_tensor(out, a, exponent):
    """exp(exponent · log a) (C's cpow), complex64 in float64 (the rounding of a large exponent · log a, which
    exp turns into a relative error, would exceed float32's); either operand may be real or a number."""
    dtype = result_dtype(out)
    wide = torch.float64 if dtype == torch.float32 else dtype
    if isinstance(a, (Pair, torch.Tensor)):
        log_a = log_pair(Pair(as_addend(cast(a, wide), wide, out.device)))
    else:  # a Python base: its log a number (a real one scales each part of the exponent on its own)
        log_a = cmath.log(a) if a != 0 else complex(-math.inf, 0)
        log_a = log_a.real if log_a.imag == 0 else log_a
    product = multiply(log_a, cast(exponent, wide), wide)
    product = product if isinstance(product, Pair) else Pair(as_addend(product, wide, out.device))
    return Pair(pair_math.exp(product.re, product.im).to(dtype))


@register(aten.exp2.default, computes=True)
def exp2(out, a):
    """2^z = exp(z · log 2), each part scaled by the real log 2; complex64 in float64, as pow (the rounding of
    y · log 2 is a relative error of the result's smaller part: 2^(100 + 100i) was 1.2e-5 off in float32)."""
    wide = a.t.double() if a.dtype == torch.float32 else a.t
    return Pair(pair_math.exp(wide[..., 0] * math.log(2), wide[..., 1] * math.log(2)).to(a.dtype))


@register(aten.ldexp.Tensor, computes=True)
def ldexp(out, a, other):
    """z · 2^other as eager: z · exp2(other), a real exponent scaling both parts, a complex one by 2^other's pair."""
    dtype = result_dtype(out)
    factor = exp2(out, cast(other, dtype)) if isinstance(other, Pair) else torch.exp2(other.to(dtype))
    return multiply(cast(a, dtype), factor, dtype)
