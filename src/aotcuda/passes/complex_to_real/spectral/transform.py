"""Transforms of static length along the last complex dim of a pair, from small DFT products.

Four-step Cooley–Tukey for n = n1·n2 with t = n2·t1 + t2 and k = k1 + n1·k2:
    X[k1 + n1·k2] = Σ_t2 W_n^(t2·k1) · (Σ_t1 x[n2·t1 + t2] · W_n1^(t1·k1)) · W_n2^(t2·k2)
On a pair [..., n, 2]: view as [..., n1, n2, 2], move t1 last, one GEMM with the [2·n1, 2·n1] DFT
table ([..., n2, k1, 2]), multiply by the twiddle table, move t2 last and transform it the same way
([..., k1, k2, 2]), then read it out as k = k1 + n1·k2. The transposes are pointwise copies that
Inductor fuses with the twiddle product. Bluestein turns a length with a large prime factor into a
convolution of power-of-two length m: X = c·IDFT_m(DFT_m(c·x) · B) with c the chirp and B the
kernel's spectrum (a table).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.spectral import stockham, tables
from aotcuda.passes.complex_to_real.spectral.plan import Plan, plan


def on_cpu(x: torch.Tensor) -> bool:
    """Whether x (the traced node's fake tensor) lives on the CPU: the transform takes the CPU form
    (Stockham stages, stockham.py) there and the GEMM form (DFT products, this module) elsewhere."""
    return x.device.type == "cpu"


def cmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Complex product of two pairs (trailing dim 2), broadcasting."""
    ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    return torch.stack([ar * br - ai * bi, ar * bi + ai * br], -1)


def _direct(x: torch.Tensor, inverse: bool, scale: float) -> torch.Tensor:
    n = x.shape[-2]
    matrix = tables.c2c_matrix(n, inverse, scale, x.dtype, x.device)
    return torch.matmul(x.flatten(-2), matrix).unflatten(-1, (n, 2))


def _split_tail(y: torch.Tensor, p: Plan, inverse: bool) -> torch.Tensor:
    """After the first stage: y = [..., n2, k1, 2] (already scaled); twiddle, transform t2, read out k."""
    n1, n2 = p.first, p.n // p.first
    y = cmul(y, tables.twiddles(n1, n2, inverse, y.dtype, y.device))
    z = transform(y.transpose(-3, -2), p.rest, inverse, 1.0)  # [..., k1, k2, 2]
    return z.transpose(-3, -2).flatten(-3, -2)


def _bluestein(x: torch.Tensor, p: Plan, inverse: bool, scale: float) -> torch.Tensor:
    n, m = p.n, p.padded.n
    c = tables.chirp(n, inverse, x.dtype, x.device)
    a = torch.constant_pad_nd(cmul(x, c), [0, 0, 0, m - n])
    spectrum = transform(a, p.padded, False, 1.0)
    spectrum = cmul(spectrum, tables.chirp_filter_spectrum(n, m, inverse, x.dtype, x.device))
    convolved = transform(spectrum, p.padded, True, 1.0).narrow(-2, 0, n)
    out = cmul(convolved, c)
    return out * scale if scale != 1.0 else out


def transform(x: torch.Tensor, p: Plan | None, inverse: bool, scale: float) -> torch.Tensor:
    """The DFT (inverse: exp(+2πi…)) of pair x [..., n, 2] along its complex last dim, times `scale`.
    On the CPU, Stockham stages (stockham.py; `p` is the GEMM form's plan and unused there)."""
    if on_cpu(x):
        return stockham.transform(x, inverse, scale)
    p = p or plan(x.shape[-2])
    if p.kind == "direct":
        return _direct(x, inverse, scale)
    if p.kind == "bluestein":
        return _bluestein(x, p, inverse, scale)
    moved = x.unflatten(-2, (p.first, p.n // p.first)).transpose(-3, -2)  # [..., n2, t1, 2]
    return _split_tail(_direct(moved, inverse, scale), p, inverse)


def r2c(x: torch.Tensor, bins: int, scale: float) -> torch.Tensor:
    """The first `bins` DFT bins of real x [..., n] along its last dim, as a pair [..., bins, 2]."""
    n = x.shape[-1]
    if on_cpu(x):
        return stockham.r2c(x, bins, scale, hermitian_spectrum)
    p = plan(n)
    if p.kind == "direct":
        matrix = tables.r2c_matrix(n, bins, scale, x.dtype, x.device)
        return torch.matmul(x, matrix).unflatten(-1, (bins, 2))
    if p.kind == "bluestein":
        full = transform(torch.constant_pad_nd(x.unsqueeze(-1), [0, 1]), p, False, scale)
        return full.narrow(-2, 0, bins)
    n1 = p.first
    moved = x.unflatten(-1, (n1, n // n1)).transpose(-2, -1)  # [..., n2, t1]: real first stage
    first = torch.matmul(moved, tables.r2c_matrix(n1, n1, scale, x.dtype, x.device)).unflatten(-1, (n1, 2))
    return _split_tail(first, p, False).narrow(-2, 0, bins)


def hermitian_half(x: torch.Tensor, n) -> torch.Tensor:
    """The n//2 + 1 bins a length-n c2r reads from x [..., bins, 2]: more are cropped, fewer zero-padded
    (written without comparing sizes, so that dynamic ones need no guard)."""
    half = n // 2 + 1
    missing = torch.sym_max(half - x.shape[-2], 0)
    if not (isinstance(missing, int) and missing == 0):
        x = torch.constant_pad_nd(x, [0, 0, 0, missing])
    return x.narrow(-2, 0, half)


def hermitian_spectrum(x: torch.Tensor, n) -> torch.Tensor:
    """All n bins [..., n, 2] of the spectrum of a real signal from its half x: X[n − k] = conj(X[k]).

    One gather with an index computed from n (k below n//2 + 1, else n − k) and a sign on the imaginary
    parts: no flip or cat of a dynamically sized piece, whose layout checks would guard on its size.
    """
    x = hermitian_half(x, n)
    k = torch.arange(n, device=x.device)
    mirrored = k >= x.shape[-2]
    gathered = x.index_select(-2, torch.where(mirrored, n - k, k))
    imaginary_sign = torch.where(mirrored, -1.0, 1.0).to(x.dtype)
    return torch.stack([gathered[..., 0], gathered[..., 1] * imaginary_sign], -1)


def c2r(x: torch.Tensor, n: int, scale: float) -> torch.Tensor:
    """The real inverse DFT of length n from the Hermitian half x [..., bins, 2] (bins ≥ n//2 + 1 read,
    fewer zero-padded); the imaginary parts of bins 0 and n/2 drop out, as in pocketfft."""
    if on_cpu(x):
        return stockham.c2r(hermitian_half(x, n), n, scale, hermitian_spectrum)
    if plan(n).kind == "direct":  # one product straight to the real signal, half the work of a c2c
        x = hermitian_half(x, n)
        return torch.matmul(x.flatten(-2), tables.c2r_matrix(x.shape[-2], n, scale, x.dtype, x.device))
    return transform(hermitian_spectrum(x, n), None, True, scale)[..., 0]

