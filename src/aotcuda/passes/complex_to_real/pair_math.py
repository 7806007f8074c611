"""Complex functions on pairs that stay right at special values: huge, tiny, zero, infinite and nan parts.

The textbook formulas overflow or lose a part where the true value is representable: a / b by
conj(b) / |b|² overflows for |b| above sqrt(max) (1.8e19 in float32), and Smith's method (eager's)
still overflows in x + y·(q/p) ((3e38+3e38i)/(6e19−6e19i) is (0, 5e18), eager gives inf); sqrt by polar
form overflows |z| near max and loses the small part near the negative real axis; log(|z|) loses its
real part near |z| = 1 and at denormals; exp(inf + 0i) makes inf · sin(0) = nan. These compute the
true value where it is representable, with C99 Annex G's special values (c10::complex and the C library
agree with them where they are right), in plain torch ops on pair tensors ([..., 2]) or on (re, im)
parts. Powers of two are built from exponent bits (exact, no libm call, no fast-math approximation).
Only the rules that need them call them; products and sums keep their cheap forms.
"""

from __future__ import annotations

import math

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


def _box_infinities(part: torch.Tensor) -> torch.Tensor:
    """Annex G's box: ±1 for an infinite part, ±0 for any other (nan's sign kept)."""
    return torch.copysign(torch.isinf(part).to(part.dtype), part)


def divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a / b for pair tensors ([..., 2], broadcasting; float32 or float64), right wherever the quotient is
    representable: no intermediate overflows or underflows where its value matters, and an FMA
    contraction (Triton fuses a product into a sum; a C++ compiler may) cannot turn a part to inf, 0 or nan.

    float32 pairs are divided in float64, where the textbook (ac + bd, bc − ad) / (c² + d²) is exact in
    its products (24-bit × 24-bit fits in 53 bits, so a contraction changes no bit) and cannot overflow
    or underflow; the quotient is rounded once to float32: (3e38+3e38i)/(6e19−6e19i) is (0, 5e18), where
    eager's Smith's method gives inf. float64 pairs have no wider type (see `_divide_scaled`).

    Then C99 Annex G's recovery where the formula gives nan + nan·i: an infinite a over a finite b is
    inf · (box(a) / b) (box: ±1 for an infinite part, ±0 otherwise), a finite a over an infinite b is
    0. Dividing by (±0, ±0) gives (re / +0, im / +0), as eager: inf for a nonzero part, nan for a zero one.
    """
    in_float64 = a.dtype == torch.float32 and b.dtype == torch.float32
    if in_float64:
        a, b = a.double(), b.double()
    a_re, a_im, b_re, b_im = a[..., :1], a[..., 1:], b[..., :1], b[..., 1:]
    c, d = b_re, b_im
    if a.dtype == torch.float64 and not in_float64:
        re, im = _divide_scaled(a_re, a_im, c, d)
    else:  # float32 parts in float64 (exact products); float16 parts never come here (complex32: in float32)
        inverse = 1 / (c * c + d * d)
        re, im = (a_re * c + a_im * d) * inverse, (a_im * c - a_re * d) * inverse
    both_nan = torch.isnan(re) & torch.isnan(im)
    to_infinity = both_nan & (torch.isinf(a_re) | torch.isinf(a_im)) & torch.isfinite(c) & torch.isfinite(d)
    to_zero = both_nan & (torch.isinf(b_re) | torch.isinf(b_im)) & torch.isfinite(a_re) & torch.isfinite(a_im)
    box_re, box_im = _box_infinities(a_re), _box_infinities(a_im)
    re = torch.where(to_infinity, (box_re * c + box_im * d) * torch.inf, torch.where(to_zero, 0.0, re))
    im = torch.where(to_infinity, (box_im * c - box_re * d) * torch.inf, torch.where(to_zero, 0.0, im))
    by_zero = (b == 0).all(-1, keepdim=True)
    quotient = torch.where(by_zero, a * torch.inf, torch.cat([re, im], -1))
    return quotient.to(torch.float32) if in_float64 else quotient


def _divide_scaled(a_re, a_im, b_re, b_im):
    """(re, im) of a / b for float64 parts, with no wider type to compute in: a / b taken as
    a_re / b + i·a_im / b, every number a float64 mantissa times an integer power of two.

    b is scaled by the power of two that brings its larger part into [1, 2), and each part of a by its
    own (C99 Annex G's logb/scalbn, from the exponent bits: exact, denormals included; a part of
    5e-324 + 9e307i is not lost). Each of the four terms x·c/(c² + d²), … then has a magnitude below 2
    and an exact integer exponent; the two terms of a part are summed at the larger one's exponent (no
    inf − inf where both overflow: (9e307 + 9e307i)/(5e-324 − 5e-324i) is (0, inf)), and the sum is
    scaled back by exact powers of two, so a part overflows or underflows only where its true value
    does. Products and sums only see magnitudes below 4: an FMA contraction moves a term by an ulp.
    """
    b1, b2, b_log = _normalizing_scale(torch.maximum(b_re.abs(), b_im.abs()))
    c, d = b_re * b1 * b2, b_im * b1 * b2
    inverse = 1 / (c * c + d * d)
    # each part of b on its own too (c · inverse alone can be denormal, and a small part of b can
    # vanish in b's scale): 1 / b = (c_n · 2^-c_log, −d_n · 2^-d_log) · 2^(2·b_log) / (c² + d²)
    c1, c2, c_log = _normalizing_scale(b_re.abs())
    d1, d2, d_log = _normalizing_scale(b_im.abs())
    u, v = b_re * c1 * c2 * inverse, b_im * d1 * d2 * inverse
    x1, x2, x_log = _normalizing_scale(a_re.abs())
    y1, y2, y_log = _normalizing_scale(a_im.abs())
    x, y = a_re * x1 * x2, a_im * y1 * y2  # a_re = x · 2^-x_log
    x_exp, y_exp = 2 * b_log - x_log, 2 * b_log - y_log
    re = _sum_of_scaled(x * u, x_exp - c_log, y * v, y_exp - d_log)
    im = _sum_of_scaled(y * u, y_exp - c_log, -(x * v), x_exp - d_log)
    return re, im


def _sum_of_scaled(m1: torch.Tensor, k1: torch.Tensor, m2: torch.Tensor, k2: torch.Tensor) -> torch.Tensor:
    """m1 · 2^k1 + m2 · 2^k2 (integer k), summed at the larger term's exponent and scaled once: the
    smaller term is scaled down by at most the normal range (below that it cannot move the larger)."""
    n1a, n1b, j1 = _normalizing_scale(m1.abs())
    n2a, n2b, j2 = _normalizing_scale(m2.abs())
    e1, e2 = k1 - j1, k2 - j2  # m · 2^k = (m · n) · 2^(k − j), m · n in [1, 2) or 0
    top = torch.maximum(e1, e2)
    total = m1 * n1a * n1b * _power_of_two(e1 - top, m1.dtype) + m2 * n2a * n2b * _power_of_two(e2 - top, m1.dtype)
    for factor in _three_factors(top, m1.dtype):
        total = total * factor
    return total


def _three_factors(exponent: torch.Tensor, dtype: torch.dtype) -> list[torch.Tensor]:
    """2^k for integer k (up to three times the exponent range) as three normal powers of two, each exact:
    a scaled term can be as small as 2^-1076, so two factors could fall short of the true scale."""
    _, _, bias = _exponent_layout(dtype)
    factors = []
    for _ in range(3):
        part = exponent.clamp(1 - bias, bias)
        exponent = exponent - part
        factors.append(_power_of_two(part, dtype))
    return factors


def _power_of_two(exponent: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """2^k for integer k, clamped to the normal exponents, built from its bits (exact)."""
    _, nmant, bias = _exponent_layout(dtype)
    return ((exponent.clamp(1 - bias, bias) + bias) << nmant).view(dtype)


def _normalizing_scale(largest: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(s1, s2, log2(s1 · s2) as integers): powers of two with largest · s1 · s2 in [1, 2), a denormal
    largest included (s2 is 1 for any other)."""
    first = unit_scale_bits(largest)
    second = unit_scale_bits(largest * first.view(largest.dtype))
    _, nmant, bias = _exponent_layout(largest.dtype)
    exponent = (first >> nmant) + (second >> nmant) - 2 * bias
    return first.view(largest.dtype), second.view(largest.dtype), exponent


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
    exp(re) alone overflows (re up to twice the log of max). A zero imaginary part stays exactly that
    (exp(inf + 0i) = inf + 0i, not inf · sin 0 = nan);
    exp(±inf + i·y) for y infinite or nan is (0, 0) or (inf, nan), not 0 · nan.

    Under flush-to-zero (Inductor's CUDA kernels: libdevice reads a subnormal as 0, `subnormal_safe`)
    sin(1e-45) would be 0 and exp(1e20 + 1e-45i) inf · 0 = nan: sin of a subnormal is taken as the
    subnormal itself (exact: sin x rounds to x there), and a sine that is still 0 (x = ±0, or a subnormal
    where plain arithmetic flushes too) takes the zero branch.
    """
    fi = torch.finfo(re.dtype)
    half = torch.exp(re * 0.5)  # exp(re) = half · half: exp(100) · sin(1e-45) stays finite, as in eager
    inf_by_nonfinite = torch.isinf(re) & ~torch.isfinite(im)
    cos = torch.where(inf_by_nonfinite, 1.0, torch.cos(im))
    sin = torch.where(inf_by_nonfinite, 0.0, torch.where(im.abs() < fi.tiny, im, torch.sin(im)))
    no_rotation = (im == 0) | ((sin == 0) & ~inf_by_nonfinite)
    return torch.stack([half * cos * half, torch.where(no_rotation, im, half * sin * half)], -1)


def subnormal_safe(re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(re·s, im·s, scaled, s): both parts scaled by s = 4/eps² (2^48 in float32, 2^106 in float64, an
    exact even power of two) where the larger magnitude is below tiny/eps (2^-103 in float32), so that
    every nonzero part of a tiny z is normal (2^-149 · 2^48 = 2^-101) before it reaches hypot, atan2, log
    or sqrt; elsewhere s = 1 (`scaled` is False), and a subnormal part is below eps times the larger one.

    Why: Inductor's CUDA (Triton) kernels link libdevice with flush-to-zero (triton_meta disable_ftz=False;
    pytorch/pytorch#185878, #188546), so libdevice reads a float32 subnormal operand as 0 (hypot(1.5e-39,
    1.2e-38) became 1.2e-38, atan2(1e-45, 0) became 0), while plain products and sums keep subnormals.
    Scaled, the rules compute what eager does on the input on both devices.
    """
    fi = torch.finfo(re.dtype)
    scaled = torch.maximum(re.abs(), im.abs()) < fi.tiny / fi.eps
    factor = 4 / fi.eps ** 2
    scale = torch.where(scaled, factor, 1.0)
    return re * scale, im * scale, scaled, factor


def angle(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """atan2(im, re); where a part is subnormal or zero (and the other below max · eps²/4, 2^80 in
    float32), both parts are first scaled by `subnormal_safe`'s 4/eps² (atan2 is unchanged by a positive
    scale), so that under flush-to-zero atan2 reads every part that matters: atan2(1e-45, 0) would give
    0 instead of pi/2, atan2(1.5e-39, 1e-4) 0 instead of 1.5e-35 (beside a part above 2^80 a subnormal
    moves atan2 by less than 2^-206). Other values take atan2 of the parts as they are, a second call:
    eager's CPU picks its atan2 kernel by the operands' strides, and its two kernels differ at 2^-150
    (which z**1.5 at 1.7e38 + 1.2e-7i turns into 6e12)."""
    fi = torch.finfo(re.dtype)
    factor = 4 / fi.eps ** 2
    ax, ay = re.abs(), im.abs()
    scaled = (torch.minimum(ax, ay) < fi.tiny) & (torch.maximum(ax, ay) < fi.max / factor)
    scale = torch.where(scaled, factor, 1.0)
    return torch.where(scaled, torch.atan2(im * scale, re * scale), torch.atan2(im, re))


def magnitude(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """|re + i·im| = hypot(re, im); a tiny z scaled up first and the result back down (exact powers of
    two, `subnormal_safe`): under flush-to-zero hypot(1.5e-39, 1.2e-38) would drop the subnormal part,
    and sgn (export decomposes it into z / |z|) would mix the two readings ((0.125, 1), not (0.124, 0.992))."""
    x, y, scaled, factor = subnormal_safe(re, im)
    return torch.hypot(x, y) * torch.where(scaled, 1 / factor, 1.0)


def log_abs(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """log |re + i·im|, accurate where log(hypot) is not: log M + log1p((m/M)²)/2 for the larger and
    smaller magnitudes M, m (no square of a tiny or huge part), and log1p((M − 1)(M + 1) + m²)/2 for
    M in [0.5, 2], which keeps the real part of log(1 + 1e-4i) (5e-9) that log(hypot) rounds to 0.
    −inf at 0, +inf where a part is infinite (even next to nan), nan otherwise where a part is nan.
    A tiny z is scaled up first and log s subtracted (`subnormal_safe`: libdevice may flush a subnormal).
    """
    x, y, scaled, factor = subnormal_safe(re, im)
    ax, ay = x.abs(), y.abs()
    big, small = torch.maximum(ax, ay), torch.minimum(ax, ay)
    ratio = small / big
    far = torch.log(big) + 0.5 * torch.log1p(ratio * ratio)
    far = torch.where(scaled, far - math.log(factor), far)
    near = 0.5 * torch.log1p((big - 1) * (big + 1) + small * small)
    result = torch.where((big >= 0.5) & (big <= 2), near, far)
    result = torch.where(big == 0, -torch.inf, result)
    return torch.where(torch.isinf(ax) | torch.isinf(ay), torch.inf, result)


def sqrt(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """The principal square root as a pair, by the stable formula (Kahan; glibc's csqrt):
    t = sqrt((|z| + |re|) / 2), then (t, im / 2t) for re ≥ 0 and (|im| / 2t, ±t) for re < 0, so the
    small part is a quotient, never a difference. z is scaled by an even power of two first where |z|
    could overflow (near max) or is tiny (`subnormal_safe`: hypot would round, or flush a subnormal part
    under Inductor's CUDA flush-to-zero), and the result by its square root.
    Annex G: sqrt(±0 + 0i) = (0, ±0) and sqrt(x ± inf·i) = (inf, ±inf) for every x, nan included.
    """
    fi = torch.finfo(re.dtype)
    huge = torch.maximum(re.abs(), im.abs()) > fi.max / 4
    x, y, tiny, factor = subnormal_safe(re, im)
    x, y = torch.where(huge, re * 0.25, x), torch.where(huge, im * 0.25, y)
    scale_out = torch.where(huge, 2.0, torch.where(tiny, factor ** -0.5, 1.0))
    t = torch.sqrt((torch.hypot(x, y) + x.abs()) * 0.5)
    u = y / (2 * t)
    upper = x >= 0
    out_re = torch.where(upper, t, u.abs()) * scale_out
    out_im = torch.where(upper, u, torch.copysign(t, y)) * scale_out
    out_re = torch.where(t == 0, 0.0, out_re)
    out_im = torch.where(t == 0, im, out_im)
    infinite_im = torch.isinf(im)
    return torch.stack([torch.where(infinite_im, torch.inf, out_re), torch.where(infinite_im, im, out_im)], -1)
