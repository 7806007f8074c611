"""Transforms of static length along one dim: the entry points, which pick one of four forms:
- the CPU kernel form on CPU tensors when AOTCUDA_FFT_CPU_KERNEL is on, the length is covered and this
  torch has Inductor's C++ templates (kernels/fft_cpu.py, kernels/fft_cpu_template.py): one
  aotcuda::fft_rows_cpu op per transform, which Inductor compiles as one C++ kernel that keeps blocks of
  rows in cache through all stages, reading and writing the data where it is; after the rewrite, a complex
  product before its c2r or c2c becomes the op's `weight`, multiplied as it loads (product.py: fuse_products);
- the CPU form (Stockham stages, stockham.py) for other CPU transforms;
- the kernel form on other devices when AOTCUDA_FFT_KERNEL is on, Triton is installed and the length is
  covered (kernels/fft_plan.py: n ≤ 4096, prime factors ≤ 61 as a tiling, any other as Bluestein's
  chirp-z inside the kernel, kernels/fft_bluestein.py; n ≤ 8192 with a prime factor above 61 as Bluestein
  in parts, kernels/fft_bluestein_parts.py): one aotcuda::fft_rows Triton op per
  transform (kernels/fft_rows.py), which reads the data once along any dim, with its tables a program
  constant (tables.fft_kernel_tables); after the rewrite, stft's window multiply before it becomes the op's
  `window` operand and its frames unfold's view, read in place (window.py: fuse_windows);
- the GEMM form (small DFT products, here) for every other device and length (without Triton, with the
  switch off, float64, a smooth n > 4096, or n > 8192).
The ``*_along`` entry points take the transformed dim where it is (the kernel reads it there; the other
forms move it last and back); transform, r2c and c2r take it last.

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

import contextlib
import contextvars

import torch

from aotcuda import switches
from aotcuda.kernels import HAVE_TRITON
from aotcuda.passes.complex_to_real.pair import real_as_pair
from aotcuda.passes.complex_to_real.spectral import stockham, tables
from aotcuda.passes.complex_to_real.spectral.plan import Plan, plan


# What the running ReplaceComplexWithRealPass said of the kernel forms (its ``fft_kernels``): None, as the
# switches say; False, never (plain ATen ops only, for a runtime that has no aotcuda ops).
_KERNELS_WANTED: contextvars.ContextVar[bool | None] = contextvars.ContextVar("aotcuda_fft_kernels", default=None)


@contextlib.contextmanager
def kernel_forms(wanted: bool | None):
    """Within the block, transforms take the kernel forms (aotcuda::fft_rows, aotcuda::fft_rows_cpu) where
    the switches say (None) or never (False)."""
    token = _KERNELS_WANTED.set(wanted)
    try:
        yield
    finally:
        _KERNELS_WANTED.reset(token)


def _kernels_refused() -> bool:
    return _KERNELS_WANTED.get() is False


def on_cpu(x: torch.Tensor) -> bool:
    """Whether x (the traced node's fake tensor) lives on the CPU: the transform takes the CPU form
    (Stockham stages, stockham.py) there and the GEMM form (DFT products, this module) elsewhere."""
    return x.device.type == "cpu"


def kernel_form(x: torch.Tensor, dim: int, n, kind: str, kernel: bool | None = None) -> bool:
    """Whether a transform of length n along dim `dim` of x (kind "c2c", "r2c" or "c2r": x a pair but for
    r2c) runs as aotcuda::fft_rows. kernel None: where AOTCUDA_FFT_KERNEL is on, Triton is installed and x
    is not on the CPU; True or False decides (a test runs the op's CPU implementation with True). Either
    way only where the op takes the length, dtype and dims (fft_rows.supports)."""
    if kernel is None:
        kernel = HAVE_TRITON and not on_cpu(x) and not _kernels_refused() and switches.flag("AOTCUDA_FFT_KERNEL")
    if not kernel:
        return False
    from aotcuda.kernels import fft_rows  # registers the op (and imports Triton) only when wanted

    return fft_rows.supports(x, dim, n, kind)


def cpu_kernel_form(x: torch.Tensor, dim: int, n, out_len, kind: str) -> bool:
    """Whether a CPU transform (x the traced node's fake tensor) runs as aotcuda::fft_rows_cpu: on the CPU,
    AOTCUDA_FFT_CPU_KERNEL on, the transform covered (fft_cpu.covers) and the template usable on this torch."""
    if not on_cpu(x) or _kernels_refused() or not switches.flag("AOTCUDA_FFT_CPU_KERNEL"):
        return False
    from aotcuda.kernels import fft_cpu, fft_cpu_template  # registers the op and its lowering when wanted

    return fft_cpu.covers(x, dim, n, out_len, kind) and fft_cpu_template.available()


def fft_rows_op(x: torch.Tensor, dim: int, n: int, out_len, kind: str, inverse: bool, scale: float) -> torch.Tensor:
    """One aotcuda::fft_rows call (kernels/fft_rows.py has its arguments), its tables a program constant."""
    from aotcuda.kernels.fft_rows import direction

    table = tables.fft_kernel_tables(n, direction(kind, inverse), x.device)
    return torch.ops.aotcuda.fft_rows(x, table, dim, n, out_len, kind, inverse, scale)


def c2c_along(x: torch.Tensor, dim: int, inverse: bool, scale: float, kernel: bool | None = None) -> torch.Tensor:
    """transform() of pair x along its dim `dim` (≥ 0, not the trailing 2): the kernel form, or the dim
    moved last and back."""
    n = x.shape[dim]
    if kernel_form(x, dim, n, "c2c", kernel):
        return fft_rows_op(x, dim, n, n, "c2c", inverse, scale)
    if kernel is None and cpu_kernel_form(x, dim, n, n, "c2c"):
        return torch.ops.aotcuda.fft_rows_cpu(x, dim, n, n, "c2c", inverse, scale)
    return transform(x.movedim(dim, -2), None, inverse, scale).movedim(-2, dim)


def r2c_along(x: torch.Tensor, dim: int, bins: int, scale: float, kernel: bool | None = None) -> torch.Tensor:
    """r2c() of real x along its dim `dim` (≥ 0): a pair with `bins` at `dim`."""
    n = x.shape[dim]
    if kernel_form(x, dim, n, "r2c", kernel):
        return fft_rows_op(x, dim, n, bins, "r2c", False, scale)
    if kernel is None and cpu_kernel_form(x, dim, n, bins, "r2c"):
        return torch.ops.aotcuda.fft_rows_cpu(x, dim, n, bins, "r2c", False, scale)
    return r2c(x.movedim(dim, -1), bins, scale).movedim(-2, dim)


def c2r_along(x: torch.Tensor, dim: int, n: int, scale: float, kernel: bool | None = None) -> torch.Tensor:
    """c2r() of the Hermitian half in pair x along its dim `dim` (≥ 0): a real tensor with n at `dim`."""
    if kernel_form(x, dim, n, "c2r", kernel):
        return fft_rows_op(x, dim, n, n, "c2r", True, scale)
    if kernel is None and cpu_kernel_form(x, dim, n, n, "c2r"):
        return torch.ops.aotcuda.fft_rows_cpu(x, dim, n, n, "c2r", True, scale)
    return c2r(x.movedim(dim, -2), n, scale).movedim(-1, dim)


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
    z = gemm_transform(y.transpose(-3, -2), p.rest, inverse, 1.0)  # [..., k1, k2, 2]
    return z.transpose(-3, -2).flatten(-3, -2)


def _bluestein(x: torch.Tensor, p: Plan, inverse: bool, scale: float) -> torch.Tensor:
    n, m = p.n, p.padded.n
    c = tables.chirp(n, inverse, x.dtype, x.device)
    a = torch.constant_pad_nd(cmul(x, c), [0, 0, 0, m - n])
    spectrum = gemm_transform(a, p.padded, False, 1.0)
    spectrum = cmul(spectrum, tables.chirp_filter_spectrum(n, m, inverse, x.dtype, x.device))
    convolved = gemm_transform(spectrum, p.padded, True, 1.0).narrow(-2, 0, n)
    out = cmul(convolved, c)
    return out * scale if scale != 1.0 else out


def transform(x: torch.Tensor, p: Plan | None, inverse: bool, scale: float) -> torch.Tensor:
    """The DFT (inverse: exp(+2πi…)) of pair x [..., n, 2] along its complex last dim, times `scale`:
    Stockham stages on the CPU (stockham.py; `p`, a GEMM plan, is unused there), else the GEMM form."""
    if on_cpu(x):
        return stockham.transform(x, inverse, scale)
    return gemm_transform(x, p, inverse, scale)


def gemm_transform(x: torch.Tensor, p: Plan | None, inverse: bool, scale: float) -> torch.Tensor:
    """transform() as DFT products on plan `p` (plan(n) when None): the form for GPUs."""
    p = p or plan(x.shape[-2])
    if p.kind == "direct":
        return _direct(x, inverse, scale)
    if p.kind == "bluestein":
        return _bluestein(x, p, inverse, scale)
    moved = x.unflatten(-2, (p.first, p.n // p.first)).transpose(-3, -2)  # [..., n2, t1, 2]
    return _split_tail(_direct(moved, inverse, scale), p, inverse)


def r2c(x: torch.Tensor, bins: int, scale: float) -> torch.Tensor:
    """The first `bins` DFT bins of real x [..., n] along its last dim, as a pair [..., bins, 2]."""
    if on_cpu(x):
        return stockham.r2c(x, bins, scale, hermitian_spectrum)
    return gemm_r2c(x, bins, scale)


def gemm_r2c(x: torch.Tensor, bins: int, scale: float) -> torch.Tensor:
    """r2c() as DFT products: the first stage real, a direct length one [n, 2·bins] GEMM."""
    n = x.shape[-1]
    p = plan(n)
    if p.kind == "direct":
        matrix = tables.r2c_matrix(n, bins, scale, x.dtype, x.device)
        return torch.matmul(x, matrix).unflatten(-1, (bins, 2))
    if p.kind == "bluestein":
        full = gemm_transform(real_as_pair(x).t, p, False, scale)
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
    return gemm_c2r(x, n, scale)


def gemm_c2r(x: torch.Tensor, n: int, scale: float) -> torch.Tensor:
    """c2r() as DFT products: one [2·bins, n] GEMM for a direct length, else the Hermitian spectrum's
    complex inverse."""
    if plan(n).kind == "direct":  # one product straight to the real signal, half the work of a c2c
        x = hermitian_half(x, n)
        return torch.matmul(x.flatten(-2), tables.c2r_matrix(x.shape[-2], n, scale, x.dtype, x.device))
    return gemm_transform(hermitian_spectrum(x, n), None, True, scale)[..., 0]

