"""The pair representation of a complex tensor, and the dim and dtype arithmetic every rule shares.

A complex tensor of shape S is carried during the rewrite as a real tensor of shape S + [2] in the
layout of torch.view_as_real: [..., 0] is the real part, [..., 1] the imaginary part. complex64 maps
to float32, complex128 to float64. Rules receive complex operands as `Pair` objects so that they can
tell them apart from real tensors (which stay plain torch.Tensor).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Sequence

import torch

from aotcuda.package_format import REAL_OF_COMPLEX
from aotcuda.passes.complex_to_real.torch_internals import get_proxy_mode

# The pair dtype of each complex dtype, from the package contract's table (one table for the pass and the runtime).
_PAIR_DTYPE = {getattr(torch, complex_name): getattr(torch, real_name)
               for complex_name, real_name in REAL_OF_COMPLEX.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class Pair:
    """A complex tensor as its view_as_real pair: `t` is real with shape complex_shape + [2]."""

    t: torch.Tensor

    @property
    def ndim(self) -> int:
        """Rank of the complex tensor (one less than the pair's)."""
        return self.t.ndim - 1

    @property
    def shape(self) -> torch.Size:
        return self.t.shape[:-1]

    @property
    def dtype(self) -> torch.dtype:
        """The pair's real dtype (float32 for complex64, float64 for complex128)."""
        return self.t.dtype

    @property
    def re(self) -> torch.Tensor:
        return self.t.select(-1, 0)

    @property
    def im(self) -> torch.Tensor:
        return self.t.select(-1, 1)

    def to(self, real_dtype: torch.dtype) -> Pair:
        return self if self.t.dtype == real_dtype else Pair(self.t.to(real_dtype))


def same_size(a, b) -> bool:
    """Sizes, strides or offsets equal: ints by value, SymInts by expression (no guard is added)."""
    if isinstance(a, torch.SymInt) or isinstance(b, torch.SymInt):
        return isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt) and a.node.expr == b.node.expr
    return a == b


def real_dtype(dtype: torch.dtype) -> torch.dtype:
    """The pair dtype of a complex dtype; real dtypes map to themselves."""
    return _PAIR_DTYPE.get(dtype, dtype)


def pair_dim(dim: int) -> int:
    """Map a dim of a complex tensor to the same dim of its pair.

    Non-negative dims are unchanged; negative dims shift by one, past the trailing pair dim. This holds
    for ops whose dim counts in the output's rank too (unsqueeze, stack), because the pair dim is always
    last in both.
    """
    return dim - 1 if dim < 0 else dim


def pair_dims(dims: Sequence[int]) -> list[int]:
    return [pair_dim(d) for d in dims]


def pair_shape(shape: Sequence) -> list:
    """A complex shape (ints or SymInts) → the pair's shape, with the trailing 2."""
    return [*shape, 2]


def unsqueeze_real(x: torch.Tensor) -> torch.Tensor:
    """A real operand of an elementwise op with a pair: a trailing size-1 dim broadcasts it on both parts.

    A 0-dim tensor broadcasts as it is, and must stay 0-dim: eager (and Inductor) accept a 0-dim CPU
    tensor next to device tensors, but not a 1-dim one.
    """
    return x if x.ndim == 0 else x.unsqueeze(-1)


def real_as_pair(x: torch.Tensor) -> Pair:
    """A real tensor as a complex one with zero imaginary part: (x, 0) by padding the trailing dim."""
    return Pair(torch.constant_pad_nd(x.unsqueeze(-1), [0, 1]))


# ---- small constant tensors, made once per traced graph -------------------------------------------------

_SHARED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("complex_to_real_shared", default=None)


@contextlib.contextmanager
def shared_constants():
    """While active, the constant tensors below are made once per trace and reused by every rule.

    Each emitted op costs the rewrite a fake-tensor dispatch (about a millisecond with symbolic shapes);
    a program with a thousand complex products would otherwise trace a thousand identical aranges.
    Entries are keyed by the current make_fx tracer, so a subgraph's own trace gets its own.
    """
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _shared(key: tuple, make) -> torch.Tensor:
    cache, mode = _SHARED.get(), get_proxy_mode()
    if cache is None or mode is None:
        return make()
    key = (id(mode.tracer), *key)
    if key not in cache:
        cache[key] = make()
    return cache[key]


def derived_once(source: torch.Tensor, name: str, make):
    """`make()`, a tensor (or tuple) derived from `source`, made once per trace and reused for every
    later use of the same `source` value (e.g. the product tables of a RoPE factor shared by q and k).

    The cache holds `source` itself, so its id cannot be reused by another tensor while the entry lives.
    """
    cache, mode = _SHARED.get(), get_proxy_mode()
    if cache is None or mode is None:
        return make()
    key = (id(mode.tracer), "derived", name, id(source))
    entry = cache.get(key)
    if entry is None or entry[0] is not source:
        entry = cache[key] = (source, make())
    return entry[1]


def scalar_pair(re: float, im: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A complex Python scalar as a pair tensor [re, im] of shape [2], built without a lifted constant.

    One linspace (exact at both ends: torch computes its last point from the end, not by stepping);
    a stack of two scalars where an end is not finite, since linspace would step through inf − inf.
    """
    def make():
        if math.isfinite(re) and math.isfinite(im):
            return torch.linspace(re, im, 2, dtype=dtype, device=device)
        return torch.stack([torch.scalar_tensor(re, dtype=dtype, device=device),
                            torch.scalar_tensor(im, dtype=dtype, device=device)])

    return _shared(("scalar_pair", float(re), float(im), dtype, device), make)


def conj_sign(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[1, -1]: multiplying a pair by it conjugates it. One arange, which Inductor folds into the kernel."""
    return _shared(("conj_sign", dtype, device), lambda: torch.arange(1, -2, -2, dtype=dtype, device=device))


def rotate_sign(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[-1, 1]: flip(z, -1) * rotate_sign is i·z as a pair, (-im, re)."""
    return _shared(("rotate_sign", dtype, device), lambda: torch.arange(-1, 2, 2, dtype=dtype, device=device))


# Dim orders that make a pair tensor's strides those of view_as_real of a complex tensor in the format.
_MEMORY_FORMAT_ORDER = {torch.channels_last: (0, 2, 3, 1), torch.channels_last_3d: (0, 2, 3, 4, 1)}


def copy_in_memory_format(t: torch.Tensor, memory_format: torch.memory_format | None) -> torch.Tensor:
    """Copy a pair so that it is laid out as view_as_real of the complex tensor copied in `memory_format`.

    The pair dim always stays innermost (stride 1). Preserve and contiguous formats carry over as they
    are; channels_last(_3d) is a dim order of the complex tensor, so the pair gets that order plus its
    trailing dim.
    """
    order = _MEMORY_FORMAT_ORDER.get(memory_format)
    if order is None:
        fmt = memory_format or torch.preserve_format
        return torch.clone(t, memory_format=fmt)
    order = (*order, len(order))
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return t.permute(order).contiguous().permute(inverse)


def shared_table(key: tuple, make) -> torch.Tensor:
    """`make()`, made once per trace for `key` and reused by every later rule (see shared_constants)."""
    return _shared(key, make)
