"""Complex functions on pairs that stay right at special values: huge, tiny, zero, infinite and nan parts.

The textbook formulas overflow or lose a part where eager does not: a / b by conj(b) / |b|² overflows
for |b| above sqrt(max) (1.8e19 in float32); sqrt by polar form overflows |z| near max and loses the
small part near the negative real axis; log(|z|) loses its real part near |z| = 1 and at denormals;
exp(inf + 0i) makes inf · sin(0) = nan. These follow what eager computes (c10::complex and the C
library, C99 Annex G), written in plain torch ops on pair tensors ([..., 2]) or on (re, im) parts.
Only the rules that need them call them; products and sums keep their cheap forms.
"""

from __future__ import annotations

import torch


# IEEE layouts: the integer dtype of the same width, the mantissa bits, the exponent bias
_EXPONENT_LAYOUT = {torch.float16: (torch.int16, 10, 15), torch.bfloat16: (torch.int16, 7, 127),
                    torch.float32: (torch.int32, 23, 127), torch.float64: (torch.int64, 52, 1023)}


def _exponent_layout(dtype: torch.dtype) -> tuple[torch.dtype, int, int]:
    return _EXPONENT_LAYOUT[dtype]


def unit_scale_bits(largest: torch.Tensor) -> torch.Tensor:
    """The bits (as integers) of 2^k, k chosen from `largest`'s exponent field (logb, as C's scalbn
    takes it) so that largest · 2^k lies in [1, 2): exact, no libm call, no rounding, no fast-math.

    largest: a tensor of non-negative floats (a max of magnitudes). k is clamped to the normal exponents:
    a denormal or zero gets 2^bias (a denormal lands in [2^(1-nmant), 2)), the top binade, inf and nan
    2^(1-bias) (the top binade lands in [2, 4); inf and nan stay themselves).
    """
    int_dtype, nmant, bias = _exponent_layout(largest.dtype)
    exponent_field = largest.view(int_dtype) & ((2 * bias + 1) << nmant)
    return (((2 * bias) << nmant) - exponent_field).clamp_min(1 << nmant)


def _two_factors(log_bits: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """2^k as two normal powers of two whose product is 2^k (k up to twice the exponent range), given
    k << nmant as integers: one factor of 2^k could overflow or be denormal, two are exact."""
    _, nmant, bias = _exponent_layout(dtype)
    low, high = (1 - bias) << nmant, bias << nmant  # the normal exponents, shifted as log_bits is
    first = log_bits.clamp(low, high)
    second = (log_bits - first).clamp(low, high)  # clamped only where 2^k is 0 or inf anyway
    return (first + (bias << nmant)).view(dtype), (second + (bias << nmant)).view(dtype)


def _box_infinities(part: torch.Tensor) -> torch.Tensor:
    """Annex G's box: ±1 for an infinite part, ±0 for any other (nan's sign kept)."""
    return torch.copysign(torch.isinf(part).to(part.dtype), part)


def divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a / b for pair tensors ([..., 2], broadcasting; float32, float64 or float16): C99 Annex G's
    _Cdivd, with both operands scaled, so no intermediate overflows or underflows.

    Each operand is scaled by the power of two that brings its larger part into [1, 2) (from the
    exponent bits: exact). The quotient of the scaled pairs, (a'c' + b'd', b'c' − a'd') / (c'² + d'²),
    then only sees magnitudes in [2^-50, 2^26], so an FMA contraction of a product and a sum (Triton
    fuses them, the C++ compiler may) moves a part by an ulp but cannot turn it to inf, 0 or nan; the
    result is scaled back by two exact powers of two, so it overflows or underflows only where the true
    quotient does: (3e38+3e38i)/(6e19−6e19i) is (0, 5e18), where Smith's method (eager) gives inf.

    Annex G's recovery: an infinite a over a finite b is inf · (box(a) / b) and a finite a over an
    infinite b is 0 · (a / box(b)), box taking ±1 for an infinite part and ±0 otherwise; these give
    infinities and zeros where the formula (and eager) give nan + nan·i. Dividing by (±0, ±0) gives
    (re / +0, im / +0), as eager: inf for a nonzero part, nan for a zero one.
    """
    a_re, a_im, b_re, b_im = a[..., :1], a[..., 1:], b[..., :1], b[..., 1:]
    a_largest, b_largest = torch.maximum(a_re.abs(), a_im.abs()), torch.maximum(b_re.abs(), b_im.abs())
    infinite_by_finite = (torch.isinf(a_re) | torch.isinf(a_im)) & torch.isfinite(b_largest)
    finite_by_infinite = (torch.isinf(b_re) | torch.isinf(b_im)) & torch.isfinite(a_largest)
    a_re = torch.where(infinite_by_finite, _box_infinities(a_re), a_re)
    a_im = torch.where(infinite_by_finite, _box_infinities(a_im), a_im)
    b_re = torch.where(finite_by_infinite, _box_infinities(b_re), b_re)
    b_im = torch.where(finite_by_infinite, _box_infinities(b_im), b_im)
    a_largest = torch.where(infinite_by_finite, 1.0, a_largest)
    b_largest = torch.where(finite_by_infinite, 1.0, b_largest)
    a_bits, b_bits = unit_scale_bits(a_largest), unit_scale_bits(b_largest)
    a_scale, b_scale = a_bits.view(a.dtype), b_bits.view(b.dtype)
    x, y, c, d = a_re * a_scale, a_im * a_scale, b_re * b_scale, b_im * b_scale
    inverse = 1 / (c * c + d * d)
    # a / b = (a' / b') · (b_scale / a_scale), applied as two exact factors after the quotient
    first, second = _two_factors(b_bits - a_bits, a.dtype)
    first = torch.where(infinite_by_finite, torch.inf, torch.where(finite_by_infinite, 0.0, first))
    re = (x * c + y * d) * inverse * first * second
    im = (y * c - x * d) * inverse * first * second
    by_zero = (b == 0).all(-1, keepdim=True)
    return torch.where(by_zero, a * torch.inf, torch.cat([re, im], -1))


def sign(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """z / |z| as a pair, 0 at 0: z scaled first by the power of two that brings its larger part into
    [1, 2), so |z| neither overflows (3e38(1+i) gives (0.707, 0.707), not 0) nor loses a denormal's
    digits (eager's kernel gives nan + inf·i there). An infinite part gives nan, as z / |z| does."""
    scale = unit_scale_bits(torch.maximum(re.abs(), im.abs())).view(re.dtype)
    x, y = re * scale, im * scale
    r = torch.hypot(x, y)
    pair = torch.stack([x / r, y / r], -1)
    return torch.where((r == 0).unsqueeze(-1), 0.0, pair)


def exp(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """exp(re + i·im) as a pair: exp(re) · (cos im, sin im), with C99 Annex G's special values.

    exp(re) is taken as exp(re / 2)², multiplied in after cos and sin, so that a part stays finite where
    exp(re) alone overflows (re up to twice the log of max). A zero imaginary part stays exactly that (exp(inf + 0i) = inf + 0i, not inf · sin 0 = nan);
    exp(±inf + i·y) for y infinite or nan is (0, 0) or (inf, nan), not 0 · nan.
    """
    half = torch.exp(re * 0.5)  # exp(re) = half · half: exp(100) · sin(1e-45) stays finite, as in eager
    inf_by_nonfinite = torch.isinf(re) & ~torch.isfinite(im)
    cos = torch.where(inf_by_nonfinite, 1.0, torch.cos(im))
    sin = torch.where(inf_by_nonfinite, 0.0, torch.sin(im))
    return torch.stack([half * cos * half, torch.where(im == 0, im, half * sin * half)], -1)


def log_abs(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """log |re + i·im|, accurate where log(hypot) is not: log M + log1p((m/M)²)/2 for the larger and
    smaller magnitudes M, m (no square of a tiny or huge part), and log1p((M − 1)(M + 1) + m²)/2 for
    M in [0.5, 2], which keeps the real part of log(1 + 1e-4i) (5e-9) that log(hypot) rounds to 0.
    −inf at 0, +inf where a part is infinite (even next to nan), nan otherwise where a part is nan.
    """
    ax, ay = re.abs(), im.abs()
    big, small = torch.maximum(ax, ay), torch.minimum(ax, ay)
    ratio = small / big
    far = torch.log(big) + 0.5 * torch.log1p(ratio * ratio)
    near = 0.5 * torch.log1p((big - 1) * (big + 1) + small * small)
    result = torch.where((big >= 0.5) & (big <= 2), near, far)
    result = torch.where(big == 0, -torch.inf, result)
    return torch.where(torch.isinf(ax) | torch.isinf(ay), torch.inf, result)


def sqrt(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """The principal square root as a pair, by the stable formula (Kahan; glibc's csqrt):
    t = sqrt((|z| + |re|) / 2), then (t, im / 2t) for re ≥ 0 and (|im| / 2t, ±t) for re < 0, so the
    small part is a quotient, never a difference. z is scaled by an even power of two first where |z|
    could overflow (near max) or is denormal (hypot would round), and the result by its square root.
    Annex G: sqrt(±0 + 0i) = (0, ±0) and sqrt(x ± inf·i) = (inf, ±inf) for every x, nan included.
    """
    fi = torch.finfo(re.dtype)
    largest = torch.maximum(re.abs(), im.abs())
    huge, tiny = largest > fi.max / 4, largest < fi.tiny
    scale_in = torch.where(huge, 0.25, torch.where(tiny, 4 / fi.eps ** 2, 1.0))
    scale_out = torch.where(huge, 2.0, torch.where(tiny, fi.eps / 2, 1.0))
    x, y = re * scale_in, im * scale_in
    t = torch.sqrt((torch.hypot(x, y) + x.abs()) * 0.5)
    u = y / (2 * t)
    upper = x >= 0
    out_re = torch.where(upper, t, u.abs()) * scale_out
    out_im = torch.where(upper, u, torch.copysign(t, y)) * scale_out
    out_re = torch.where(t == 0, 0.0, out_re)
    out_im = torch.where(t == 0, im, out_im)
    infinite_im = torch.isinf(im)
    return torch.stack([torch.where(infinite_im, torch.inf, out_re), torch.where(infinite_im, im, out_im)], -1)
