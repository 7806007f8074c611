"""Indexing rules: gathers (index, index_select, gather) and the scatters slice assignment exports as
(slice_scatter, select_scatter, index_put, copy). Index tensors address the complex dims, which are the
pair's leading dims, so they apply to the pair unchanged; the pair dim rides along.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, scalar_pair
from aotcuda.passes.complex_to_real.pair_algebra import as_addend, cast, mul_pairs, multiply, result_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.conversion import real_value

aten = torch.ops.aten


def source_pair(out, src) -> torch.Tensor:
    """The values written by a scatter as a pair in the result dtype (a real source gets zero imaginary)."""
    dtype = result_dtype(out)
    return as_addend(cast(src, dtype), dtype, out.device)


def scatter_operands(out, a, src):
    """(destination, values, wrap) for a scatter into a: pairs for a complex a; for a real a (eager's
    `real[i] = z`), the complex values cast to a's dtype as copy_ casts them, and no wrapping."""
    if isinstance(a, Pair):
        return a.t, source_pair(out, src), Pair
    if isinstance(src, Pair):
        src = real_value(src, a.dtype).to(a.dtype)
    return a, src, lambda t: t


@register(aten.index.Tensor)
def index(out, a, indices):
    """Advanced indexing of the complex dims; the pair dim, never indexed, stays last."""
    return Pair(aten.index.Tensor(a.t, indices))


@register(aten.index_select.default)
def index_select(out, a, dim, index_):
    """index_select along the mapped dim; a scalar's pair is indexed as [1, 2], then reshaped back to [2].

    Of a scalar, eager takes an index of one element (0) and gives a 0-dim result; the pair's own dim 0 is its
    parts, not a complex dim, so it is indexed with a leading dim of 1 added (keeping eager's bounds check)."""
    if a.ndim == 0:
        return Pair(aten.index_select.default(a.t.unsqueeze(0), 0, index_.reshape(-1)).reshape(2))
    return Pair(aten.index_select.default(a.t, pair_dim(dim), index_))


@register(aten.gather.default)
def gather(out, a, dim, index_, *, sparse_grad=False):
    """gather along the mapped dim, with the index repeated for both parts."""
    pair_index = index_.unsqueeze(-1).expand(*index_.shape, 2)
    return Pair(aten.gather.default(a.t, pair_dim(dim), pair_index))


@register(aten.slice_scatter.default)
def slice_scatter(out, a, src, dim=0, start=None, end=None, step=1):
    """slice_scatter along the mapped dim (into a real tensor: the values cast as copy_ casts them)."""
    a, src, wrap = scatter_operands(out, a, src)
    return wrap(aten.slice_scatter.default(a, src, pair_dim(dim) if wrap is Pair else dim, start, end, step))


@register(aten.select_scatter.default)
def select_scatter(out, a, src, dim, index_):
    """select_scatter along the mapped dim (into a real tensor: the values cast as copy_ casts them)."""
    a, src, wrap = scatter_operands(out, a, src)
    return wrap(aten.select_scatter.default(a, src, pair_dim(dim) if wrap is Pair else dim, index_))


@register(aten.index_put.default)
def index_put(out, a, indices, values, accumulate=False):
    """index_put on the complex dims; values broadcast as pairs (eager refuses complex values into real)."""
    return Pair(aten.index_put.default(a.t, indices, source_pair(out, values), accumulate))


@register(aten.copy.default)
def copy(out, a, src, non_blocking=False):
    """a's shape and dtype with src's values; a complex src copied into a real a is cast as `.to` casts it."""
    if not isinstance(a, Pair):
        return aten.copy.default(a, real_value(src, a.dtype), non_blocking)
    return Pair(aten.copy.default(a.t, source_pair(out, src), non_blocking))


def _pair_index(index_: torch.Tensor) -> torch.Tensor:
    """An index over complex elements, repeated for both parts of each."""
    return index_.unsqueeze(-1).expand(*index_.shape, 2)


@register(aten.scatter_add.default, computes=True)
def scatter_add(out, a, dim, index_, src):
    """scatter_add along the mapped dim, the index repeated for both parts (sums in eager's order)."""
    src = source_pair(out, src)
    return Pair(aten.scatter_add.default(a.t, pair_dim(dim), _pair_index(index_), src))


@register(aten.index_add.default, computes=True)
def index_add(out, a, dim, index_, source, *, alpha=1):
    """index_add along the mapped dim of alpha · source (alpha a number, complex too)."""
    dtype = result_dtype(out)
    source = cast(source, dtype)
    if alpha != 1:
        source = multiply(source, alpha, dtype)
    return Pair(aten.index_add.default(a.t, pair_dim(dim), index_, as_addend(source, dtype, out.device)))


@register(aten.diagonal_scatter.default)
def diagonal_scatter(out, a, src, offset=0, dim1=0, dim2=1):
    """src written on the diagonal over the same dims (the pair dim moved after the diagonal, as diagonal's rule)."""
    src = source_pair(out, src)
    return Pair(aten.diagonal_scatter.default(a.t, src.movedim(-1, -2), offset, dim1 % a.ndim, dim2 % a.ndim))


@register(aten.embedding.default)
def embedding(out, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of a complex weight: an index over its first dim."""
    return Pair(aten.index_select.default(weight.t, 0, indices.reshape(-1)).reshape(*indices.shape, *weight.t.shape[1:]))


@register(aten.scatter.src, aten.scatter.value)
def scatter(out, a, dim, index_, src):
    """scatter along the mapped dim, the index repeated for both parts (a number's pair broadcast to the index)."""
    values = source_pair(out, src)
    if not isinstance(src, (Pair, torch.Tensor)):
        values = values.expand(*index_.shape, 2)
    return Pair(aten.scatter.src(a.t, pair_dim(dim), _pair_index(index_), values))


@register(aten.put.default, computes=True)
def put(out, a, index_, source, accumulate=False):
    """put into the flattened pair: complex element i is real elements 2i and 2i + 1 (a negative i too: −1 → −2, −1)."""
    pair_index = torch.stack([2 * index_, 2 * index_ + 1], -1)
    return Pair(aten.put.default(a.t, pair_index, source_pair(out, source), accumulate))


def _scatter_multiply(t: torch.Tensor, dim: int, index_: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """t with each element the index sends src to multiplied by it, one position of `dim` at a time (no two
    elements of one index slice write the same place): a gather, a complex product and a scatter back, in eager's
    order."""
    d = pair_dim(dim)
    if index_.ndim == 0:  # a scalar's only element
        return mul_pairs(Pair(t), Pair(values)).t
    for k in range(index_.shape[dim]):
        at = _pair_index(index_.narrow(dim, k, 1))
        factor = values[tuple(slice(0, n) for n in index_.shape)].narrow(d, k, 1)
        t = aten.scatter.src(t, d, at, mul_pairs(Pair(aten.gather.default(t, d, at)), Pair(factor)).t)
    return t


@register(aten.scatter.reduce, computes=True)
def scatter_reduce(out, a, dim, index_, src, *, reduce):
    """reduce="add": scatter_add's rule. reduce="multiply": one position of `dim` at a time (no two elements of
    one index slice write the same place), each a gather, a complex product and a scatter back, in eager's order."""
    values = source_pair(out, src)
    if reduce == "add":
        return Pair(aten.scatter.reduce(a.t, pair_dim(dim), _pair_index(index_), values, reduce="add"))
    return Pair(_scatter_multiply(a.t.to(result_dtype(out)), dim, index_, values))


def _scatter_reduce_refusal(node: torch.fx.Node) -> str | None:
    """`z.scatter_reduce(d, i, src, r)` with r "amax" or "amin" (eager refuses them), or "prod" over a dynamic index.

    A "prod" whose index has a dynamic size along d: its products run one position of d at a time."""
    reduce = node.args[4] if len(node.args) > 4 else node.kwargs.get("reduce")
    if reduce not in ("sum", "mean", "prod"):
        return f'scatter_reduce with reduce="{reduce}" of complex values: eager has no complex {reduce} either'
    index_, dim = node.args[2].meta.get("val"), node.args[1]
    if reduce == "prod" and index_.ndim and not isinstance(index_.shape[dim], int):
        return ('scatter_reduce with reduce="prod" of complex values over an index of dynamic size along dim '
                f"{dim}: its products run one position of that dim at a time; make that size static")
    return None


@register(aten.scatter_reduce.two, refuses=_scatter_reduce_refusal, computes=True)
def scatter_reduce_two(out, a, dim, index_, src, reduce, *, include_self=True):
    """"sum", "mean": each part reduced, the index repeated for both; "prod": pairs multiplied as scatter's.

    One count serves both parts of a mean; "prod" runs scatter(reduce="multiply")'s products, from (1, 0) at the
    places the index writes where include_self is False."""
    values, d = source_pair(out, src), pair_dim(dim)
    if reduce in ("sum", "mean"):
        return Pair(aten.scatter_reduce.two(a.t, d, _pair_index(index_), values, reduce, include_self=include_self))
    t = a.t.to(result_dtype(out))
    if not include_self:  # the places the index writes start from 1 instead of a's value
        ones = torch.ones_like(values, dtype=t.dtype) * scalar_pair(1, 0, t.dtype, t.device)
        t = aten.scatter.src(t, d, _pair_index(index_), ones)
    return Pair(_scatter_multiply(t, dim, index_, values))


@register(aten.masked_select.default)
def masked_select(out, a, mask):
    """The pair's elements where the mask (broadcast over the pair dim) is set, two by two."""
    return Pair(aten.masked_select.default(a.t, mask.unsqueeze(-1)).reshape(-1, 2))
