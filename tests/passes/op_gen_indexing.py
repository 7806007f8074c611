"""Generators of the indexing ops (gathers, scatters, embedding) for op_gen.GENERATORS (split from op_gen.py to
keep each module short; op_gen imports this module at its end, so importing op_gen registers every generator)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from op_gen import (ALPHAS, SCALARS, broadcast_into, complex_with, dim_of, draw, exact, generates, real_dtype,
                    two_dims)
from program_gen import shapes

aten = torch.ops.aten


def index_tensor(b, size: int, shape: tuple, *, negative=True) -> torch.Tensor:
    low = -size if negative else 0
    return torch.randint(low, size, shape, generator=b.generator)


@generates(aten.index.Tensor)
def index(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    k = draw(b, st.integers(1, x.ndim))
    shape = draw(b, shapes(0, 2))
    used = draw(b, st.lists(st.booleans(), min_size=k, max_size=k).filter(any))
    indices = [b.constant(index_tensor(b, x.shape[d], shape)) if u else None for d, u in enumerate(used)]
    b.step(op, x.ref, indices, safe=x.safe)


@generates(aten.gather.default)
def gather(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    dim = dim_of(b, x.ndim)
    shape = tuple(draw(b, st.integers(1, s)) if s else 0 for s in x.shape)
    shape = tuple(draw(b, st.integers(1, 4)) if d == dim % x.ndim else s for d, s in enumerate(shape))
    b.step(op, x.ref, dim, b.constant(index_tensor(b, x.shape[dim], shape, negative=False)), safe=x.safe)


@generates(aten.index_select.default)
def index_select(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    dim = dim_of(b, x.ndim)
    count = draw(b, st.integers(0, 4))
    b.step(op, x.ref, dim, b.constant(index_tensor(b, x.shape[dim], (count,), negative=False)), safe=x.safe)


@generates(aten.slice_scatter.default, aten.select_scatter.default)
def scatter(b, op):
    x = complex_with(b, min_ndim=1, nonempty=op is aten.select_scatter.default)  # select needs an index
    dim = dim_of(b, x.ndim)
    size = x.shape[dim]
    if op is aten.slice_scatter.default:
        start, end = draw(b, st.integers(-size, size)), draw(b, st.one_of(st.none(), st.integers(-size, size + 2)))
        where = (dim, start, end, draw(b, st.integers(1, 3)))
        shape = aten.slice.Tensor(x.example, *where).shape
    else:
        where = (dim, draw(b, st.integers(-size, size - 1)))
        shape = aten.select.int(x.example, *where).shape
    # src in x's precision: torch's select_scatter/slice_scatter decompositions (a where) promote x to a
    # wider src's dtype, where eager keeps x's, so the exported program itself would differ from eager.
    complex_ = draw(b, st.booleans())
    dtype = x.example.dtype if complex_ else real_dtype(x.example.dtype)
    b.step(op, x.ref, exact(b, tuple(shape), complex_=complex_, dtype=dtype).ref, *where)


@generates(aten.index_put.default)
def index_put(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    accumulate = draw(b, st.booleans())
    count = draw(b, st.integers(1, x.shape[0])) if x.shape[0] else 0
    rows = (torch.randint(0, x.shape[0], (count,), generator=b.generator) if accumulate
            else torch.randperm(x.shape[0], generator=b.generator)[:count])  # unique: writes don't race
    shape = (count, *x.shape[1:])  # index_put wants values of the destination's dtype
    values = exact(b, draw(b, broadcast_into(shape)), complex_=True, dtype=x.example.dtype)
    b.step(op, x.ref, [b.constant(rows)], values.ref, accumulate)


@generates(aten.copy.default)
def copy(b, op):
    x = b.pick(complex_=None) or complex_with(b)
    src = b.operand(x.shape, complex_=True if not x.is_complex else None)
    b.step(op, x.ref, src.ref)


@generates(aten.diagonal_scatter.default)
def diagonal_scatter(b, op):
    x = complex_with(b, min_ndim=2)
    dim1, dim2 = two_dims(b, x.ndim)
    offset = draw(b, st.integers(-3, 3))
    shape = aten.diagonal.default(x.example, offset, dim1, dim2).shape
    complex_ = draw(b, st.booleans())  # src in x's precision, as for slice_scatter above
    dtype = x.example.dtype if complex_ else real_dtype(x.example.dtype)
    b.step(op, x.ref, exact(b, tuple(shape), complex_=complex_, dtype=dtype).ref, offset, dim1, dim2)


@generates(aten.embedding.default)
def embedding(b, op):
    weight = complex_with(b, min_ndim=2, max_ndim=2, nonempty=True)  # rows to index
    b.step(op, weight.ref, b.constant(index_tensor(b, weight.shape[0], draw(b, shapes(0, 2)), negative=False)),
           safe=weight.safe)


def _slab(x, dim: int, length: int) -> tuple:
    """x's shape with `length` along `dim` (the shape of an index_add source)."""
    return tuple(length if d == dim % x.ndim else s for d, s in enumerate(x.shape))


@generates(aten.index_add.default)
def index_add(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    dim = dim_of(b, x.ndim)
    count = draw(b, st.integers(0, 4))  # repeated indices add up
    index_ = b.constant(index_tensor(b, x.shape[dim], (count,), negative=False))
    source = exact(b, _slab(x, dim, count), complex_=True, dtype=x.example.dtype)  # eager wants x's dtype
    kwargs = {"alpha": draw(b, ALPHAS)} if draw(b, st.booleans()) else {}
    b.step(op, x.ref, dim, index_, source.ref, **kwargs)


def _scatter_index(b, x, dim: int, *, unique: bool) -> torch.Tensor:
    """An index for scatter along `dim` into x, no longer than x in the other dims; along `dim` 1-4 long with
    repeats (scatter_add adds them up), or with `unique` no position twice (scatter's writes to one would race)."""
    d = dim % x.ndim
    sizes = [draw(b, st.integers(1, s)) for s in x.shape]
    if not unique:
        sizes[d] = draw(b, st.integers(1, 4))
        return index_tensor(b, x.shape[d], tuple(sizes), negative=False)
    sizes[d] = draw(b, st.integers(1, x.shape[d]))
    full = torch.rand([x.shape[d] if i == d else s for i, s in enumerate(sizes)], generator=b.generator)
    return full.argsort(d).narrow(d, 0, sizes[d])


@generates(aten.scatter_add.default, aten.scatter.src, aten.scatter.value)
def scatter_along(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    dim = dim_of(b, x.ndim)
    index_ = _scatter_index(b, x, dim, unique=op is not aten.scatter_add.default)
    if op is aten.scatter.value:
        b.step(op, x.ref, dim, b.constant(index_), draw(b, SCALARS))
        return
    source = exact(b, tuple(index_.shape), complex_=True, dtype=x.example.dtype)  # eager wants x's dtype
    b.step(op, x.ref, dim, b.constant(index_), source.ref)


@generates(aten.scatter_reduce.two)
def scatter_reduce(b, op):
    """The reductions eager takes for complex values ("amax" and "amin" it refuses), with repeated positions."""
    x = complex_with(b, min_ndim=1, nonempty=True)
    dim = dim_of(b, x.ndim)
    index_ = _scatter_index(b, x, dim, unique=False)
    source = exact(b, tuple(index_.shape), complex_=True, dtype=x.example.dtype)
    b.step(op, x.ref, dim, b.constant(index_), source.ref, draw(b, st.sampled_from(["sum", "mean", "prod"])),
           include_self=draw(b, st.booleans()))
