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

Where eager is wrong, the true value is the reference (`prefer_true_value`): on rows whose operands are
all finite, where eager's result is not close to the true one (the function computed in a wider type:
complex128 for complex64 and complex32, numpy's long double for complex128, then rounded once), the
true one is expected; where eager is right, eager's. For division (`annex_g_quotient`), where eager
gives nan + nan·i for an infinite operand, C99 Annex G's infinity or zero is expected.

On CUDA, a second input is accepted (`flush_subnormals`): Inductor's CUDA (Triton) kernels link libdevice
with flush-to-zero (triton_meta disable_ftz=False, for every float32 program: pytorch/pytorch#185878,
#188546), so a float32 subnormal operand of a libdevice call reads as ±0 there while eager's CUDA kernels
keep it. Each output *value* (both parts of a complex one together) must then match the reference on the
input or the reference on the input with its float32 subnormal parts flushed to zero of the same sign:
per value, not per part, since a value whose real part reads the input and whose imaginary part reads the
flushed input is the function of neither (log(0 + 1e-45i) = (−103.3, 0) is wrong; (−103.3, pi/2) and
(−inf, 0) are each right for one reading). This is a choice of reference for a documented hardware mode,
not a tolerance: the comparison itself is unchanged.
"""

from __future__ import annotations

import math

import numpy as np
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


def flush_subnormals(t: torch.Tensor) -> torch.Tensor:
    """t with its float32 subnormal values (both parts of a complex t) replaced by zeros of their sign: the
    input as a flush-to-zero kernel reads it (see the module docstring). Other dtypes come back as they are
    (libdevice's flush-to-zero is float32's only)."""
    if t.is_complex():
        return torch.view_as_complex(flush_subnormals(torch.view_as_real(t))) if t.dtype == torch.complex64 else t
    if t.dtype != torch.float32:
        return t
    return torch.where(t.abs() < torch.finfo(t.dtype).tiny, t * 0, t)  # t · 0 keeps the sign of zero


def mismatches(got: torch.Tensor, expected: torch.Tensor, *, complex_result: bool) -> torch.Tensor:
    """A bool mask (one entry per element; per complex element for pairs) of where `got` is not close."""
    dtype = expected.dtype
    if dtype == torch.bool or not dtype.is_floating_point:
        bad = got != expected
        return bad.any(-1) if complex_result else bad
    fi, rtol = torch.finfo(dtype), RTOL[dtype]
    g, e = got.double(), expected.double()
    # |e| by hypot: vector_norm squares the parts, and overflows for complex128 parts above 1e154
    norm = torch.hypot(e[..., :1], e[..., 1:]) if complex_result else e.abs()
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


# ---- the true value, where eager is wrong ----------------------------------------------------------------

WIDER = {torch.complex64: torch.complex128, torch.complex32: torch.complex128, torch.float32: torch.float64,
         torch.float16: torch.float64}
LONG_DOUBLE_IS_WIDER = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant


def _widened(t: torch.Tensor):
    """t in a type with more range and precision: a torch tensor, or a numpy long-double array for
    float64/complex128 (None where long double is no wider than double, as on some platforms)."""
    if t.dtype in WIDER:
        return t.to(WIDER[t.dtype])
    if not LONG_DOUBLE_IS_WIDER:
        return None
    if not t.is_complex():
        return t.numpy().astype(np.longdouble)
    wide = np.empty(t.shape, dtype=np.clongdouble)
    wide.real, wide.imag = t.real.numpy(), t.imag.numpy()  # not re + 1j·im: 1j·inf is nan + inf·i
    return wide


def true_value(fn, args: list[torch.Tensor]) -> torch.Tensor | None:
    """fn (written for torch and numpy alike) on `args` (complex or real tensors), computed in a wider
    type and rounded once to the precision of args[0]: complex results as pairs, real ones as they are.
    None where no wider type exists (long double no wider than double)."""
    wide = [_widened(a) for a in args]
    if any(w is None for w in wide):
        return None
    with np.errstate(all="ignore"):
        out = fn(*wide)
    if isinstance(out, np.ndarray):
        out = torch.complex(*(torch.from_numpy(p.astype(np.float64)) for p in (out.real, out.imag))) \
            if np.iscomplexobj(out) else torch.from_numpy(out.astype(np.float64))
    precision = REAL_OF.get(args[0].dtype, args[0].dtype)
    return (torch.view_as_real(out) if out.is_complex() else out).to(precision)


def finite_rows(args: list[torch.Tensor]) -> torch.Tensor:
    """Rows (first dim) whose every operand is finite, both parts of a complex one."""
    rows = torch.ones(len(args[0]), dtype=torch.bool)
    for a in args:
        rows &= torch.isfinite(a).reshape(len(a), -1).all(-1)
    return rows


def prefer_true_value(expected: torch.Tensor, true: torch.Tensor | None, rows: torch.Tensor, *,
                      complex_result: bool) -> torch.Tensor:
    """eager's `expected`, except on `rows` where it is not close to the `true` value: there the true one."""
    if true is None:
        return expected
    wrong = mismatches(expected, true, complex_result=complex_result) & rows
    return torch.where(wrong.unsqueeze(-1) if complex_result else wrong, true, expected)


def annex_g_quotient(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor | None:
    """C99 Annex G's _Cdivd (the standard's example code: b scaled by logb/scalbn, then the recovery of
    infinities and zeros that came out nan + nan·i), on pair tensors that broadcast, computed in the wider
    type (numpy float64 for float32 pairs, long double for float64 ones) and rounded once. A zero divisor
    gives (re / +0, im / +0), as eager (Annex G takes the sign of the divisor's real part)."""
    if numerator.dtype == torch.float64 and not LONG_DOUBLE_IS_WIDER:
        return None
    wide = np.float64 if numerator.dtype != torch.float64 else np.longdouble
    numerator, denominator = torch.broadcast_tensors(numerator, denominator)
    a, b, c, d = (t.double().numpy().astype(wide) for t in (*numerator.unbind(-1), *denominator.unbind(-1)))
    with np.errstate(all="ignore"):
        largest = np.fmax(np.abs(c), np.abs(d))
        logb = np.where(largest == 0, -np.inf, np.frexp(largest)[1] - 1.0).astype(wide)
        logb = np.where(np.isfinite(largest), logb, largest)
        scale = np.where(np.isfinite(logb), logb, 0).astype(np.int64)
        c, d = np.ldexp(c, -scale), np.ldexp(d, -scale)
        denom = c * c + d * d
        x, y = np.ldexp((a * c + b * d) / denom, -scale), np.ldexp((b * c - a * d) / denom, -scale)
        both_nan = np.isnan(x) & np.isnan(y)
        by_zero = both_nan & (denom == 0) & (~np.isnan(a) | ~np.isnan(b))
        infinite = both_nan & ~by_zero & (np.isinf(a) | np.isinf(b)) & np.isfinite(c) & np.isfinite(d)
        zero = both_nan & ~by_zero & ~infinite & (logb == np.inf) & np.isfinite(a) & np.isfinite(b)
        box = lambda v: np.copysign(np.isinf(v).astype(wide), v)  # noqa: E731
        ba, bb, bc, bd = box(a), box(b), box(c), box(d)
        x = np.select([by_zero, infinite, zero], [np.inf * a, np.inf * (ba * c + bb * d), 0 * (a * bc + b * bd)], x)
        y = np.select([by_zero, infinite, zero], [np.inf * b, np.inf * (bb * c - ba * d), 0 * (b * bc - a * bd)], y)
    pair = torch.stack([torch.from_numpy(x.astype(np.float64)), torch.from_numpy(y.astype(np.float64))], -1)
    return pair.to(numerator.dtype)
