"""Special-value tables and the comparison the special-value tests use (test_special_values.py).

The tables hold every class of value where complex math goes wrong: ±0, denormals, the smallest normal,
values near 1 (log), around sqrt(max) (where |z|² overflows), near max, ±inf and nan, each as the real
and as the imaginary part, derived from torch.finfo so that complex64 and complex128 get their own.

The reference is eager's scalar kernel (c10::complex and the C library: the code CUDA runs too). Eager's
CPU picks its vectorized (AVX) kernel for 8+ contiguous elements, which rounds differently (no FMA) and
for some ops scales differently; inputs are given a stride of 2 to keep eager on the scalar kernel.

The comparison (`mismatches`) is componentwise, like torch.testing.assert_close(equal_nan=True) with the
dtype's rtol, plus an absolute slack of 4 ulp of |expected| (normwise: an FMA in eager's a·c − b·d, or
none, moves a cancelled part by up to an ulp of the product) and of denormal noise (finfo.tiny). Two
things C99 Annex G leaves to the platform are not compared: the sign of a nan, and the sign of an
infinite part whose other part is nan (cexp(inf + i·inf) = ±inf + i·nan). The sign of zero is not
compared (as in assert_close).
"""

from __future__ import annotations

import torch

RTOL = {torch.float32: 1e-5, torch.float64: 1e-10, torch.float16: 1e-3}
REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}


def magnitudes(real_dtype: torch.dtype, rich: bool) -> list[float]:
    """The non-negative special magnitudes of a real dtype (`rich`: more of them, for unary ops)."""
    fi = torch.finfo(real_dtype)
    smallest = fi.tiny * fi.eps  # the smallest denormal
    base = [0.0, smallest, fi.tiny / 8, 1e-4, 0.5, 1.0, 3.0, fi.max ** 0.5 * 2, fi.max / 2,
            float("inf")]
    if rich:
        base += [fi.tiny, fi.max ** -0.5 / 2, fi.eps, 1 - 1e-4, 1 + 1e-4, 1 - fi.eps, 2.0, 10.0, 100.0,
                 fi.max ** 0.5 / 2, fi.max / 8, fi.max]
    return base


def real_values(real_dtype: torch.dtype, rich: bool = True) -> torch.Tensor:
    """±every magnitude, and nan, as a 1-d tensor of `real_dtype`."""
    mags = magnitudes(real_dtype, rich)
    values = mags + [-m for m in mags] + [float("nan")]
    return torch.tensor(values, dtype=torch.float64).to(real_dtype)


def complex_table(real_dtype: torch.dtype, rich: bool = True) -> torch.Tensor:
    """Every (re, im) from real_values × real_values, as a pair tensor of shape (n, 2)."""
    v = real_values(real_dtype, rich)
    return torch.stack([v.repeat_interleave(len(v)), v.repeat(len(v))], -1)


def pairs_of_tables(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every combination of a row of `a` with a row of `b` (both (n, ...)), as two tensors of one length."""
    return a.repeat_interleave(len(b), 0), b.repeat(len(a), *[1] * (b.ndim - 1))


def on_scalar_kernel(t: torch.Tensor) -> torch.Tensor:
    """t with a stride of 2 in its last dim: eager's CPU kernels then run their scalar loop."""
    return torch.stack([t, t], -1).select(-1, 0)


def mismatches(got: torch.Tensor, expected: torch.Tensor, *, complex_result: bool) -> torch.Tensor:
    """A bool mask (one entry per element; per complex element for pairs) of where `got` is not close."""
    dtype = expected.dtype
    if dtype == torch.bool or not dtype.is_floating_point:
        bad = got != expected
        return bad.any(-1) if complex_result else bad
    fi, rtol = torch.finfo(dtype), RTOL[dtype]
    g, e = got.double(), expected.double()
    norm = torch.linalg.vector_norm(e, dim=-1, keepdim=True) if complex_result else e.abs()
    norm = torch.where(torch.isfinite(norm), norm, 0.0)
    slack = rtol * e.abs() + 4 * fi.eps * norm + fi.tiny
    both_nan = torch.isnan(g) & torch.isnan(e)
    close = torch.where(torch.isinf(e), g == e, (g - e).abs() <= slack) | both_nan
    if complex_result:
        other_nan = torch.isnan(e.flip(-1))
        close |= other_nan & torch.isinf(e) & torch.isinf(g)  # Annex G: ±inf next to nan
        return ~close.all(-1)
    return ~close


def describe(inputs: list[torch.Tensor], got: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor,
             limit: int = 8) -> str:
    """The first `limit` mismatching elements, as input → got vs expected."""
    lines = []
    for i in bad.nonzero().flatten()[:limit].tolist():
        ins = ", ".join(_show(x[i]) for x in inputs)
        lines.append(f"  f({ins}) = {_show(got[i])}, eager {_show(expected[i])}")
    return f"{int(bad.sum())} of {bad.numel()} differ:\n" + "\n".join(lines)


def _show(x: torch.Tensor) -> str:
    if x.ndim == 1 and x.numel() == 2:
        return f"({x[0].item():.6g}, {x[1].item():.6g})"
    return f"{x.item():.6g}" if x.dtype.is_floating_point else str(x.item())
