"""The CPU form of a static-length transform: Stockham (autosort) radix stages as pointwise ops on planes.

Since issue 30's CPU kernel (kernels/fft_cpu.py: the same stages, run per block of 8 rows in cache by one
C++ template kernel, Bluestein inside it for a prime factor above 13), this form computes only the CPU
transforms that kernel does not take: lengths above 32768 (its MAX_N), float64, a transform whose x.shape[dim] is dynamic, and
every transform with AOTCUDA_FFT_CPU_KERNEL off or on a torch without Inductor's C++ templates.

The GEMM form (transform.py) does 6–17× an FFT's flops in skinny GEMMs; on a CPU that measured 4–44×
pocketfft. Here a transform of n = r1·r2·…·rk points is k stages of pointwise butterflies, about an
FFT's flops (plan.cpu_flops), each stage one fused Inductor loop that reads and writes the data once.

Layout inside the transform: two real planes (re, im), each [L, s, B] with the B independent rows
(every leading dim of the pair, flattened) innermost, so that every load and store of a stage is a
contiguous, vectorizable run of B values whatever the stage's stride. A stage of radix r on
[L, s, B] views it as [r, m, s, B] (t = m·t1 + t2), takes the r-point DFT across t1, multiplies by the
twiddle W_L^(t2·k1) and writes [m, r·s, B] (Stockham DIF): after the last stage [1, n, B] holds
the spectrum in natural order. The pair layout [..., n, 2] is read at the start and written at the
end only: an input whose rows are not innermost already (anything but a transform's own output) is first
transposed into a buffer of its own (_rows_innermost: one pass of 16×16 vector transposes), and the
result is a view of the last stage's [n, 2, B] buffer. A normalization's scale rides on the first stage's
loads (c2c) or on the merge (c2r, r2c), never a pass of its own.

r2c and c2r of an even length run one complex transform of n/2 points (even samples as re, odd as im)
and a pointwise split/merge; an odd length runs the complex transform of (x, 0). A length with a prime
factor above 13 (plan.CPU_RADICES) runs as Bluestein's chirp-z over a power of two on the same stages.
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real.pair import real_as_pair
from aotcuda.passes.complex_to_real.spectral import tables
from aotcuda.passes.complex_to_real.spectral.plan import bluestein_power_of_two, cpu_radices

Planes = tuple[torch.Tensor, torch.Tensor]


def _rows_innermost(rows: torch.Tensor) -> torch.Tensor:
    """Rows [B, k] as [k, B] with the rows innermost: a view where the strides say they already are (a
    transform's own output), else a transposed copy in a buffer of its own, which Inductor writes with
    16×16 vector transposes. A transposed view (or a clone of one) would be inlined into the first stage,
    whose loads become scalar gathers (stride 2 between re and im, a row apart between lanes): 5× a stage,
    the largest cost of a transform at n = 512 (benchmarks/scripts/fft_cpu_loops.py). The copy is a
    torch.cat of its two halves because Inductor's CPU backend makes every cat a buffer of its own,
    contiguous (ConcatKernel), and a cat is plain ATen: autograd and every backend take it."""
    moved = rows.t()
    count = rows.numel()
    if (rows.shape[0] == 1 or rows.stride(0) == 1 or moved.shape[0] < 2 or not isinstance(count, int)
            or count * rows.element_size() > COPY_BYTES):
        return moved
    half = moved.shape[0] // 2
    return torch.cat([moved[:half], moved[half:]])


# Above this, the rows-innermost copy is left out: the first stage gathers from the source instead. A copy
# of a large input (a Whisper stft's 38 MB of windowed frames, FreeU's 21–42 MB of feature maps) is a
# pass to and from DRAM and fresh pages every call, and its source is often a pointwise op over a smaller
# tensor (the frames overlap) that the first stage reads in cache; measured slower there (docs/performance.md).
COPY_BYTES = 16 << 20


def _to_planes(x: torch.Tensor) -> tuple[Planes, tuple]:
    """Pair x [..., n, 2] → (re, im) planes [n, B] and the leading shape."""
    lead, n = x.shape[:-2], x.shape[-2]
    flat = x.reshape(-1, n, 2)
    if flat.shape[0] == 1 or flat.stride(0) == 1:
        return (flat[..., 0].t(), flat[..., 1].t()), lead
    both = _rows_innermost(flat.reshape(-1, 2 * n))  # [2n, B]: re and im rows alternate
    return (both[0::2], both[1::2]), lead


def _from_planes(re: torch.Tensor, im: torch.Tensor, lead: tuple) -> torch.Tensor:
    """Planes [n, B] → pair [*lead, n, 2], as a view of one [n, 2, B] buffer (the rows stay innermost
    in memory: the stage that makes re and im writes it in place, and a next transform or pointwise op
    reads it contiguously; interleaving into a row-major pair here costs a scalar copy, 5× a stage)."""
    stacked = torch.stack([re, im], 1)
    return stacked.permute(2, 0, 1).reshape(*lead, re.shape[0], 2)


def _butterfly(xr: list, xi: list, inverse: bool) -> tuple[list, list]:
    """The r-point DFT across r plane slices (r = len(xr)) with Python-constant coefficients: radix 2
    and 4 by hand, an odd r by its symmetry."""
    r = len(xr)
    assert r in (2, 4) or r % 2, f"no butterfly for radix {r}"
    sign = 1.0 if inverse else -1.0
    if r == 2:
        return [xr[0] + xr[1], xr[0] - xr[1]], [xi[0] + xi[1], xi[0] - xi[1]]
    if r == 4:
        ar, ai, br, bi = xr[0] + xr[2], xi[0] + xi[2], xr[1] + xr[3], xi[1] + xi[3]
        cr, ci = xr[0] - xr[2], xi[0] - xi[2]
        dr, di = xr[1] - xr[3], xi[1] - xi[3]
        er, ei = (-di, dr) if inverse else (di, -dr)  # (x1 − x3)·(∓i)
        return [ar + br, cr + er, ar - br, cr - er], [ai + bi, ci + ei, ai - bi, ci - ei]
    return _odd_butterfly(xr, xi, sign)


def _odd_butterfly(xr: list, xi: list, sign: float) -> tuple[list, list]:
    """The r-point DFT for odd r by its symmetry: with a_t = x_t + x_(r−t) and b_t = x_t − x_(r−t),
    y_k = P_k + Q_k and y_(r−k) = P_k − Q_k, P_k = x_0 + Σ a_t·cos θ, Q_k = i·sign·Σ b_t·sin θ
    (θ = 2π·t·k/r, t, k ≤ (r − 1)/2): a quarter of the direct sum's multiplies."""
    r, half = len(xr), len(xr) // 2
    ar = [xr[t] + xr[r - t] for t in range(1, half + 1)]
    ai = [xi[t] + xi[r - t] for t in range(1, half + 1)]
    br = [xr[t] - xr[r - t] for t in range(1, half + 1)]
    bi = [xi[t] - xi[r - t] for t in range(1, half + 1)]
    out_r, out_i = [None] * r, [None] * r
    out_r[0], out_i[0] = xr[0] + sum(ar[1:], ar[0]), xi[0] + sum(ai[1:], ai[0])
    for k in range(1, half + 1):
        pr, pi, qr, qi = xr[0], xi[0], 0.0, 0.0
        for t in range(1, half + 1):
            theta = 2 * math.pi * ((t * k) % r) / r
            c, s = math.cos(theta), sign * math.sin(theta)
            pr, pi = pr + ar[t - 1] * c, pi + ai[t - 1] * c
            qr, qi = qr - bi[t - 1] * s, qi + br[t - 1] * s  # i·s·b
        out_r[k], out_i[k] = pr + qr, pi + qi
        out_r[r - k], out_i[r - k] = pr - qr, pi - qi
    return out_r, out_i


def _stage(re: torch.Tensor, im: torch.Tensor, r: int, inverse: bool) -> Planes:
    """One radix-r stage: [L, s, B] → [L/r, r·s, B]. The twiddles multiply each butterfly output before
    the stack, so that the stage is one kernel writing its output once."""
    length, s = re.shape[0], re.shape[1]
    m = length // r
    xr = list(re.reshape(r, m, *re.shape[1:]).unbind(0))
    xi = list(im.reshape(r, m, *im.shape[1:]).unbind(0))
    yr, yi = _butterfly(xr, xi, inverse)
    if m > 1:
        twiddles = tables.stage_twiddles(r, m, inverse, re.dtype, re.device).unbind(0)
        for k in range(1, r):
            c, sn = twiddles[k].unbind(0)
            yr[k], yi[k] = yr[k] * c - yi[k] * sn, yr[k] * sn + yi[k] * c
    new = (m, r * s, *re.shape[2:])
    return torch.stack(yr, 1).reshape(new), torch.stack(yi, 1).reshape(new)


def _bluestein(re: torch.Tensor, im: torch.Tensor, inverse: bool) -> Planes:
    """X = c·IDFT_m(DFT_m(c·x)·B) on planes [n, B], m the power of two ≥ 2n − 1 (transform.py's math)."""
    n = re.shape[0]
    m = bluestein_power_of_two(n)
    c = tables.chirp(n, inverse, re.dtype, re.device)
    cr, ci = c[:, 0, None], c[:, 1, None]
    ar, ai = re * cr - im * ci, re * ci + im * cr
    pad = [0, 0, 0, m - n]
    sr, si = _planes_fft(torch.constant_pad_nd(ar, pad), torch.constant_pad_nd(ai, pad), False)
    b = tables.chirp_filter_spectrum(n, m, inverse, re.dtype, re.device)
    br, bi = b[:, 0, None], b[:, 1, None]
    sr, si = sr * br - si * bi, sr * bi + si * br
    vr, vi = _planes_fft(sr, si, True)
    vr, vi = vr[:n], vi[:n]
    return vr * cr - vi * ci, vr * ci + vi * cr


def _planes_fft(re: torch.Tensor, im: torch.Tensor, inverse: bool) -> Planes:
    """The DFT along dim 0 of planes [n, B] (natural order in and out, unscaled)."""
    n = re.shape[0]
    radices = cpu_radices(n)
    if radices is None:
        return _bluestein(re, im, inverse)
    re, im = re[:, None], im[:, None]
    for r in radices:
        re, im = _stage(re, im, r, inverse)
    return re[0], im[0]


def _scaled(re: torch.Tensor, im: torch.Tensor, scale: float) -> Planes:
    return (re, im) if scale == 1.0 else (re * scale, im * scale)


def transform(x: torch.Tensor, inverse: bool, scale: float) -> torch.Tensor:
    """The DFT (inverse: exp(+2πi…)) of pair x [..., n, 2] along its complex last dim, times `scale`."""
    (re, im), lead = _to_planes(x)
    re, im = _planes_fft(*_scaled(re, im, scale), inverse)  # the scale fuses into the first stage's loads
    return _from_planes(re, im, lead)


def r2c(x: torch.Tensor, bins: int, scale: float, full_spectrum) -> torch.Tensor:
    """The first `bins` (n//2 + 1 or n) DFT bins of real x [..., n], as a pair [..., bins, 2].

    Even n: Z = DFT_{n/2}(x[0::2] + i·x[1::2]), then X[k] = E[k] + W_n^k·O[k] with
    E = (Z[k] + conj Z[m−k])/2, O = (Z[k] − conj Z[m−k])/2i. `full_spectrum(half, n)` mirrors the
    half to all n bins when onesided is off (transform.hermitian_spectrum)."""
    n = x.shape[-1]
    lead = x.shape[:-1]
    if n % 2:
        return transform(real_as_pair(x).t, False, scale).narrow(-2, 0, bins)
    m = n // 2
    (zr, zi), _ = _to_planes(x.reshape(*lead, m, 2))
    zr, zi = _planes_fft(zr, zi, False)
    k = torch.arange(m + 1, device=x.device)
    ahead, mirrored = k % m, (m - k) % m  # Z[k] and Z[m − k] for k ≤ m (Z[m] = Z[0]): row gathers
    zr, zi, rr, ri = zr[ahead], zi[ahead], zr[mirrored], zi[mirrored]
    er, ei = (zr + rr) * 0.5, (zi - ri) * 0.5
    o_r, o_i = (zi + ri) * 0.5, (rr - zr) * 0.5
    w = tables.half_twiddles(n, m + 1, False, x.dtype, x.device)
    c, s = w[0], w[1]
    xr, xi = _scaled(er + c * o_r - s * o_i, ei + c * o_i + s * o_r, scale)
    half = _from_planes(xr, xi, lead)
    return half if bins <= m + 1 else full_spectrum(half, n)


def c2r(half: torch.Tensor, n: int, scale: float, full_spectrum) -> torch.Tensor:
    """The real inverse DFT of length n from the Hermitian half [..., n//2 + 1, 2] (already cropped or
    padded to n//2 + 1 bins); the imaginary parts of bins 0 and n/2 drop out, as in pocketfft.

    Even n: Z[k] = (X[k] + conj X[m−k]) + i·W_n^(−k)·(X[k] − conj X[m−k]), k < m = n/2, and
    x[2t] + i·x[2t+1] = IDFT_m(Z)[t]. Odd n: `full_spectrum(half, n)` and a complex inverse."""
    lead = half.shape[:-2]
    if n % 2:
        return transform(full_spectrum(half, n), True, scale)[..., 0]
    m = n // 2
    (xr, xi), _ = _to_planes(half)
    rr, ri = xr.flip(0)[:m], xi.flip(0)[:m]  # X[m − k]
    xr, xi = xr[:m], xi[:m]
    # Bins 0 and m of a real signal have no imaginary part: for k < m, Im X[k] and Im X[m − k] are both
    # dropped at k = 0 only, by a table (not by masking xi first, which made it a buffer of its own),
    # and the scale multiplies the merged planes, so that this is one pass with the product before it.
    inner = tables.inner_bins(m, half.dtype, half.device)[:m]
    ar, ai = xr + rr, (xi - ri) * inner
    br, bi = xr - rr, (xi + ri) * inner
    w = tables.half_twiddles(n, m, True, half.dtype, half.device)
    c, s = w[0], w[1]
    cr, ci = br * c - bi * s, br * s + bi * c
    zr, zi = _planes_fft(*_scaled(ar - ci, ai + cr, scale), True)
    return torch.stack([zr, zi], 1).reshape(n, -1).t().reshape(*lead, n)  # x[2t + j] = z_j[t]
