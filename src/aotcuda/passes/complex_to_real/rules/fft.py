"""FFT rules: _fft_r2c, _fft_c2c and _fft_c2r (torch.fft.*, stft, istft) as real DFT-matrix products.

Inductor has no FFT codegen: left as they are, these ops become pocketfft/cuFFT fallback kernels on
complex tensors. For small transforms a DFT is one real matrix product per transformed dim, which
Inductor runs as its own GEMM. The DFT of length n along a dim, X[k] = Σ_t x[t]·exp(∓2πi·k·t/n), is
built in the graph from aranges (the phase k·t mod n is exact in int64 before it becomes an angle) and
multiplied with the interleaved pair as in linalg.py; the normalization (none, 1/√N, 1/N with N the
product of the signal sizes) is folded into the last matrix. Transforms longer than MAX_DFT_SIZE are
refused (the O(n²) product loses to an FFT there: see benchmarks/NOTES.md, "FFT as DFT products, CPU"),
as are dynamic sizes, whose matrix size is not known before the program runs.

Dims are handled one at a time (the DFT is separable): the dim moves last, is multiplied, moves back.
onesided r2c keeps the n//2 + 1 non-negative frequencies; c2r reads those (Hermitian symmetry gives the
rest: every bin but 0 and n/2 counts twice, and their imaginary parts drop out, as in pocketfft).
"""

from __future__ import annotations

import math

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, real_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.linalg import matmul_pairs

aten = torch.ops.aten

# Longest transform rewritten as a DFT product; chosen from the CPU measurements in benchmarks/NOTES.md.
MAX_DFT_SIZE = 128

_NORM_NONE, _NORM_BY_ROOT_N, _NORM_BY_N = 0, 1, 2


def _scale(normalization: int, signal_numel: int) -> float:
    """The factor of aten's fft normalization code (0: none, 1: 1/√N, 2: 1/N)."""
    if normalization == _NORM_BY_ROOT_N:
        return 1 / math.sqrt(signal_numel)
    if normalization == _NORM_BY_N:
        return 1 / signal_numel
    return 1.0


def _angles(rows: int, cols: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[rows, cols] angles 2π·(r·c mod n)/n; the product is reduced mod n in int64 so that it is exact."""
    r = torch.arange(rows, device=device).unsqueeze(-1)
    c = torch.arange(cols, device=device)
    return ((r * c) % n).to(dtype) * (2 * math.pi / n)


def _dft_pair_matrix(n: int, inverse: bool, scale: float, dtype, device) -> Pair:
    """The complex [n, n] matrix W[t, k] = scale·exp(∓2πi·t·k/n) as a pair (+ for the inverse)."""
    theta = _angles(n, n, n, dtype, device)
    sign = 1.0 if inverse else -1.0
    return Pair(torch.stack([theta.cos() * scale, theta.sin() * (sign * scale)], -1))


def _r2c_matrix(n: int, m: int, scale: float, dtype, device) -> torch.Tensor:
    """[n, 2m] real matrix taking a real signal of length n to m interleaved frequency bins."""
    theta = _angles(n, m, n, dtype, device)
    return torch.stack([theta.cos() * scale, theta.sin() * -scale], -1).reshape(n, 2 * m)


def _c2r_matrix(k: int, n: int, scale: float, dtype, device) -> torch.Tensor:
    """[2k, n] real matrix taking the first k (≤ n//2 + 1) interleaved bins to a real signal of length n.

    out[t] = Σ_j w_j·(Re X_j·cos θ − Im X_j·sin θ), θ = 2π·j·t/n, with w_j = 1 for j = 0 and (n even)
    j = n/2, else 2: the negative frequencies are the conjugates of the positive ones.
    """
    theta = _angles(k, n, n, dtype, device)
    j = torch.arange(k, device=device)
    twice = torch.where((j == 0) | (2 * j == n), 1.0, 2.0).to(dtype).unsqueeze(-1) * scale
    return torch.stack([theta.cos() * twice, theta.sin() * -twice], 1).reshape(2 * k, n)


def _c2c_along(x: Pair, dim: int, inverse: bool, scale: float) -> Pair:
    """The complex DFT of x along one dim (a dim of the complex tensor)."""
    n = x.shape[dim]
    moved = Pair(x.t.movedim(pair_dim(dim), -2))
    lone = moved.ndim == 1
    if lone:  # matmul_pairs multiplies rows: give a 1-D signal one row
        moved = Pair(moved.t.unsqueeze(0))
    product = matmul_pairs(moved, _dft_pair_matrix(n, inverse, scale, x.dtype, x.t.device))
    if lone:
        product = Pair(product.t.squeeze(0))
    return Pair(product.t.movedim(-2, pair_dim(dim)))


def _c2c_dims(x: Pair, dims, inverse: bool, scale_last: float) -> Pair:
    for i, d in enumerate(dims):
        x = _c2c_along(x, d, inverse, scale_last if i == len(dims) - 1 else 1.0)
    return x


def _signal_numel(sizes) -> int:
    return math.prod(int(s) for s in sizes)


def refuses_long_or_dynamic(node: torch.fx.Node) -> str | None:
    x, dims = node.args[0].meta["val"], node.args[1]
    sizes = [x.shape[d] for d in dims]
    if node.target is aten._fft_c2r.default:
        sizes[-1] = node.args[3]
    for d, size in zip(dims, sizes):
        if not isinstance(size, int):
            return (f"the transform length along dim {d} is dynamic ({size}); a DFT product needs a static "
                    f"length <= {MAX_DFT_SIZE}: export that dim with a static size")
        if size > MAX_DFT_SIZE:
            return (f"the transform length {size} along dim {d} exceeds {MAX_DFT_SIZE}, above which the "
                    "O(n^2) DFT product is slower than the FFT fallback kernel (benchmarks/NOTES.md); "
                    "keep this FFT outside the lowered program or split it into shorter transforms")
    return None


refuses_long_or_dynamic.__doc__ = (f"Transforms longer than {MAX_DFT_SIZE} (an FFT beats the O(n^2) DFT product "
                                   "there) or of dynamic length.")


@register(aten._fft_c2c.default, refuses=refuses_long_or_dynamic)
def fft_c2c(out, x, dim, normalization, forward):
    """Complex DFT over `dim` (exp(−2πi…) forward, exp(+2πi…) inverse): one real matmul per dim."""
    x = x.to(real_dtype(out.dtype))
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    return _c2c_dims(x, dim, not forward, scale)


@register(aten._fft_r2c.default, refuses=refuses_long_or_dynamic)
def fft_r2c(out, x, dim, normalization, onesided):
    """Real-to-complex DFT over `dim` (the last of them one-sided, n//2 + 1 bins, when asked)."""
    x = x.to(real_dtype(out.dtype))
    scale = _scale(normalization, _signal_numel(x.shape[d] for d in dim))
    *first, last = dim
    n = x.shape[last]
    m = n // 2 + 1 if onesided else n
    moved = x.movedim(last, -1)
    bins = torch.matmul(moved, _r2c_matrix(n, m, scale if not first else 1.0, x.dtype, x.device))
    result = Pair(bins.unflatten(-1, (m, 2)).movedim(-2, pair_dim(last)))
    return _c2c_dims(result, first, False, scale) if first else result


@register(aten._fft_c2r.default, refuses=refuses_long_or_dynamic)
def fft_c2r(out, x, dim, normalization, last_dim_size):
    """Complex-to-real inverse DFT over `dim`, the last dim Hermitian with `last_dim_size` outputs."""
    x = x.to(out.dtype)
    *first, last = dim
    n = int(last_dim_size)
    scale = _scale(normalization, _signal_numel([*(x.shape[d] for d in first), n]))
    x = _c2c_dims(x, first, True, 1.0)
    k = min(x.shape[last], n // 2 + 1)
    moved = x.t.movedim(pair_dim(last), -2).narrow(-2, 0, k)
    signal = torch.matmul(moved.reshape(*moved.shape[:-2], 2 * k), _c2r_matrix(k, n, scale, x.dtype, x.t.device))
    return signal.movedim(-1, last)
