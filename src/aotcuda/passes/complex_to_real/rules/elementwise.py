"""Elementwise rules: arithmetic, complex functions, where/masked_fill, copies and aliases.

Operands arrive as Pair (complex), torch.Tensor (real) or Python numbers. Every rule first casts its
tensor operands to the real dtype of the eager result (`out.dtype`), which applies PyTorch's type
promotion exactly as eager did (complex64 × complex128 → complex128, float64 × complex64 → complex128,
bfloat16 × complex64 → complex64). A real operand broadcasts against a pair with a trailing size-1 dim.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real import pair_math
from aotcuda.passes.complex_to_real.pair import (
    Pair,
    conj_sign,
    copy_in_memory_format,
    derived_once,
    real_as_pair,
    real_dtype,
    rotate_sign,
    scalar_pair,
    unsqueeze_real,
)
from aotcuda.passes.complex_to_real.product_tables import pair_mul_form, tag_table
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


# ---- operand helpers ----------------------------------------------------------------------------------


def cast(value, dtype: torch.dtype):
    """A tensor operand (Pair or real) in the pair dtype of the result; numbers are left as they are."""
    if isinstance(value, Pair):
        return value.to(dtype)
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return value


def result_dtype(out) -> torch.dtype:
    """The pair dtype of the eager result (or the real dtype, for ops returning real values)."""
    return real_dtype(out.dtype)


def as_addend(value, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Any operand as a tensor that broadcasts against pairs as a complex value: (x, 0) for real x."""
    if isinstance(value, Pair):
        return value.t
    if isinstance(value, torch.Tensor):  # a 0-dim CPU tensor may meet device tensors: bring it over
        return real_as_pair(value if value.device == device else value.to(device)).t
    if isinstance(value, complex):
        return scalar_pair(value.real, value.imag, dtype, device)
    return scalar_pair(value, 0, dtype, device)


def product_tables(b: Pair, form: str) -> tuple[torch.Tensor, torch.Tensor]:
    """b's two factors in mul_pairs: br (as [..., 1], broadcast over the pair dim; (br, br) for
    ``flip-cat``) and (−bi, bi) as [..., 2], tagged for folding into constants under ``fold``
    (product_tables.py).

    Made once per traced value of b: a factor used by several products (RoPE's table for q and for k,
    a loop body) costs its slices once, in the trace and in the graph.
    """
    def make():
        b_re = b.t[..., :1]
        if form == "flip-cat":
            b_re = torch.cat([b_re, b_re], -1)
        b_im_signed = b.t[..., 1:] * rotate_sign(b.dtype, b.t.device)
        if form == "fold":
            tag_table(b_re, "re")
            tag_table(b_im_signed, "im")
        return b_re, b_im_signed

    return derived_once(b.t, f"product_tables_{form}", make)


def mul_pairs(a: Pair, b: Pair) -> Pair:
    """(ar + i·ai)(br + i·bi) in the form AOTCUDA_PAIR_MUL names (product_tables.py; default ``flip``):
    a·(br, br) + flip(a)·(−bi, bi), b's tables folded into constants when b depends only on constants.

    The flip form compiles to one fused Inductor kernel reading each pair once (164 µs against 210 µs for
    unbind → four products → stack on an H200 q/k RoPE; precomputed tables 1.07× the copy, NOTES.md).
    """
    form = pair_mul_form()
    if form == "unbind":
        ar, ai = a.t.unbind(-1)
        br, bi = b.t.unbind(-1)
        return Pair(torch.stack([ar * br - ai * bi, ar * bi + ai * br], -1))
    b_re, b_im_signed = product_tables(b, form)
    return Pair(a.t * b_re + a.t.flip(-1) * b_im_signed)


def mul_by_complex_scalar(a: Pair, c: complex) -> Pair:
    """a · c for a Python complex c, with the terms of a zero real or imaginary part left out."""
    terms = []
    if c.real != 0 or c.imag == 0:
        terms.append(a.t * c.real)
    if c.imag != 0:
        terms.append(a.t.flip(-1) * scalar_pair(-c.imag, c.imag, a.dtype, a.t.device))
    return Pair(terms[0] + terms[1] if len(terms) == 2 else terms[0])


def conj(a: Pair) -> Pair:
    return Pair(a.t * conj_sign(a.dtype, a.t.device))


def multiply(x, y, dtype: torch.dtype):
    """x · y for any mix of Pair, real tensor and number; a Pair if either factor is complex."""
    if not isinstance(x, Pair) and (isinstance(y, Pair) or not isinstance(x, torch.Tensor)):
        x, y = y, x  # order: Pair, then real tensor, then number
    if isinstance(x, Pair):
        if isinstance(y, Pair):
            return mul_pairs(x, y)
        if isinstance(y, torch.Tensor):
            return Pair(x.t * unsqueeze_real(y))
        if isinstance(y, complex) and y.imag != 0:
            return mul_by_complex_scalar(x, y)
        return Pair(x.t * (y.real if isinstance(y, complex) else y))
    if isinstance(y, complex) and y.imag != 0:
        if isinstance(x, torch.Tensor):
            return Pair(unsqueeze_real(x) * scalar_pair(y.real, y.imag, dtype, x.device))
        return x * y
    return x * (y.real if isinstance(y, complex) else y)


def polar_pair(magnitude: torch.Tensor, angle: torch.Tensor) -> Pair:
    """magnitude · (cos angle, sin angle), both real tensors of one shape."""
    return Pair(torch.stack([magnitude * torch.cos(angle), magnitude * torch.sin(angle)], -1))


def magnitude(a: Pair) -> torch.Tensor:
    return pair_math.magnitude(a.re, a.im)


def log_pair(a: Pair) -> Pair:
    """(log |a|, angle a), log |a| accurate near |a| = 1 and at denormals (see pair_math.log_abs)."""
    return Pair(torch.stack([pair_math.log_abs(a.re, a.im), pair_math.angle(a.re, a.im)], -1))


# ---- arithmetic ---------------------------------------------------------------------------------------


@register(aten.mul.Tensor, aten.mul.Scalar)
def mul(out, a, b):
    """Complex product; complex × real and × Python scalars broadcast the real operand."""
    dtype = result_dtype(out)
    return multiply(cast(a, dtype), cast(b, dtype), dtype)


@register(aten.add.Tensor, aten.add.Scalar)
def add(out, a, b, alpha=1):
    """a + alpha·b; a real operand or scalar adds to the real part only."""
    dtype = result_dtype(out)
    a, b = cast(a, dtype), cast(b, dtype)
    if alpha != 1:
        b = multiply(b, alpha, dtype)
    device = out.device
    return Pair(as_addend(a, dtype, device) + as_addend(b, dtype, device))


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(out, a, b, alpha=1):
    """a − alpha·b."""
    return add(out, a, b, alpha=-alpha)


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(out, a, b, alpha=1):
    """b − alpha·a."""
    return add(out, b, a, alpha=-alpha)


@register(aten.neg.default)
def neg(out, a):
    """−a."""
    return Pair(-a.t)


@register(aten.div.Tensor, aten.div.Scalar)
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
    if isinstance(b, complex):  # as eager: b in the result's dtype
        return Pair(pair_math.divide(a.t, scalar_pair(b.real, b.imag, dtype, a.t.device)))
    if b == 0:  # eager divides each part by |0|: inf, or nan for a zero part
        return Pair(a.t / 0.0)
    return multiply(a, 1 / b, dtype)


@register(aten.reciprocal.default)
def reciprocal(out, a):
    """1 / a, divided as `div` divides (scaled, Annex G's infinities and zeros)."""
    return Pair(pair_math.divide(scalar_pair(1, 0, a.dtype, a.t.device), a.t))


# ---- complex functions ----------------------------------------------------------------------------------


@register(aten.abs.default)
def abs_(out, a):
    """|a| = hypot(re, im), a real tensor, scaled up first where a is tiny (pair_math.magnitude)."""
    return magnitude(a)


@register(aten.angle.default)
def angle(out, a):
    """atan2(im, re), a real tensor, on parts scaled up where one is subnormal (pair_math.angle)."""
    return pair_math.angle(a.re, a.im)


@register(aten.exp.default)
def exp(out, a):
    """exp(re) · (cos im, sin im), with C99's special values (see pair_math.exp)."""
    return Pair(pair_math.exp(a.re, a.im))


@register(aten.log.default)
def log(out, a):
    """(log |a|, angle a), log |a| accurate near |a| = 1 and at denormals (see pair_math.log_abs)."""
    return log_pair(a)


@register(aten.sqrt.default)
def sqrt(out, a):
    """Principal square root by the stable formula, scaled near max and at denormals (pair_math.sqrt)."""
    return Pair(pair_math.sqrt(a.re, a.im))


def _complex_exponent(node: torch.fx.Node) -> str | None:
    exponent = node.args[1] if len(node.args) > 1 else node.kwargs.get("exponent")
    if isinstance(exponent, complex) and exponent.imag != 0:
        return "pow with a complex exponent has no rule (only real scalar exponents)"
    return None


@register(aten.pow.Tensor_Scalar, refuses=_complex_exponent)
def pow_(out, a, exponent):
    """a ** p for a real scalar p as eager: its special exponents (0, 1, 2, 3, ±0.5, −1, −2), else cpow.

    p = 0 → 1; 1, 2, 3 → copies and products; 0.5 → sqrt; −0.5, −1, −2 → reciprocals of sqrt, a, a²;
    any other p → exp(log a · (p + 0i)), as C's cpow."""
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


@register(aten.sgn.default)
def sgn(out, a):
    """a / |a|, and 0 where a is 0; a scaled by a power of two first, so |a| neither overflows nor rounds a
    denormal (pair_math.sign)."""
    return Pair(pair_math.sign(a.re, a.im))


# ---- selection, copies, aliases ----------------------------------------------------------------------------


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(out, condition, a, b):
    """where(condition, a, b) with the condition broadcast over both parts."""
    dtype = result_dtype(out)
    a, b = as_addend(cast(a, dtype), dtype, out.device), as_addend(cast(b, dtype), dtype, out.device)
    return Pair(torch.where(unsqueeze_real(condition), a, b))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(out, a, mask, value):
    """value where mask is set, a elsewhere."""
    dtype = result_dtype(out)
    fill = as_addend(cast(value, dtype), dtype, out.device)
    return Pair(torch.where(unsqueeze_real(mask), fill, a.t))


@register(aten.clone.default)
def clone(out, a, memory_format=None):
    """A copy of the pair, in the memory format asked for (see pair.copy_in_memory_format)."""
    return Pair(copy_in_memory_format(a.t, memory_format))


@register(aten.alias.default, aten.detach.default, aten.lift_fresh.default, aten.resolve_conj.default,
          aten.resolve_neg.default)
def alias(out, a):
    """No-op on the pair (conjugation is applied eagerly by the conj rules, so resolving is a no-op too)."""
    return a


@register(aten.lift_fresh_copy.default)
def lift_fresh_copy(out, a):
    """A copy of the pair."""
    return Pair(torch.clone(a.t))
