"""Arithmetic on pairs that rules share: operands in the result's dtype, products, conjugates, polar form.

Operands arrive as Pair (complex), torch.Tensor (real) or Python numbers. `cast` and `result_dtype` apply
PyTorch's type promotion as eager did (the eager result's dtype decides); `as_addend` makes any operand a
pair tensor; `multiply` is the product of any mix. Used by the rule files (elementwise, shape, indexing,
reduction, creation, conversion); the functions that keep special values right (Smith's division, exp,
log |z|, sqrt) are in pair_math.py, the Pair type and dim arithmetic in pair.py.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real import pair_math
from aotcuda.passes.complex_to_real.pair import (
    Pair,
    conj_sign,
    derived_once,
    real_as_pair,
    real_dtype,
    rotate_sign,
    scalar_pair,
    unsqueeze_real,
)


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


def product_factors(b: Pair) -> tuple[torch.Tensor, torch.Tensor]:
    """b's two factors in mul_pairs: br as [..., 1] (broadcast over the pair dim) and (−bi, bi) as [..., 2].

    Made once per traced value of b: a factor used by several products (RoPE's table for q and for k,
    a loop body) costs its slices once, in the trace and in the graph.
    """
    def make():
        return b.t[..., :1], b.t[..., 1:] * rotate_sign(b.dtype, b.t.device)

    return derived_once(b.t, "product_factors", make)


def mul_pairs(a: Pair, b: Pair) -> Pair:
    """(ar + i·ai)(br + i·bi) as a·br + flip(a, −1)·(−bi, bi): one fused Inductor kernel that reads each
    pair once, with br and (−bi, bi) built in the kernel.

    The measured form. On an H200 (RoPE B=4, S=4096, H=32, D=128, bf16, torch 2.11; a device copy of the
    same bytes 134.1 µs) it took 144.4 µs; b's tables precomputed as program constants 144.6, (br, br)
    made with cat 144.4, the textbook unbind → four products → stack 198.8. The A/B, its other forms and
    their results: benchmarks/scripts/pair_mul_forms.py (raw rows:
    benchmarks/results/rope-h200-torch2.11-pair-mul.json).
    """
    b_re, b_im_signed = product_factors(b)
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
