"""FFT rules: _fft_r2c, _fft_c2c and _fft_c2r (torch.fft.*, stft, istft, rfft2, fftn) as real math.

Inductor has no FFT codegen: left as they are, these ops become pocketfft/cuFFT fallback kernels on
complex tensors. Each transformed dim of static length n takes one of three forms, by the device of
the traced tensors (spectral/transform.py): on the CPU, Stockham radix-4/2/3/5/7/11/13 stages as
pointwise ops (spectral/stockham.py); elsewhere the GEMM plan (spectral/plan.py): one DFT product up
to 64, a mixed-radix split n = n1·n2 into two smaller transforms with a twiddle product between them
(400 = 20·20, 4096 = 64·64); both run Bluestein's chirp-z for a large prime factor. With
AOTCUDA_FFT_KERNEL on (and Triton installed), a non-CPU transform of a length the kernel covers (prime
factors ≤ 61, or any other n as Bluestein inside the kernel; n ≤ 4096: kernels/fft_plan.py) is
one aotcuda::fft_rows Triton op instead, which reads the
dim where it is (kernels/fft_rows.py); stft's window multiply before it is fused into the op after the
rewrite, its overlapping frames read in place (spectral/window.py). With AOTCUDA_FFT_CPU_KERNEL on (the
default), a CPU transform the C++ kernel covers (n ≤ 4096 with no prime factor above 13 in its complex
length: kernels/fft_cpu.py) is one aotcuda::fft_rows_cpu op, which Inductor compiles as one C++ template
kernel (kernels/fft_cpu_template.py), its stft window fused the same way. Every DFT, twiddle and chirp table is a program constant
(spectral/tables.py). The normalization (none, 1/√N, 1/N with N the product of the signal sizes) is
folded into the first stage's table (the kernel's `scale` argument).

A dim of dynamic length (a SymInt bounded by its Dim's max) runs as spectral/dynamic.py says: a DFT
product with its table built in the graph (max ≤ 64), else Bluestein at a static length ≥ 2·max − 1
(on the CPU two aotcuda::fft_rows_cpu kernels along the dim where it is).
A normalization that depends on a dynamic length multiplies the result instead of a table.

Dims are handled one at a time (the DFT is separable): the dim moves last, is transformed, moves back
(the kernel form reads and writes it in place).
onesided r2c keeps the n//2 + 1 non-negative frequencies; c2r rebuilds the negative ones by Hermitian
symmetry (the imaginary parts of bins 0 and n/2 drop out, as in pocketfft).
A real input's bins that are real by symmetry (index 0, or n/2 for an even n, along every transformed
dim) get imaginary part +0.0 after the rule (spectral/real_bins.py, per node), as pocketfft and cuFFT give them: the forms' sums
can end in −0.0 there, and angle() or log().imag of a negative DC bin would then be −π, not +π; a spectrum
that reaches transforms only is left as summed (spectral/real_bins.py says why).
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real.pair import Pair, real_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.spectral import dynamic
from aotcuda.passes.complex_to_real.spectral import transform as spectral

aten = torch.ops.aten

_NORM_NONE, _NORM_BY_ROOT_N, _NORM_BY_N = 0, 1, 2


def _scale(normalization: int, signal_numel) -> float | torch.SymFloat:
    """The factor of aten's fft normalization code (0: none, 1: 1/√N, 2: 1/N); symbolic for a dynamic N."""
    if normalization == _NORM_BY_ROOT_N:
        return signal_numel ** -0.5 if isinstance(signal_numel, torch.SymInt) else 1 / math.sqrt(signal_numel)
    if normalization == _NORM_BY_N:
        return 1 / signal_numel
    return 1.0


def _static(n) -> bool:
    return isinstance(n, int)


def _in_tables(scale) -> tuple[float, object]:
    """(the factor folded into the first stage's table, the one multiplied after): a symbolic factor
    cannot be part of a program constant."""
    return (scale, 1.0) if isinstance(scale, float) else (1.0, scale)


def _times(x: torch.Tensor, factor) -> torch.Tensor:
    return x if isinstance(factor, float) and factor == 1.0 else x * factor


def _c2c_along(x: Pair, dim: int, inverse: bool, scale) -> Pair:
    """The complex DFT of x along one dim (a dim of the complex tensor)."""
    d = dim % x.ndim
    if _static(x.shape[d]):
        table_scale, after = _in_tables(scale)
        return Pair(_times(spectral.c2c_along(x.t, d, inverse, table_scale), after))
    return Pair(dynamic.transform_along(x.t, d, inverse, scale))


def _c2c_dims(x: Pair, dims, inverse: bool, scale_first) -> Pair:
    for i, d in enumerate(dims):
        x = _c2c_along(x, d, inverse, scale_first if i == 0 else 1.0)
    return x


def _signal_numel(sizes):
    return math.prod(sizes)


_SOME_POINTS = "give the transformed dim at least one point (its torch.export.Dim min=1)"
_SOME_OUTPUT_POINTS = ("give the output length with n=..., or a half spectrum of at least 2 bins (its torch.export.Dim "
                       "min=2): the default length is 2*(bins - 1)")


def _check_points(sizes, last_fix: str = _SOME_POINTS) -> None:
    """Refuse, on the call, a dynamic transformed length that is 0 (dynamic.check_has_points); `last_fix` is the
    advice for the last of `sizes`."""
    *first, last = sizes
    for size in first:
        dynamic.check_has_points(size, _SOME_POINTS)
    dynamic.check_has_points(last, last_fix)


def refuses_dynamic(node: torch.fx.Node) -> str | None:
    x, dims = node.args[0].meta["val"], node.args[1]
    sizes = [x.shape[d] for d in dims]
    if node.target is aten._fft_c2r.default:
        last = node.args[3]
        sizes[-1] = last.meta["val"] if isinstance(last, torch.fx.Node) else last
    for d, size in zip(dims, sizes):
        if not _static(size):
            reason = dynamic.refusal(d, size)
            if reason:
                return reason
    return None


refuses_dynamic.__doc__ = (f"Transforms of dynamic length without an upper bound (or one above "
                           f"{dynamic.MAX_DYNAMIC_BOUND}): a dynamic length is computed at its Dim's max.")


@register(aten._fft_c2c.default, refuses=refuses_dynamic)
def fft_c2c(out, x, dim, normalization, forward):
    """Complex DFT over `dim` (exp(−2πi…) forward, exp(+2πi…) inverse): mixed-radix DFT products per dim."""
    x = x.to(real_dtype(out.dtype))
    _check_points([x.shape[d] for d in dim])
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    return _c2c_dims(x, dim, not forward, scale)


@register(aten._fft_r2c.default, refuses=refuses_dynamic)
def fft_r2c(out, x, dim, normalization, onesided):
    """Real-to-complex DFT over `dim` (the last of them one-sided, n//2 + 1 bins, when asked): a real first stage (its bins real by symmetry are set to +0.0 after it: spectral/real_bins.py)."""
    x = x.to(real_dtype(out.dtype))
    _check_points([x.shape[d] for d in dim])
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    *first, last = dim
    last = last % x.dim()
    n = x.shape[last]
    bins = n // 2 + 1 if onesided else n
    if _static(n):
        table_scale, after = _in_tables(scale)
        result = Pair(_times(spectral.r2c_along(x, last, bins, table_scale), after))
    else:
        result = Pair(dynamic.r2c_along(x, last, bins if onesided else None, scale))  # None: all n bins
    return _c2c_dims(result, first, False, 1.0) if first else result


@register(aten._fft_c2r.default, refuses=refuses_dynamic)
def fft_c2r(out, x, dim, normalization, last_dim_size):
    """Complex-to-real inverse DFT over `dim`, the last dim Hermitian with `last_dim_size` outputs."""
    x = x.to(out.dtype)
    *first, last = dim
    n = last_dim_size
    _check_points([*(x.shape[d] for d in first), n], _SOME_OUTPUT_POINTS)
    scale = _scale(normalization, _signal_numel([*(x.shape[d] for d in first), n]))
    x = _c2c_dims(x, first, True, scale)
    scale = 1.0 if first else scale
    last = last % x.ndim
    if _static(n):
        table_scale, after = _in_tables(scale)
        return _times(spectral.c2r_along(x.t, last, n, table_scale), after)
    return dynamic.c2r(x.t.movedim(last, -2), n, scale).movedim(-1, last)
