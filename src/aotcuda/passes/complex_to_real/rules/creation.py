"""Creation rules: complex values made from real ones (polar, complex, view_as_complex) or from nothing
(full, zeros, ones, empty, scalar_tensor and their *_like / new_* forms with a complex dtype), and
view_as_real, which turns a pair back into the real tensor it already is.

Every tensor a rule creates goes on the device of the eager result (`out.device`), never on the op's
`device` argument: an absent one would mean torch's default device, not the program's.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_shape, real_dtype, scalar_pair
from aotcuda.passes.complex_to_real.pair_algebra import polar_pair, result_dtype
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


def filled_pair(size, value, dtype: torch.dtype, device) -> Pair:
    """A pair of shape size + [2] filled with the complex value (real values get a zero imaginary part)."""
    zeros = torch.zeros(pair_shape(size), dtype=dtype, device=device)
    if isinstance(value, complex):
        re, im = value.real, value.imag
    else:
        re, im = value, 0
    if isinstance(re, (int, float)) and re == 0 and im == 0:
        return Pair(zeros)
    return Pair(zeros + scalar_pair(re, im, dtype, device))


@register(aten.polar.default, computes=True)
def polar(out, magnitude, angle):
    """magnitude · (cos angle, sin angle)."""
    dtype = result_dtype(out)
    magnitude, angle = torch.broadcast_tensors(magnitude.to(dtype), angle.to(dtype))
    return polar_pair(magnitude, angle)


@register(aten.complex.default)
def complex_(out, real, imag):
    """(real, imag) stacked into a pair."""
    dtype = result_dtype(out)
    real, imag = torch.broadcast_tensors(real.to(dtype), imag.to(dtype))
    return Pair(torch.stack([real, imag], -1))


@register(aten.view_as_complex.default)
def view_as_complex(out, x):
    """No-op: the real [..., 2] tensor is the pair."""
    return Pair(x)


@register(aten.view_as_real.default)
def view_as_real(out, a):
    """No-op: the pair is the real [..., 2] tensor."""
    return a.t


@register(aten.full.default)
def full(out, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A pair filled with (re, im) of the fill value."""
    return filled_pair(size, fill_value, result_dtype(out), out.device)


@register(aten.zeros.default)
def zeros(out, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A pair of zeros."""
    return filled_pair(size, 0, result_dtype(out), out.device)


@register(aten.ones.default)
def ones(out, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A pair of (1, 0)."""
    return filled_pair(size, 1, result_dtype(out), out.device)


@register(aten.empty.memory_format)
def empty(out, size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """An uninitialised pair."""
    return Pair(torch.empty(pair_shape(size), dtype=result_dtype(out), device=out.device))


@register(aten.empty_permuted.default)
def empty_permuted(out, size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    """An uninitialised pair laid out in `physical_layout`, the pair dim innermost."""
    layout_with_pair = [*physical_layout, len(physical_layout)]
    return Pair(torch.empty_permuted(pair_shape(size), layout_with_pair, dtype=result_dtype(out), device=out.device))


@register(aten.scalar_tensor.default)
def scalar_tensor(out, s, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A 0-dim complex tensor: the pair [re, im]."""
    return filled_pair([], s, result_dtype(out), out.device)


def _like(out, a, value):
    """A tensor shaped like `a` filled with `value`, in the result's dtype: a pair when that is complex."""
    shape = a.shape
    if out.dtype.is_complex:
        return filled_pair(shape, value, real_dtype(out.dtype), out.device)
    return torch.full(shape, value.real if isinstance(value, complex) else value, dtype=out.dtype,
                      device=out.device)



@register(aten.full_like.default)
def full_like(out, a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    """Filled like a (with a complex dtype either given or taken from a)."""
    return _like(out, a, fill_value)


@register(aten.zeros_like.default)
def zeros_like(out, a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Zeros like a."""
    return _like(out, a, 0)


@register(aten.ones_like.default)
def ones_like(out, a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Ones (1 + 0i) like a."""
    return _like(out, a, 1)


@register(aten.empty_like.default)
def empty_like(out, a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Uninitialised like a (filled with zeros: the values are unspecified, zeros are one choice)."""
    return _like(out, a, 0)


@register(aten.new_full.default)
def new_full(out, a, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A new filled tensor of `size` in a's (or the given) complex dtype."""
    return filled_pair(size, fill_value, result_dtype(out), out.device)


@register(aten.new_zeros.default)
def new_zeros(out, a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A new tensor of zeros of `size`."""
    return filled_pair(size, 0, result_dtype(out), out.device)


@register(aten.new_ones.default)
def new_ones(out, a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A new tensor of (1, 0) of `size`."""
    return filled_pair(size, 1, result_dtype(out), out.device)


@register(aten.new_empty.default)
def new_empty(out, a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A new uninitialised tensor of `size`."""
    return Pair(torch.empty(pair_shape(size), dtype=result_dtype(out), device=out.device))


# ---- random: a complex standard normal has E|z|² = 1, so each part is a real normal of variance 1/2 ----------


def normal_pair(size, out) -> Pair:
    """A pair of independent normals of variance 1/2 each, as eager draws a complex standard normal."""
    return Pair(torch.randn(pair_shape(size), dtype=result_dtype(out), device=out.device) * 0.5 ** 0.5)


@register(aten.randn.default)
def randn(out, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """Complex standard normals: each part a real normal of variance 1/2 (values differ from eager's draw)."""
    return normal_pair(size, out)


@register(aten.randn_like.default)
def randn_like(out, a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Normals shaped like a: complex ones as randn's, real ones (a real dtype given) a real randn."""
    if out.dtype.is_complex:
        return normal_pair(a.shape, out)
    return torch.randn(a.shape, dtype=out.dtype, device=out.device)
