"""Shape and view rules: every op that only moves elements runs on the pair with its dims mapped.

One mechanism for the whole kind: dims go through pair.pair_dim (a negative dim shifts by one past
the trailing pair dim), shapes gain a trailing 2 (pair.pair_shape), and the op itself is called on
the pair. Where an op's meaning depends on the rank (t, roll without dims), the rule says so.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, pair_dims, pair_shape, same_size
from aotcuda.passes.complex_to_real.pair_algebra import as_addend, cast, result_dtype
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


def pairs(values) -> list[Pair]:
    return [Pair(v) for v in values]


# ---- the same op on the pair, its dims and sizes mapped --------------------------------------------------

_DIM_ARGUMENTS = {"dim", "dim0", "dim1", "dims"}


def map_argument(name: str, value):
    """One argument of a shape op, as the same op on the pair needs it (chosen by the schema's name)."""
    if name in _DIM_ARGUMENTS:
        return pair_dim(value) if isinstance(value, int) else pair_dims(value)
    if name in ("size", "shape"):
        return pair_shape(value)
    return value


# On a 0-dim tensor eager accepts dim 0 / -1 for these ops and returns the values unchanged; mapped onto the
# pair, that dim would name the pair dim itself (squeeze([-1]) of a complex scalar became squeeze of dim -2).
_UNCHANGED_ON_SCALARS = {aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.flip.default,
                         aten.transpose.int}


# layout.py gives rule results eager's layout, so a view eager could take exists on the pair; where it
# cannot (it leaves overlapping layouts alone), the view may not. The exported graph is functional, where a
# view and a copy mean the same: reshape gives the view where one exists (the same graph) and else copies.
_VIEWS_AS_RESHAPE = {aten.view.default, aten._unsafe_view.default}


def same_op_on_pair(op: torch._ops.OpOverload):
    """A rule that calls `op` itself on the pair, every dim mapped (negative dims shift by one) and every
    size given the trailing 2; a list result (split, unbind) becomes a list of Pairs."""
    names = [argument.name for argument in op._schema.arguments]
    unchanged_on_scalars = op in _UNCHANGED_ON_SCALARS
    call = aten.reshape.default if op in _VIEWS_AS_RESHAPE else op

    def rule(out, a, *args, **kwargs):
        if unchanged_on_scalars and a.ndim == 0:
            return Pair(aten.alias.default(a.t))
        args = [map_argument(name, value) for name, value in zip(names[1:], args)]
        kwargs = {name: map_argument(name, value) for name, value in kwargs.items()}
        result = call(a.t, *args, **kwargs)
        if isinstance(result, (list, tuple)):
            return pairs(result)
        return Pair(result) if isinstance(result, torch.Tensor) else result

    rule.__doc__ = "The same op on the pair, dims mapped, sizes + [2]."
    rule.__name__ = rule.__qualname__ = f"same_op_on_pair({op})"
    return rule


SAME_OP_ON_PAIR = (
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.expand.default,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.transpose.int,
    aten.flip.default, aten.slice.Tensor, aten.select.int, aten.narrow.default, aten.split.Tensor,
    aten.split_with_sizes.default, aten.unbind.int, aten.chunk.default,
    aten.sym_size.int, aten._reshape_copy.default,
)
for _op in SAME_OP_ON_PAIR:
    register(_op)(same_op_on_pair(_op))


# ---- ops whose meaning depends on the rank ----------------------------------------------------------------


@register(aten.flatten.using_ints)
def flatten(out, a, start_dim=0, end_dim=-1):
    """flatten between the mapped dims (end_dim -1 stops before the pair dim); a scalar becomes [1]."""
    if a.ndim == 0:
        return Pair(a.t.reshape(1, 2))
    return Pair(aten.flatten.using_ints(a.t, pair_dim(start_dim), pair_dim(end_dim)))


@register(aten.permute.default)
def permute(out, a, dims):
    """permute the mapped dims; the pair dim stays last."""
    return Pair(aten.permute.default(a.t, [*pair_dims(dims), a.ndim]))


@register(aten.t.default)
def t(out, a):
    """transpose dims 0 and 1 of a matrix; a vector or scalar stays as it is."""
    return Pair(aten.transpose.int(a.t, 0, 1)) if a.ndim == 2 else a


@register(aten.roll.default)
def roll(out, a, shifts, dims=()):
    """roll along the mapped dims; with no dims, eager rolls the flattened tensor, so roll [numel, 2]."""
    if len(dims) == 0:
        return Pair(aten.roll.default(a.t.reshape(-1, 2), shifts, [0]).view(a.t.shape))
    return Pair(aten.roll.default(a.t, shifts, pair_dims(dims)))


@register(aten.diagonal.default)
def diagonal(out, a, offset=0, dim1=0, dim2=1):
    """diagonal of the pair over the same dims; the diagonal, which the op appends last, moved before the pair dim."""
    return Pair(aten.diagonal.default(a.t, offset, dim1 % a.ndim, dim2 % a.ndim).movedim(-1, -2))


@register(aten.unfold.default)
def unfold(out, a, dimension, size, step):
    """unfold the pair along the same dim; the window dim, which the op appends last, moved before the pair dim."""
    if a.ndim == 0:  # eager's one window of `size` (0 or 1) of a scalar: [size]
        return Pair(a.t.unsqueeze(0).narrow(0, 0, size))
    return Pair(aten.unfold.default(a.t, dimension % a.ndim, size, step).movedim(-1, -2))


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


def _as_in_eager(value, out, what: str):
    """`value` if it equals eager's `out` (SymInts by expression); else the rule fails and the program is
    refused: a rule's result may be laid out unlike eager's (an FFT's), and a stride the program computes
    with must not silently differ from the one eager would give."""
    if not same_size(value, out):
        raise ValueError(f"the pair's {what} is {value} where eager's is {out}: this tensor is laid out "
                         "unlike eager's, so a program computing with it would differ")
    return value


@register(aten.sym_stride.int)
def sym_stride(out, a, dim):
    """Strides of a pair count real elements: half of them, in complex elements (eager's, or refused)."""
    return _as_in_eager(aten.sym_stride.int(a.t, pair_dim(dim)) // 2, out, f"stride({dim})")


@register(aten.sym_numel.default)
def sym_numel(out, a):
    """Half the pair's element count."""
    return aten.sym_numel.default(a.t) // 2


@register(aten.sym_storage_offset.default)
def sym_storage_offset(out, a):
    """Half the pair's storage offset (eager's, or refused)."""
    return _as_in_eager(aten.sym_storage_offset.default(a.t) // 2, out, "storage offset")
