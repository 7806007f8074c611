"""Indexing rules: gathers (index, gather; index_select is one of shape.SAME_OP_ON_PAIR) and the scatters slice assignment exports as
(slice_scatter, select_scatter, index_put, copy). Index tensors address the complex dims, which are the
pair's leading dims, so they apply to the pair unchanged; the pair dim rides along.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim
from aotcuda.passes.complex_to_real.pair_algebra import as_addend, cast, result_dtype
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
