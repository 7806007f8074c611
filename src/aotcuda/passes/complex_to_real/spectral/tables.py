"""DFT, twiddle and chirp tables, computed once at rewrite time in float64 and kept as program constants.

Each table is a real tensor made outside the trace (no fake mode, no proxy): make_fx records it as a
tensor constant (get_attr), and the rebuilt ExportedProgram lifts it into its constants, so the
compiled program reads it instead of recomputing cos/sin each call. Angles are reduced exactly in
integers (k·t mod n) before they become float64, so tables are accurate to float64 rounding for any n.
One table per (kind, sizes, dtype, device) and trace, shared by every transform that needs it.

The `*_values` builders are plain torch code on an int or SymInt length: called outside the trace they
make a constant, called inside it (spectral/dynamic.py, a transform of dynamic length) they are traced
into the graph and run each call.
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real.pair import shared_table
from aotcuda.passes.complex_to_real.torch_internals import disable_proxy_modes_tracing, unset_fake_temporarily


def _exp(phase_num: torch.Tensor, n, sign: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sign·sin of 2π·phase_num/n (phase_num an exact integer tensor, n an int or SymInt), in float64."""
    theta = phase_num.to(torch.float64) * (2 * math.pi) / n
    return theta.cos(), sign * theta.sin()


def _constant(key: tuple, make, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    def build():
        with unset_fake_temporarily(), disable_proxy_modes_tracing():
            return make().to(dtype=dtype, device=device).contiguous()
    return shared_table(("spectral", *key, dtype, str(device)), build)


def c2c_values(n, inverse: bool, device=None, outputs=None) -> torch.Tensor:
    """[2n, 2·outputs] float64 matrix M (outputs None: all n bins): an interleaved complex row x (length n) times M
    is its DFT's first `outputs` bins (an r2c's n//2 + 1 of a dynamic n are made so, not cut from all n:
    spectral/dynamic.py's r2c_along says why).

    Y_re = x_re·C − x_im·S, Y_im = x_re·S + x_im·C with C + iS = exp(∓2πi·t·k/n).
    """
    t = torch.arange(n, dtype=torch.int64, device=device)
    k = t if outputs is None else torch.arange(outputs, dtype=torch.int64, device=device)
    c, s = _exp((t[:, None] * k[None, :]) % n, n, 1.0 if inverse else -1.0)
    top = torch.stack([c, s], -1)  # rows from x_re: (re, im) of each output
    bottom = torch.stack([-s, c], -1)  # rows from x_im
    return torch.stack([top, bottom], 1).reshape(2 * n, 2 * (n if outputs is None else outputs))


def c2c_matrix(n: int, inverse: bool, scale: float, dtype, device) -> torch.Tensor:
    """c2c_values(n, inverse) · scale as a program constant."""
    return _constant(("c2c", n, inverse, scale), lambda: c2c_values(n, inverse) * scale, dtype, device)


def r2c_matrix(n: int, bins: int, scale: float, dtype, device) -> torch.Tensor:
    """[n, 2·bins] real matrix taking a real row of length n to its first `bins` DFT bins, interleaved."""
    def make():
        t, k = torch.arange(n, dtype=torch.int64), torch.arange(bins, dtype=torch.int64)
        c, s = _exp((t[:, None] * k[None, :]) % n, n, -1.0)
        return (torch.stack([c, s], -1) * scale).reshape(n, 2 * bins)
    return _constant(("r2c", n, bins, scale), make, dtype, device)


def twiddles(n1: int, n2: int, inverse: bool, dtype, device) -> torch.Tensor:
    """[n2, n1, 2] pairs exp(∓2πi·t2·k1/(n1·n2)): the four-step twiddle between the two DFT stages."""
    def make():
        t2, k1 = torch.arange(n2, dtype=torch.int64), torch.arange(n1, dtype=torch.int64)
        n = n1 * n2
        c, s = _exp((t2[:, None] * k1[None, :]) % n, n, 1.0 if inverse else -1.0)
        return torch.stack([c, s], -1)
    return _constant(("twiddle", n1, n2, inverse), make, dtype, device)


def chirp_values(n, inverse: bool, device=None) -> torch.Tensor:
    """[n, 2] float64 pairs exp(∓πi·t²/n) (Bluestein's c[t]; t² reduced mod 2n exactly)."""
    t = torch.arange(n, dtype=torch.int64, device=device)
    c, s = _exp((t * t) % (2 * n), 2 * n, 1.0 if inverse else -1.0)
    return torch.stack([c, s], -1)


def chirp(n: int, inverse: bool, dtype, device) -> torch.Tensor:
    """chirp_values(n, inverse) as a program constant."""
    return _constant(("chirp", n, inverse), lambda: chirp_values(n, inverse), dtype, device)


def chirp_kernel_values(n, m: int, inverse: bool, device=None) -> torch.Tensor:
    """[m, 2] float64 pairs: Bluestein's convolution kernel b[j] = exp(±πi·j²/n) laid out circularly
    (at j and m − j for 0 ≤ j < n, zeros between; m ≥ 2n − 1). Built over the static index range m with
    a mask, so that a dynamic n makes no tensor of dynamic size (and no guard on one)."""
    j = torch.arange(m, dtype=torch.int64, device=device)
    distance = torch.where(j < n, j, m - j)
    c, s = _exp((distance * distance) % (2 * n), 2 * n, -1.0 if inverse else 1.0)
    inside = ((j < n) | (j > m - n)).to(torch.float64)
    return torch.stack([c * inside, s * inside], -1)


def chirp_filter_spectrum(n: int, m: int, inverse: bool, dtype, device) -> torch.Tensor:
    """[m, 2] pairs: the length-m DFT (scaled by 1/m) of chirp_kernel_values, computed in float64 with
    torch.fft, as a program constant."""
    def make():
        b = torch.view_as_complex(chirp_kernel_values(n, m, inverse).contiguous())
        return torch.view_as_real(torch.fft.fft(b) / m)
    return _constant(("chirp_filter", n, m, inverse), make, dtype, device)


def c2r_matrix(bins: int, n: int, scale: float, dtype, device) -> torch.Tensor:
    """[2·bins, n] real matrix taking the Hermitian half (bins = n//2 + 1, interleaved) to the real
    signal: out[t] = Σ_j w_j·(Re X_j·cos θ − Im X_j·sin θ), θ = 2π·j·t/n, w_j = 1 for j = 0 and
    j = n/2, else 2 (the negative frequencies are the conjugates of the positive ones)."""
    def make():
        j, t = torch.arange(bins, dtype=torch.int64), torch.arange(n, dtype=torch.int64)
        c, s = _exp((j[:, None] * t[None, :]) % n, n, 1.0)
        twice = torch.where((j == 0) | (2 * j == n), 1.0, 2.0).to(torch.float64)[:, None] * scale
        return torch.stack([c * twice, -s * twice], 1).reshape(2 * bins, n)
    return _constant(("c2r", bins, n, scale), make, dtype, device)


def stage_twiddles(r: int, m: int, inverse: bool, dtype, device) -> torch.Tensor:
    """[r, 2, m, 1, 1] cos and ±sin of 2π·k1·t2/(r·m): a radix-r Stockham stage's twiddles (stockham.py),
    laid out so that one unbind gives each k1's (cos, sin), broadcasting over the stage's [m, s, B]."""
    def make():
        k1, t2 = torch.arange(r, dtype=torch.int64), torch.arange(m, dtype=torch.int64)
        c, s = _exp((k1[:, None] * t2[None, :]) % (r * m), r * m, 1.0 if inverse else -1.0)
        return torch.stack([c, s], 1)[..., None, None]
    return _constant(("stockham_twiddle", r, m, inverse), make, dtype, device)


def half_twiddles(n: int, count: int, inverse: bool, dtype, device) -> torch.Tensor:
    """[2, count, 1] cos and ±sin of 2π·k/n for k < count: the split (r2c) or merge (c2r) of a real
    length-n transform run as a complex one of n/2 points, broadcasting over the rows."""
    def make():
        k = torch.arange(count, dtype=torch.int64)
        c, s = _exp(k % n, n, 1.0 if inverse else -1.0)
        return torch.stack([c, s])[:, :, None]
    return _constant(("stockham_half", n, count, inverse), make, dtype, device)


def inner_bins(m: int, dtype, device) -> torch.Tensor:
    """[m + 1, 1]: 0 at bins 0 and m, 1 between (the bins of a length-2m real signal's spectrum whose
    imaginary parts a c2r reads; pocketfft drops the other two)."""
    def make():
        k = torch.arange(m + 1)
        return ((k != 0) & (k != m)).to(torch.float64)[:, None]
    return _constant(("inner_bins", m), make, dtype, device)


def fft_kernel_tables(n: int, inverse: bool, device) -> torch.Tensor:
    """The float32 `tables` operand of aotcuda::fft_rows for length n (kernels/fft_plan.py: its DFT and
    twiddle tables in one flat tensor) as a program constant, keyed on the plan (fft_plan.set_bluestein_tile
    changes a Bluestein length's plan and so its tables' layout)."""
    from aotcuda.kernels import fft_plan

    plan = fft_plan.kernel_plan(n)
    return _constant(("fft_kernel", n, inverse, plan), lambda: fft_plan.table_values(plan, inverse),
                     torch.float32, device)
