"""FFT rules: _fft_r2c, _fft_c2c and _fft_c2r (torch.fft.*, stft, istft, rfft2, fftn) as real math.

Inductor has no FFT codegen: left as they are, these ops become pocketfft/cuFFT fallback kernels on
complex tensors. Each transformed dim of static length n is planned (spectral/plan.py): one DFT
product up to 64, a mixed-radix split n = n1·n2 into two smaller transforms with a twiddle product
between them (400 = 20·20, 4096 = 64·64), Bluestein's chirp-z for a large prime factor. Every DFT,
twiddle and chirp table is a program constant (spectral/tables.py). The normalization (none, 1/√N,
1/N with N the product of the signal sizes) is folded into the first stage's table.

Dims are handled one at a time (the DFT is separable): the dim moves last, is transformed, moves back.
onesided r2c keeps the n//2 + 1 non-negative frequencies; c2r rebuilds the negative ones by Hermitian
symmetry (the imaginary parts of bins 0 and n/2 drop out, as in pocketfft).
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, real_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.spectral import transform as spectral

aten = torch.ops.aten

_NORM_NONE, _NORM_BY_ROOT_N, _NORM_BY_N = 0, 1, 2


def _scale(normalization: int, signal_numel: int) -> float:
    """The factor of aten's fft normalization code (0: none, 1: 1/√N, 2: 1/N)."""
    if normalization == _NORM_BY_ROOT_N:
        return 1 / math.sqrt(signal_numel)
    if normalization == _NORM_BY_N:
        return 1 / signal_numel
    return 1.0


def _c2c_along(x: Pair, dim: int, inverse: bool, scale: float) -> Pair:
    """The complex DFT of x along one dim (a dim of the complex tensor)."""
    moved = x.t.movedim(pair_dim(dim), -2)
    return Pair(spectral.transform(moved, None, inverse, scale).movedim(-2, pair_dim(dim)))


def _c2c_dims(x: Pair, dims, inverse: bool, scale_first: float) -> Pair:
    for i, d in enumerate(dims):
        x = _c2c_along(x, d, inverse, scale_first if i == 0 else 1.0)
    return x


def _signal_numel(sizes) -> int:
    return math.prod(int(s) for s in sizes)


def refuses_dynamic(node: torch.fx.Node) -> str | None:
    x, dims = node.args[0].meta["val"], node.args[1]
    sizes = [x.shape[d] for d in dims]
    if node.target is aten._fft_c2r.default:
        sizes[-1] = node.args[3]
    for d, size in zip(dims, sizes):
        if not isinstance(size, int):
            bound = _upper_bound(size)
            pad = f"n={bound}" if bound is not None else "n=<the Dim's max> (set a max on the Dim)"
            return (f"the transform length along dim {d} is dynamic ({size}, at most {bound}); the rewrite "
                    "plans each transform for a static length: export that dim with a static size, or pad "
                    f"the signal to a static length with {pad} and crop the result")
    return None


def _upper_bound(size: torch.SymInt) -> int | None:
    """The largest value the shape env allows for a dynamic size, or None if unbounded."""
    try:
        upper = size.node.shape_env.bound_sympy(size.node.expr).upper
        return int(upper) if upper.is_finite else None
    except Exception:  # an expression the value-range analysis cannot bound
        return None


refuses_dynamic.__doc__ = "Transforms of dynamic length (each transform is planned for its static length)."


@register(aten._fft_c2c.default, refuses=refuses_dynamic)
def fft_c2c(out, x, dim, normalization, forward):
    """Complex DFT over `dim` (exp(−2πi…) forward, exp(+2πi…) inverse): mixed-radix DFT products per dim."""
    x = x.to(real_dtype(out.dtype))
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    return _c2c_dims(x, dim, not forward, scale)


@register(aten._fft_r2c.default, refuses=refuses_dynamic)
def fft_r2c(out, x, dim, normalization, onesided):
    """Real-to-complex DFT over `dim` (the last of them one-sided, n//2 + 1 bins, when asked): a real first stage."""
    x = x.to(real_dtype(out.dtype))
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    *first, last = dim
    n = x.shape[last]
    bins = n // 2 + 1 if onesided else n
    result = Pair(spectral.r2c(x.movedim(last, -1), bins, scale).movedim(-2, pair_dim(last)))
    return _c2c_dims(result, first, False, 1.0) if first else result


@register(aten._fft_c2r.default, refuses=refuses_dynamic)
def fft_c2r(out, x, dim, normalization, last_dim_size):
    """Complex-to-real inverse DFT over `dim`, the last dim Hermitian with `last_dim_size` outputs."""
    x = x.to(out.dtype)
    *first, last = dim
    n = int(last_dim_size)
    scale = _scale(normalization, _signal_numel([*(x.shape[d] for d in first), n]))
    x = _c2c_dims(x, first, True, scale)
    signal = spectral.c2r(x.t.movedim(pair_dim(last), -2), n, 1.0 if first else scale)
    return signal.movedim(-1, last)
