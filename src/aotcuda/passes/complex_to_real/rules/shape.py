"""Shape and view rules: every op that only moves elements runs on the pair with its dims mapped.

One mechanism for the whole kind: dims go through pair.pair_dim (a negative dim shifts by one past
the trailing pair dim), shapes gain a trailing 2 (pair.pair_shape), and the op itself is called on
the pair. Where an op's meaning depends on the rank (t, roll without dims), the rule says so.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, pair_dims, pair_shape
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.elementwise import as_addend, cast, result_dtype

aten = torch.ops.aten


def pairs(values) -> list[Pair]:
    return [Pair(v) for v in values]


# ---- reshapes ---------------------------------------------------------------------------------------------


@register(aten.view.default)
def view(out, a, size):
    """view(size + [2])."""
    return Pair(aten.view.default(a.t, pair_shape(size)))


@register(aten.reshape.default)
def reshape(out, a, size):
    """reshape(size + [2])."""
    return Pair(aten.reshape.default(a.t, pair_shape(size)))


@register(aten._unsafe_view.default)
def unsafe_view(out, a, size):
    """_unsafe_view(size + [2])."""
    return Pair(aten._unsafe_view.default(a.t, pair_shape(size)))


@register(aten.expand.default)
def expand(out, a, size, implicit=False):
    """expand(size + [2])."""
    return Pair(aten.expand.default(a.t, pair_shape(size)))


@register(aten.unsqueeze.default)
def unsqueeze(out, a, dim):
    """unsqueeze at the mapped dim."""
    return Pair(aten.unsqueeze.default(a.t, pair_dim(dim)))


@register(aten.squeeze.default)
def squeeze(out, a):
    """squeeze every size-1 dim (the pair dim has size 2 and stays)."""
    return Pair(aten.squeeze.default(a.t))


@register(aten.squeeze.dim)
def squeeze_dim(out, a, dim):
    """squeeze the mapped dim."""
    return Pair(aten.squeeze.dim(a.t, pair_dim(dim)))


@register(aten.squeeze.dims)
def squeeze_dims(out, a, dim):
    """squeeze the mapped dims."""
    return Pair(aten.squeeze.dims(a.t, pair_dims(dim)))


@register(aten.flatten.using_ints)
def flatten(out, a, start_dim=0, end_dim=-1):
    """flatten between the mapped dims (end_dim -1 stops before the pair dim)."""
    if a.ndim == 0:
        return Pair(a.t.reshape(1, 2))
    return Pair(aten.flatten.using_ints(a.t, pair_dim(start_dim), pair_dim(end_dim)))


# ---- dim orders ------------------------------------------------------------------------------------------


@register(aten.permute.default)
def permute(out, a, dims):
    """permute the mapped dims; the pair dim stays last."""
    return Pair(aten.permute.default(a.t, [*pair_dims(dims), a.ndim]))


@register(aten.transpose.int)
def transpose(out, a, dim0, dim1):
    """transpose the mapped dims."""
    return Pair(aten.transpose.int(a.t, pair_dim(dim0), pair_dim(dim1)))


@register(aten.t.default)
def t(out, a):
    """transpose dims 0 and 1 of a matrix; a vector or scalar stays as it is."""
    return Pair(aten.transpose.int(a.t, 0, 1)) if a.ndim == 2 else a


@register(aten.flip.default)
def flip(out, a, dims):
    """flip the mapped dims."""
    return Pair(aten.flip.default(a.t, pair_dims(dims)))


@register(aten.roll.default)
def roll(out, a, shifts, dims=()):
    """roll along the mapped dims; with no dims, eager rolls the flattened tensor, so roll [numel, 2]."""
    if len(dims) == 0:
        return Pair(aten.roll.default(a.t.reshape(-1, 2), shifts, [0]).view(a.t.shape))
    return Pair(aten.roll.default(a.t, shifts, pair_dims(dims)))


# ---- slices and pieces ---------------------------------------------------------------------------------


@register(aten.slice.Tensor)
def slice_(out, a, dim=0, start=None, end=None, step=1):
    """slice along the mapped dim."""
    return Pair(aten.slice.Tensor(a.t, pair_dim(dim), start, end, step))


@register(aten.select.int)
def select(out, a, dim, index):
    """select along the mapped dim."""
    return Pair(aten.select.int(a.t, pair_dim(dim), index))


@register(aten.narrow.default)
def narrow(out, a, dim, start, length):
    """narrow along the mapped dim."""
    return Pair(aten.narrow.default(a.t, pair_dim(dim), start, length))


@register(aten.split.Tensor)
def split(out, a, split_size, dim=0):
    """split along the mapped dim; getitem picks a Pair."""
    return pairs(aten.split.Tensor(a.t, split_size, pair_dim(dim)))


@register(aten.split_with_sizes.default)
def split_with_sizes(out, a, split_sizes, dim=0):
    """split_with_sizes along the mapped dim."""
    return pairs(aten.split_with_sizes.default(a.t, split_sizes, pair_dim(dim)))


@register(aten.unbind.int)
def unbind(out, a, dim=0):
    """unbind along the mapped dim."""
    return pairs(aten.unbind.int(a.t, pair_dim(dim)))


@register(aten.chunk.default)
def chunk(out, a, chunks, dim=0):
    """chunk along the mapped dim."""
    return pairs(aten.chunk.default(a.t, chunks, pair_dim(dim)))


# ---- joins and repeats ---------------------------------------------------------------------------------


def _pair_operands(out, tensors) -> list[torch.Tensor]:
    """Operands of a join as pairs in the result dtype; a real operand gets a zero imaginary part."""
    dtype = result_dtype(out)
    return [as_addend(cast(x, dtype), dtype, out.device) for x in tensors]


@register(aten.cat.default)
def cat(out, tensors, dim=0):
    """cat along the mapped dim (real operands join as (x, 0))."""
    dim = pair_dim(dim)
    return Pair(aten.cat.default(_pair_operands(out, tensors), dim))


@register(aten.stack.default)
def stack(out, tensors, dim=0):
    """stack at the mapped dim."""
    return Pair(aten.stack.default(_pair_operands(out, tensors), pair_dim(dim)))


@register(aten.repeat.default)
def repeat(out, a, repeats):
    """repeat with the pair dim repeated once."""
    return Pair(aten.repeat.default(a.t, [*repeats, 1]))


@register(aten.constant_pad_nd.default)
def constant_pad_nd(out, a, pad, value=0):
    """pad the complex dims (the pair dim gets no padding); a non-zero fill goes in with a mask."""
    pair_pad = [0, 0, *pad]
    if value == 0:
        return Pair(aten.constant_pad_nd.default(a.t, pair_pad, 0))
    inside = aten.constant_pad_nd.default(torch.ones_like(a.t[..., :1]), pair_pad, 0) != 0
    fill = as_addend(value, a.dtype, a.t.device)
    return Pair(torch.where(inside, aten.constant_pad_nd.default(a.t, pair_pad, 0), fill))


# ---- sizes -------------------------------------------------------------------------------------------------


@register(aten.sym_size.int)
def sym_size(out, a, dim):
    """The size of the mapped dim."""
    return aten.sym_size.int(a.t, pair_dim(dim))


@register(aten.sym_stride.int)
def sym_stride(out, a, dim):
    """Strides of a pair count real elements: half of them, in complex elements."""
    return aten.sym_stride.int(a.t, pair_dim(dim)) // 2


@register(aten.sym_numel.default)
def sym_numel(out, a):
    """Half the pair's element count."""
    return aten.sym_numel.default(a.t) // 2


@register(aten.sym_storage_offset.default)
def sym_storage_offset(out, a):
    """Half the pair's storage offset."""
    return aten.sym_storage_offset.default(a.t) // 2
