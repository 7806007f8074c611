"""Elementwise rules: arithmetic, complex functions, where/masked_fill, copies and aliases.

Operands arrive as Pair (complex), torch.Tensor (real) or Python numbers. Every rule first casts its
tensor operands to the real dtype of the eager result (`out.dtype`), which applies PyTorch's type
promotion exactly as eager did (complex64 × complex128 → complex128, float64 × complex64 → complex128,
bfloat16 × complex64 → complex64). A real operand broadcasts against a pair with a trailing size-1 dim.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real import pair_math
from aotcuda.passes.complex_to_real.pair import Pair, copy_in_memory_format, scalar_pair, unsqueeze_real
from aotcuda.passes.complex_to_real.pair_algebra import (
    as_addend,
    cast,
    log_pair,
    magnitude,
    mul_pairs,
    multiply,
    result_dtype,
)
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


# ---- arithmetic ---------------------------------------------------------------------------------------


@register(aten.mul.Tensor, aten.mul.Scalar, computes=True)
def mul(out, a, b):
    """Complex product; complex × real and × Python scalars broadcast the real operand."""
    dtype = result_dtype(out)
    return multiply(cast(a, dtype), cast(b, dtype), dtype)


@register(aten.add.Tensor, aten.add.Scalar, computes=True)
def add(out, a, b, alpha=1):
    """a + alpha·b; a real operand or scalar adds to the real part only."""
    dtype = result_dtype(out)
    a, b = cast(a, dtype), cast(b, dtype)
    if alpha != 1:
        b = multiply(b, alpha, dtype)
    device = out.device
    return Pair(as_addend(a, dtype, device) + as_addend(b, dtype, device))


@register(aten.sub.Tensor, aten.sub.Scalar, computes=True)
def sub(out, a, b, alpha=1):
    """a − alpha·b."""
    return add(out, a, b, alpha=-alpha)


@register(aten.rsub.Tensor, aten.rsub.Scalar, computes=True)
def rsub(out, a, b, alpha=1):
    """b − alpha·a."""
    return add(out, b, a, alpha=-alpha)


@register(aten.neg.default, aten._neg_view.default, computes=True)
def neg(out, a):
    """−a."""
    return Pair(-a.t)


@register(aten.div.Tensor, aten.div.Scalar, computes=True)
def div(out, a, b):
    """a / b, right wherever the quotient is representable (no intermediate overflows or underflows, FMA
    contraction cannot change that): complex64 in float64, complex128 part by part with exact powers of
    two; C99 Annex G's infinities and zeros where the formula gives nan (pair_math.divide). A real divisor
    divides both parts; a zero divisor gives eager's (re / 0, im / 0)."""
    dtype = result_dtype(out)
    a, b = cast(a, dtype), cast(b, dtype)
    if isinstance(b, Pair):
        return Pair(pair_math.divide(as_addend(a, dtype, out.device), b.t))
    if isinstance(b, torch.Tensor):
        return Pair(a.t / unsqueeze_real(b))
    if isinstance(b, complex):  # as eager: b in the result's dtype; a may be real (x / 1j)
        return Pair(pair_math.divide(as_addend(a, dtype, out.device), scalar_pair(b.real, b.imag, dtype, out.device)))
    if b == 0:  # eager divides each part by |0|: inf, or nan for a zero part
        return Pair(a.t / 0.0)
    return multiply(a, 1 / b, dtype)


@register(aten.reciprocal.default, computes=True)
def reciprocal(out, a):
    """1 / a, divided as `div` divides (scaled, Annex G's infinities and zeros)."""
    return Pair(pair_math.divide(scalar_pair(1, 0, a.dtype, a.t.device), a.t))


# ---- complex functions ----------------------------------------------------------------------------------


@register(aten.abs.default, computes=True)
def abs_(out, a):
    """|a| = hypot(re, im), a real tensor, scaled up first where a is tiny (pair_math.magnitude)."""
    return magnitude(a)


@register(aten.angle.default, computes=True)
def angle(out, a):
    """atan2(im, re), a real tensor, on parts scaled up where one is subnormal (pair_math.angle)."""
    return pair_math.angle(a.re, a.im)


@register(aten.exp.default, computes=True)
def exp(out, a):
    """exp(re) · (cos im, sin im), with C99's special values (see pair_math.exp)."""
    return Pair(pair_math.exp(a.re, a.im))


@register(aten.log.default, computes=True)
def log(out, a):
    """(log |a|, angle a), log |a| accurate near |a| = 1 and at denormals (see pair_math.log_abs)."""
    return log_pair(a)


@register(aten.sqrt.default, computes=True)
def sqrt(out, a):
    """Principal square root by the stable formula, scaled near max and at denormals (pair_math.sqrt)."""
    return Pair(pair_math.sqrt(a.re, a.im))


@register(aten.pow.Tensor_Scalar, computes=True)
def pow_(out, a, exponent):
    """a ** p for a scalar p as eager: its special real exponents (0, 1, 2, 3, ±0.5, −1, −2), else cpow.

    p = 0 → 1; 1, 2, 3 → copies and products; 0.5 → sqrt; −0.5, −1, −2 → reciprocals of sqrt, a, a²;
    any other real p → exp(log a · (p + 0i)), as C's cpow; a complex p (`z ** 1j`) → exp(p · log a), as pow
    with a tensor exponent computes it (rules/elementary.py)."""
    if isinstance(exponent, complex) and exponent.imag != 0:
        from aotcuda.passes.complex_to_real.rules.elementary import pow_tensor  # elementary's family, not this one's

        return pow_tensor(out, a, exponent)
    p = exponent.real if isinstance(exponent, complex) else exponent
    if p == 0:
        return Pair(torch.ones_like(a.t) * scalar_pair(1, 0, a.dtype, a.t.device))
    if p in (1, 2, 3):  # eager's p = 1 is a copy
        return Pair(torch.clone(a.t)) if p == 1 else mul_pairs(a, a) if p == 2 else mul_pairs(mul_pairs(a, a), a)
    if p in (0.5, -0.5):
        root = Pair(pair_math.sqrt(a.re, a.im))
        return root if p == 0.5 else reciprocal(out, root)
    if p in (-1, -2):
        return reciprocal(out, a if p == -1 else mul_pairs(a, a))
    log_a = log_pair(a)
    # eager multiplies by p + 0i: its 0 · log|a| makes the angle nan where |a| is infinite
    return Pair(pair_math.exp(log_a.re * p, log_a.im * p + log_a.re * 0))


@register(aten.sgn.default, computes=True)
def sgn(out, a):
    """a / |a|, and 0 where a is 0; a scaled by a power of two first, so |a| neither overflows nor rounds a
    denormal (pair_math.sign)."""
    return Pair(pair_math.sign(a.re, a.im))


# ---- selection, copies, aliases ----------------------------------------------------------------------------


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar, computes=True)
def where(out, condition, a, b):
    """where(condition, a, b) with the condition broadcast over both parts."""
    dtype = result_dtype(out)
    a, b = as_addend(cast(a, dtype), dtype, out.device), as_addend(cast(b, dtype), dtype, out.device)
    return Pair(torch.where(unsqueeze_real(condition), a, b))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor, computes=True)
def masked_fill(out, a, mask, value):
    """value where mask is set, a elsewhere."""
    dtype = result_dtype(out)
    fill = as_addend(cast(value, dtype), dtype, out.device)
    return Pair(torch.where(unsqueeze_real(mask), fill, a.t))


@register(aten.clone.default, computes=True)
def clone(out, a, memory_format=None):
    """A copy of the pair, in the memory format asked for (see pair.copy_in_memory_format)."""
    return Pair(copy_in_memory_format(a.t, memory_format))


@register(aten.alias.default, aten.detach.default, aten.lift_fresh.default, aten.resolve_conj.default,
          aten.resolve_neg.default, computes=True)
def alias(out, a):
    """No-op on the pair (conjugation is applied eagerly by the conj rules, so resolving is a no-op too)."""
    return a


@register(aten.lift_fresh_copy.default, computes=True)
def lift_fresh_copy(out, a):
    """A copy of the pair."""
    return Pair(torch.clone(a.t))
