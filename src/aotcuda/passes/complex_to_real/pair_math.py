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


def divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a / b for pair tensors (broadcasting), by Smith's method, operation for operation as c10::complex
    divides (numpy's algorithm): scale by the larger part of b, so nothing squares |b|.

    Dividing by (0, 0) gives (re / 0, im / 0), as eager: inf for a nonzero part, nan for a zero one.
    """
    b_re_larger = b[..., :1].abs() >= b[..., 1:].abs()  # nan in b: False, as in c10's branch
    pq = torch.where(b_re_larger, b, b.flip(-1))  # (p, q): b's larger part first
    p, q = pq[..., :1], pq[..., 1:]
    ratio = q / p
    scale = 1 / (p + q * ratio)
    xy = torch.where(b_re_larger, a, a.flip(-1))
    x, y = xy[..., :1], xy[..., 1:]
    re = (x + y * ratio) * scale
    im = torch.where(b_re_larger, y - x * ratio, x * ratio - y) * scale
    by_zero = (b == 0).all(-1, keepdim=True)
    return torch.where(by_zero, a / b.abs(), torch.cat([re, im], -1))


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
