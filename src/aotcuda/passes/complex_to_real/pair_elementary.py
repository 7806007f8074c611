"""The complex elementary functions beyond exp, log and sqrt, on (re, im) parts, by formulas that stay accurate.

The textbook forms lose what these keep: sinh by (e^z − e^−z)/2 cancels near 0 and overflows e^x before the
result does; tanh by sinh/cosh is inf/inf beyond x ≈ 89 (float32); asinh by log(z + sqrt(z² + 1)) cancels for
Re z < 0 and squares z (overflow beyond sqrt(max)); acosh by log(z + sqrt(z² − 1)) takes the wrong branch and
loses the result near 1 (torch's decompose_complex_in_graph, relative error 1.65); log1p and expm1 by
log(1 + z), exp(z) − 1 round 1 + z away near 0. Here:

- sinh, cosh: the real products sinh x · cos y, cosh x · sin y (torch's real sinh/cosh are accurate), with
  e^|x|/2 taken as e^(|x|/2)² where cosh x alone would overflow (as pair_math.exp does), and a zero part
  kept zero (sinh(inf + 0i) = inf + 0i, not inf · sin 0 = nan);
- tanh: Kahan's formula (t = tan y, s = sinh x, β = 1 + t²: (βs·sqrt(1 + s²), t) / (1 + βs²)) up to
  |x| = 20, beyond which tanh x rounds to ±1 in float64: (±1, 4 sin y cos y e^(−2|x|));
- sin, cos, tan: the hyperbolic forms at i·z (sin z = −i sinh(iz), cos z = cosh(iz), tan z = −i tanh(iz));
- asin, asinh, acos, acosh: Kahan's ("Branch cuts for complex elementary functions", 1987): real asinh and
  atan2 of products of principal square roots sqrt(1 ± z), sqrt(z ± 1), which have the right branch cuts
  (signed zeros included) and no cancellation; beyond |z| = 1/sqrt(eps), where those products could
  overflow, their asymptote log(2z) (its error 1/(4z²) is below eps/4);
- atanh, atan: (log1p(4x / ((1 − x)² + y²)) / 4, atan2(2y, (1 − x)(1 + x) − y²) / 2) and beyond
  |z| = sqrt(max)/4 (x² would overflow) its asymptote (x / |z|², ±π/2);
- log1p: log1p((2 + x)·x + y²)/2 for |z| < 1/2 (no 1 + z is ever rounded), log|1 + z| further out;
  expm1: (expm1 x · cos y − 2 sin²(y/2), e^x sin y).
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real import pair_math

LOG2 = math.log(2)


def _stack(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return torch.stack([re, im], -1)


def _parts(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return t[..., 0], t[..., 1]


def times_i(re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """i · z = (−im, re)."""
    return -im, re


def from_times_i(t: torch.Tensor) -> torch.Tensor:
    """−i · w for a pair w = (a, b): (b, −a)."""
    a, b = _parts(t)
    return _stack(b, -a)


def _exp_half_squared(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """e^|x| / 2 · factor, as e^(|x|/2) · (factor / 2) · e^(|x|/2): finite wherever the product is."""
    half = torch.exp(x.abs() * 0.5)
    return (half * factor) * (half * 0.5)  # factor · 0.5 first would round a denormal factor to 0


def _hyperbolic_threshold(dtype: torch.dtype) -> float:
    """|x| beyond which sinh x and cosh x equal e^|x|/2 to the dtype's precision (e^−2|x| below eps)."""
    return 0.5 * -math.log(torch.finfo(dtype).eps) + 1


def _cos_sin(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos y, sin y), sin of a subnormal y taken as y itself (exact: sin y rounds to y there; a kernel that
    flushes subnormals would give 0, and cosh(100) · sin(1e-45) is 0.0188, not 0)."""
    tiny = y.abs() < torch.finfo(y.dtype).tiny
    return torch.cos(y), torch.where(tiny, y, torch.sin(y))


def _zero_of_signs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """±0 with the sign of a · b (a or b infinite or nan included: never inf · 0)."""
    return torch.copysign(torch.zeros_like(a), a) * torch.copysign(torch.ones_like(b), b)


def _sign(x: torch.Tensor) -> torch.Tensor:
    return torch.copysign(torch.ones_like(x), x)


def sinh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sinh(x + iy) = (sinh x cos y, cosh x sin y) as a pair; see the module docstring. A zero part of z
    gives a zero part of the result (Annex G: sinh(±0 + i∞) = ±0 + i·nan, sinh(∞ + 0i) = ∞ + 0i)."""
    cos, sin = _cos_sin(y)
    far = x.abs() > _hyperbolic_threshold(x.dtype)
    re = torch.where(far, _sign(x) * _exp_half_squared(x, cos), torch.sinh(x) * cos)
    im = torch.where(far, _exp_half_squared(x, sin), torch.cosh(x) * sin)
    re = torch.where(x == 0, _zero_of_signs(x, cos), re)
    im = torch.where(y == 0, y, im)
    return _infinite_by_nonfinite(x, y, x, re, im)


def _infinite_by_nonfinite(x, y, infinite_re, re, im) -> torch.Tensor:
    """Annex G: sinh and cosh of ±∞ + i·(∞ or nan) are ±∞ + i·nan (re's sign unspecified), not nan + i·nan."""
    where = torch.isinf(x) & ~torch.isfinite(y)
    return _stack(torch.where(where, infinite_re, re), torch.where(where, torch.nan, im))


def cosh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """cosh(x + iy) = (cosh x cos y, sinh x sin y) as a pair; see the module docstring. A zero part of z
    gives a zero imaginary part (Annex G: cosh(±0 + i∞) = nan ± 0i, cosh(∞ + 0i) = ∞ + 0i)."""
    cos, sin = _cos_sin(y)
    far = x.abs() > _hyperbolic_threshold(x.dtype)
    re = torch.where(far, _exp_half_squared(x, cos), torch.cosh(x) * cos)
    im = torch.where(far, _sign(x) * _exp_half_squared(x, sin), torch.sinh(x) * sin)
    im = torch.where((y == 0) | (x == 0), _zero_of_signs(x, y), im)
    return _infinite_by_nonfinite(x, y, x.abs(), re, im)


def tanh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """tanh(x + iy) by Kahan's formula, its asymptote beyond |x| = 20; see the module docstring."""
    far = x.abs() > 20
    xs = torch.where(far, 0.0, x)  # keep sinh(x)² finite where the asymptote is taken
    t, s = torch.tan(y), torch.sinh(xs)
    beta = 1 + t * t
    rho = torch.sqrt(1 + s * s)
    denominator = 1 + beta * s * s
    re, im = beta * rho * s / denominator, t / denominator
    far_im = torch.where(torch.isinf(x), _zero_of_signs(y, y), 4 * torch.sin(y) * torch.cos(y) * torch.exp(-2 * x.abs()))
    re = torch.where(far, _sign(x), re)
    im = torch.where(far, torch.where(y == 0, y, far_im), im)
    # Annex G: tanh(±0 + iy) = ±0 + i·tan y (nan for infinite y); a finite x with y infinite or nan: nan + i·nan
    re = torch.where(x == 0, x, torch.where(torch.isfinite(x) & ~torch.isfinite(y), torch.nan, re))
    im = torch.where(x == 0, torch.tan(y), torch.where(y == 0, y, im))
    return _stack(re, im)


def sin(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sin z = −i sinh(iz)."""
    return from_times_i(sinh(*times_i(x, y)))


def cos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """cos z = cosh(iz)."""
    return cosh(*times_i(x, y))


def tan(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """tan z = −i tanh(iz)."""
    return from_times_i(tanh(*times_i(x, y)))


# ---- inverse functions -----------------------------------------------------------------------------------


def _large(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Where |z| is past 1/sqrt(eps): the asymptote log(2z) of asinh/acosh is exact to rounding there."""
    return torch.maximum(x.abs(), y.abs()) > torch.finfo(x.dtype).eps ** -0.5


def _log_of_twice(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log 2|z|, angle z) = log(2z), |z| taken as pair_math.log_abs takes it (no overflow)."""
    return pair_math.log_abs(x, y) + LOG2, pair_math.angle(x, y)


def _finite_where(large: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.where(large, 0.0, v)


def _sqrt_parts(re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _parts(pair_math.sqrt(re, im))


def _asin_kahan(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """asin z by Kahan's formula: (atan2(x, Re(sqrt(1 − z)·sqrt(1 + z))), asinh(Im(conj(sqrt(1 − z))·sqrt(1 + z))))."""
    a_re, a_im = _sqrt_parts(1 - x, -y)  # sqrt(1 − z)
    b_re, b_im = _sqrt_parts(1 + x, y)  # sqrt(1 + z)
    return torch.atan2(x, a_re * b_re - a_im * b_im), torch.asinh(a_re * b_im - a_im * b_re)


def asinh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """asinh z = −i asin(iz) by Kahan's asin; beyond 1/sqrt(eps) its asymptote log(2z), mirrored for Re z < 0
    (asinh is odd): (±log 2|z|, atan2(y, |x|)). Annex G: asinh(nan ± 0i) = nan ± 0i, and an infinite part next
    to a nan gives ∞ + i·nan."""
    large = _large(x, y)
    p, q = _asin_kahan(-_finite_where(large, y), _finite_where(large, x))  # asin(iz) = (p, q)
    log_twice, _ = _log_of_twice(x, y)
    re = torch.where(large, torch.copysign(log_twice, x), q)
    im = torch.where(large, pair_math.angle(x.abs(), y), -p)
    im = torch.where(torch.isnan(x) & (y == 0), y, im)
    infinite_by_nan = (torch.isinf(x) & torch.isnan(y)) | (torch.isnan(x) & torch.isinf(y))
    return _stack(torch.where(infinite_by_nan, torch.inf, re), torch.where(infinite_by_nan, torch.nan, im))


def asin(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """asin z = −i asinh(iz)."""
    return from_times_i(asinh(*times_i(x, y)))


def acosh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """acosh z by Kahan's formula: (asinh(Re(conj(sqrt(z − 1))·sqrt(z + 1))), 2 atan2(Im sqrt(z − 1), Re sqrt(z + 1))),
    and log(2z) beyond 1/sqrt(eps) (for every z: sqrt(z − 1)·sqrt(z + 1) tends to z). Annex G:
    acosh(±0 + i·nan) = nan + iπ/2, an infinite part next to a nan gives ∞ + i·nan."""
    large = _large(x, y)
    xs, ys = _finite_where(large, x), _finite_where(large, y)
    a_re, a_im = _sqrt_parts(xs - 1, ys)  # sqrt(z − 1)
    b_re, b_im = _sqrt_parts(xs + 1, ys)  # sqrt(z + 1)
    re = torch.asinh(a_re * b_re + a_im * b_im)
    im = 2 * torch.atan2(a_im, b_re)
    far_re, far_im = _log_of_twice(x, y)
    re, im = torch.where(large, far_re, re), torch.where(large, far_im, im)
    im = torch.where((x == 0) & torch.isnan(y), math.pi / 2, im)
    infinite_by_nan = (torch.isinf(x) & torch.isnan(y)) | (torch.isnan(x) & torch.isinf(y))
    return _stack(torch.where(infinite_by_nan, torch.inf, re), torch.where(infinite_by_nan, torch.nan, im))


def acos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """acos z = (|Im acosh z|, ∓|Re acosh z|), the sign opposite to y's (signbit, so −0 counts as negative)."""
    a, b = _parts(acosh(x, y))
    return _stack(b.abs(), torch.where(torch.signbit(y), a.abs(), -a.abs()))


def atanh(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """atanh z = (log1p(4x / ((1 − x)² + y²)) / 4, atan2(2y, (1 − x)(1 + x) − y²) / 2), the real part as
    (log|1 + z| − log|1 − z|) / 2 where log1p's argument passes ±1/2 (near z = ±1 it would cancel, or
    (1 − x)² + y² underflow); beyond sqrt(max)/4, where x² could overflow, (x / |z|², ±π/2). Annex G:
    atanh(±0 + i·nan) = ±0 + i·nan, and ±0 ± iπ/2 where a part is infinite."""
    far = torch.maximum(x.abs(), y.abs()) > torch.finfo(x.dtype).max ** 0.5 / 4
    xs, ys = _finite_where(far, x), _finite_where(far, y)
    one_minus = 1 - xs
    v = 4 * xs / (one_minus * one_minus + ys * ys)
    near_one = ~(v.abs() < 0.5)
    re = torch.where(near_one, 0.5 * (pair_math.log_abs(1 + xs, ys) - pair_math.log_abs(one_minus, ys)),
                     0.25 * torch.log1p(torch.where(near_one, 0.0, v)))
    im = 0.5 * torch.atan2(2 * ys, one_minus * (1 + xs) - ys * ys)
    h = torch.hypot(x * 0.5, y * 0.5)  # |z| / 2, finite for finite parts
    far_re = x * 0.25 / h / h
    far_im = torch.copysign(torch.full_like(y, math.pi / 2), y)
    re = torch.where(far, far_re, torch.where(x == 0, x, re))
    im = torch.where(far, far_im, im)
    infinite = torch.isinf(x) | torch.isinf(y)  # Annex G: ±0 ± iπ/2, but ±0 + i·nan for ±∞ + i·nan
    far_im = torch.where(torch.isnan(y), y, far_im)
    return _stack(torch.where(infinite, _zero_of_signs(x, x), re), torch.where(infinite, far_im, im))


def atan(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """atan z = −i atanh(iz)."""
    return from_times_i(atanh(*times_i(x, y)))


# ---- near zero -------------------------------------------------------------------------------------------


def log1p(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log(1 + z) as a pair, accurate near 0; see the module docstring."""
    near = torch.maximum(x.abs(), y.abs()) < 0.5
    xs, ys = torch.where(near, x, 0.0), torch.where(near, y, 0.0)
    near_re = 0.5 * torch.log1p((2 + xs) * xs + ys * ys)
    re = torch.where(near, near_re, pair_math.log_abs(1 + x, y))
    return _stack(re, pair_math.angle(1 + x, y))


def expm1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """exp(z) − 1 as a pair, accurate near 0: (expm1 x · cos y − 2 sin²(y/2), e^x sin y); exp(z) − 1 where
    e^x could overflow (x beyond 1)."""
    half_sin = torch.sin(y * 0.5)
    near_re = torch.expm1(x) * torch.cos(y) - 2 * half_sin * half_sin
    e = pair_math.exp(x, y)
    re = torch.where(x > 1, e[..., 0] - 1, near_re)
    im = torch.where(x > 1, e[..., 1], torch.where(y == 0, y, torch.exp(x) * torch.sin(y)))
    return _stack(re, im)
