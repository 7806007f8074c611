"""Conversion rules: casts between complex and real dtypes, real/imag parts, conjugation, metadata checks.

Casts follow eager: complex64 ↔ complex128 casts the pair; real → complex adds a zero imaginary part;
complex → real or integer keeps the real part (eager warns that it discards the imaginary part, and does
so); complex → bool is "nonzero", true where either part is nonzero (eager's `z != 0`, so `0+1j` is True).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, copy_in_memory_format, real_as_pair, real_dtype
from aotcuda.passes.complex_to_real.pair_algebra import conj
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten
prims = torch.ops.prims


def real_value(x: Pair, dtype: torch.dtype) -> torch.Tensor:
    """A complex value cast to a real dtype as eager casts it: bool is "either part nonzero" (nan counts
    as nonzero), any other dtype gets the real part. Not yet cast to `dtype` unless it is bool."""
    if dtype == torch.bool:
        return torch.logical_or(x.re != 0, x.im != 0)
    return x.re


def convert(out, x, device=None, memory_format=None):
    """x (Pair or real tensor) cast to the dtype of the eager result `out`, on `device`."""
    dtype = real_dtype(out.dtype)
    if isinstance(x, Pair) and out.dtype.is_complex:
        t = aten._to_copy.default(x.t, dtype=dtype, device=device)
        if memory_format not in (None, torch.preserve_format):
            t = copy_in_memory_format(t, memory_format)
        return Pair(t)
    if isinstance(x, Pair):
        return aten._to_copy.default(real_value(x, dtype), dtype=dtype, device=device, memory_format=memory_format)
    x = aten._to_copy.default(x, dtype=dtype, device=device, memory_format=memory_format)
    return real_as_pair(x)


@register(aten._to_copy.default)
def to_copy(out, x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
            memory_format=None):
    """Cast (and copy) between complex and real dtypes as eager: the real part, or "nonzero" for bool."""
    return convert(out, x, device=device, memory_format=memory_format)


@register(prims.convert_element_type.default)
def convert_element_type(out, x, dtype):
    """The prims form of a cast."""
    return convert(out, x)


@register(aten.real.default)
def real(out, a):
    """The real part, a view."""
    return a.re


@register(aten.imag.default)
def imag(out, a):
    """The imaginary part, a view."""
    return a.im


@register(aten._conj.default, aten.conj_physical.default, aten._conj_physical.default)
def conjugate(out, a):
    """(re, −im), materialised (the pass has no lazy conjugate bit, so resolve_conj is a no-op)."""
    return conj(a)


@register(aten._assert_tensor_metadata.default)
def assert_tensor_metadata(out, a, size=None, stride=None, dtype=None, *, device=None, layout=None):
    """Dropped: it checks the complex dtype the pass replaces by design."""
    return None


@register(aten._local_scalar_dense.default)
def local_scalar_dense(out, a):
    """`z.item()`: the Python complex of the one element's parts (export itself refuses a complex item, which has
    no symbolic form, so this runs only where the values are known)."""
    return complex(a.re.item(), a.im.item())
