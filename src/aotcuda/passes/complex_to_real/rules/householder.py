"""Householder QR on complex matrices, as LAPACK computes it: geqrf, householder_product (orgqr), ormqr and QR.

A QR factorization is unique only up to the phases of R's diagonal; LAPACK fixes them in zlarfg, its reflector
H = I − τ v v^H (v₀ = 1) that maps a column x to (β, 0, …, 0) with β real: β = −sign(Re x₀)·‖x‖,
τ = ((β − Re x₀)/β, −Im x₀/β), v = x / (x₀ − β) below its 1 (τ = 0 where x is already (real, 0, …)). The rules
below run that same algorithm (zgeqr2, zung2r, zunm2r) column by column on the pair's parts, unrolled over the
min(m, n) columns (static shapes), so their results are LAPACK's up to rounding. Not covered: LAPACK's rescaling
of columns whose norm underflows (below about 1e-292 in float64), where it changes the rounding, not the result.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.pair_algebra import result_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.linalg_factors import results_read, stand_in as _stand_in

aten = torch.ops.aten


def _mul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def _reflector(x_re: torch.Tensor, x_im: torch.Tensor):
    """zlarfg of the columns x ([..., m]): (β, the tail of v, τ re, τ im)."""
    alpha_r, alpha_i, tail_r, tail_i = x_re[..., 0], x_im[..., 0], x_re[..., 1:], x_im[..., 1:]
    tail_norm = torch.linalg.vector_norm(torch.stack([tail_r, tail_i], -1), dim=(-2, -1))
    norm = torch.hypot(torch.hypot(alpha_r, alpha_i), tail_norm)
    beta = torch.where(alpha_r >= 0, -norm, norm)
    trivial = (tail_norm == 0) & (alpha_i == 0)
    safe_beta = torch.where(trivial, torch.ones_like(beta), beta)
    tau_r = torch.where(trivial, 0.0, (beta - alpha_r) / safe_beta)
    tau_i = torch.where(trivial, 0.0, -alpha_i / safe_beta)
    d_r, d_i = alpha_r - beta, alpha_i  # v = tail / (x₀ − β)
    d2 = torch.where(trivial, torch.ones_like(d_r), d_r * d_r + d_i * d_i)
    v_r, v_i = _mul(tail_r, tail_i, (d_r / d2).unsqueeze(-1), (-d_i / d2).unsqueeze(-1))
    v_r, v_i = torch.where(trivial.unsqueeze(-1), tail_r, v_r), torch.where(trivial.unsqueeze(-1), tail_i, v_i)
    return torch.where(trivial, alpha_r, beta), v_r, v_i, tau_r, tau_i


def _apply_left(v_r, v_i, tau_r, tau_i, c_r, c_i):
    """C − τ v (v^H C) for vectors v [..., m], matrices C [..., m, n], numbers τ [...]."""
    w_r = (v_r.unsqueeze(-1) * c_r + v_i.unsqueeze(-1) * c_i).sum(-2)  # v^H C
    w_i = (v_r.unsqueeze(-1) * c_i - v_i.unsqueeze(-1) * c_r).sum(-2)
    s_r, s_i = _mul(tau_r.unsqueeze(-1), tau_i.unsqueeze(-1), w_r, w_i)
    u_r, u_i = _mul(v_r.unsqueeze(-1), v_i.unsqueeze(-1), s_r.unsqueeze(-2), s_i.unsqueeze(-2))
    return c_r - u_r, c_i - u_i


def _unit_vector(a_r, a_i, i: int):
    """Reflector i's v from packed factors: 1 at row i, the column's entries below it."""
    one = torch.ones_like(a_r[..., i:i + 1, i])
    return torch.cat([one, a_r[..., i + 1:, i]], -1), torch.cat([torch.zeros_like(one), a_i[..., i + 1:, i]], -1)


def geqrf_parts(a_r: torch.Tensor, a_i: torch.Tensor):
    """zgeqr2: (packed R and reflectors, τ) as parts."""
    m, n = a_r.shape[-2], a_r.shape[-1]
    taus = []
    for i in range(min(m, n)):
        beta, v_r, v_i, tau_r, tau_i = _reflector(a_r[..., i:, i], a_i[..., i:, i])
        taus.append((tau_r, tau_i))
        col_r = torch.cat([a_r[..., :i, i], beta.unsqueeze(-1), v_r], -1)
        col_i = torch.cat([a_i[..., :i, i], torch.zeros_like(beta).unsqueeze(-1), v_i], -1)
        one = torch.ones_like(beta).unsqueeze(-1)
        rest_r, rest_i = _apply_left(torch.cat([one, v_r], -1), torch.cat([0 * one, v_i], -1), tau_r, -tau_i,
                                     a_r[..., i:, i + 1:], a_i[..., i:, i + 1:])  # H^H: conj(τ)
        rest_r = torch.cat([a_r[..., :i, i + 1:], rest_r], -2)
        rest_i = torch.cat([a_i[..., :i, i + 1:], rest_i], -2)
        a_r = torch.cat([a_r[..., :i], col_r.unsqueeze(-1), rest_r], -1)
        a_i = torch.cat([a_i[..., :i], col_i.unsqueeze(-1), rest_i], -1)
    tau = torch.stack([torch.stack([r for r, _ in taus], -1), torch.stack([i for _, i in taus], -1)], -1) \
        if taus else a_r.new_zeros(*a_r.shape[:-2], 0, 2)
    return a_r, a_i, tau


def _apply_reflectors(a: Pair, tau: Pair, c_r, c_i, order, conjugate: bool, left: bool):
    """C multiplied by the reflectors of `a` in `order` (each H, or H^H if conjugate), from the left or right
    (reflector i touches C's rows i: from the left, its columns i: from the right)."""
    if not left:  # C H = (H^H C^H)^H
        c_r, c_i = _apply_reflectors(a, tau, c_r.transpose(-2, -1), -c_i.transpose(-2, -1), order, not conjugate, True)
        return c_r.transpose(-2, -1), -c_i.transpose(-2, -1)
    for i in order:
        v_r, v_i = _unit_vector(a.re, a.im, i)
        t_r, t_i = tau.re[..., i], tau.im[..., i] * (-1 if conjugate else 1)
        new_r, new_i = _apply_left(v_r, v_i, t_r, t_i, c_r[..., i:, :], c_i[..., i:, :])
        c_r, c_i = torch.cat([c_r[..., :i, :], new_r], -2), torch.cat([c_i[..., :i, :], new_i], -2)
    return c_r, c_i


@register(aten.geqrf.default, computes=True)
def geqrf(out, a):
    """(R above the diagonal and the reflectors below it, τ), by LAPACK's zgeqr2 on the parts."""
    t = a.t.to(result_dtype(out[0]))
    a_r, a_i, tau = geqrf_parts(t[..., 0], t[..., 1])
    return [Pair(torch.stack([a_r, a_i], -1)), Pair(tau)]


def householder_pairs(a: Pair, tau: Pair, columns: int) -> Pair:
    """zung2r: H₁ H₂ … H_k applied to the first `columns` columns of the identity."""
    m = a.shape[-2]
    eye = torch.eye(m, columns, dtype=a.dtype, device=a.t.device).expand(*a.shape[:-2], m, columns)
    q_r, q_i = _apply_reflectors(a, tau, eye, torch.zeros_like(eye), reversed(range(tau.shape[-1])), False, True)
    return Pair(torch.stack([q_r, q_i], -1))


@register(aten.linalg_householder_product.default, computes=True)
def linalg_householder_product(out, a, tau):
    """Q = H₁ … H_k (its first n columns), by LAPACK's zung2r on the parts."""
    return householder_pairs(a, tau, a.shape[-1])


@register(aten.ormqr.default, computes=True)
def ormqr(out, a, tau, c, left=True, transpose=False):
    """Q C, Q^H C, C Q or C Q^H for Q = H₁ … H_k, by LAPACK's zunm2r on the parts (reflectors in its order)."""
    k = tau.shape[-1]
    forward = left == transpose  # Q^H C and C Q apply H₁ first
    order = range(k) if forward else reversed(range(k))
    c_r, c_i = _apply_reflectors(a, tau, c.re, c.im, order, transpose, left)
    return Pair(torch.stack([c_r, c_i], -1))


@register(aten.linalg_qr.default, computes=True)
def linalg_qr(out, a, mode="reduced"):
    """(Q, R) from geqrf and the Householder product (Q empty for mode "r"), as torch's own QR computes them."""
    t = a.t.to(result_dtype(out[1]))
    m, n = a.shape[-2], a.shape[-1]
    a_r, a_i, tau = geqrf_parts(t[..., 0], t[..., 1])
    rows = m if mode == "complete" else min(m, n)
    packed = torch.stack([a_r, a_i], -1)
    r = Pair(torch.triu(packed[..., :rows, :, :].movedim(-1, 0)).movedim(0, -1))
    if mode == "r":
        return [Pair(torch.zeros([*out[0].shape, 2], dtype=t.dtype, device=t.device)), r]
    if rows > n:  # complete, m > n: Q is m×m; the reflectors are the first n columns
        packed = torch.cat([packed, packed.new_zeros(*packed.shape[:-2], rows - n, 2)], -2)
    return [householder_pairs(Pair(packed), Pair(tau), rows), r]


# ---- determinants: det A = det(H₁ … H_n) · det R, det H = 1 − τ v^H v, R's diagonal real -------------------------


def _lu_read(node: torch.fx.Node) -> str | None:
    """`torch.linalg.det(A)`, `torch.linalg.slogdet(A)` whose LU factors or pivots are read: the determinant has a rule.

    It is computed from a QR factorization (unique, and LAPACK's: see above), whose factors are not LU's."""
    factors = {1, 2} if node.target is aten._linalg_det.default else {2, 3}
    if results_read(node) & factors:
        return "the LU factors and pivots of a determinant have no rule (it is computed through QR, not LU)"
    return None


def _determinant_factors(a: Pair):
    """(R's diagonal, the reflectors' determinants as parts) of a square matrix's QR."""
    a_r, a_i, tau = geqrf_parts(a.t[..., 0], a.t[..., 1])
    reflectors = []
    for i in range(a.shape[-1]):
        v_r, v_i = _unit_vector(a_r, a_i, i)
        length = (v_r * v_r + v_i * v_i).sum(-1)
        reflectors.append((1 - tau[..., i, 0] * length, -tau[..., i, 1] * length))
    return torch.diagonal(a_r, 0, -2, -1), reflectors


def _product(factors, start):
    re, im = start
    for f_r, f_i in factors:
        re, im = _mul(re, im, f_r, f_i)
    return re, im


@register(aten._linalg_det.default, refuses=_lu_read, computes=True)
def linalg_det(out, a):
    """(det A, no LU, no pivots): the product of the reflectors' determinants and of R's diagonal."""
    diagonal, reflectors = _determinant_factors(Pair(a.t.to(result_dtype(out[0]))))
    r = diagonal.prod(-1)
    det = _product(reflectors, (r, torch.zeros_like(r)))
    return [Pair(torch.stack(det, -1)), *(_stand_in(o) for o in out[1:])]


@register(aten._linalg_slogdet.default, refuses=_lu_read, computes=True)
def linalg_slogdet(out, a):
    """(sign, log |det A|, no LU, no pivots) from the same factors: phases multiplied, logs of magnitudes added."""
    diagonal, reflectors = _determinant_factors(Pair(a.t.to(result_dtype(out[1]))))
    magnitudes = [torch.hypot(r, i) for r, i in reflectors]
    phases = [(r / m, i / m) for (r, i), m in zip(reflectors, magnitudes)]
    r = torch.sign(diagonal).prod(-1)
    sign = _product(phases, (r, torch.zeros_like(r)))
    log_abs = torch.log(diagonal.abs()).sum(-1) + sum((torch.log(m) for m in magnitudes), torch.zeros_like(sign[0]))
    return [Pair(torch.stack(sign, -1)), log_abs, *(_stand_in(o) for o in out[2:])]
