"""Reduction rules: sum and mean over complex dims reduce both parts of the pair over the mapped dims."""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dims
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.elementwise import result_dtype

aten = torch.ops.aten


def reduced_dims(a: Pair, dims) -> list[int]:
    """The pair dims a reduction over the complex `dims` (None or [] meaning all) covers."""
    if dims is None or len(dims) == 0:
        return list(range(a.ndim))
    return pair_dims(dims)


def _reduce(reduction, out, a: Pair, dims, keepdim: bool) -> Pair:
    if a.ndim == 0:  # a reduction over no dim at all would reduce the pair dim itself
        return Pair(a.t.to(result_dtype(out)).clone())
    return Pair(reduction(a.t, reduced_dims(a, dims), keepdim, dtype=result_dtype(out)))


@register(aten.sum.dim_IntList)
def sum_dims(out, a, dim=None, keepdim=False, *, dtype=None):
    """sum over the mapped dims."""
    return _reduce(torch.sum, out, a, dim, keepdim)


@register(aten.sum.default)
def sum_all(out, a, *, dtype=None):
    """sum over every complex dim."""
    return _reduce(torch.sum, out, a, None, False)


@register(aten.mean.dim)
def mean_dims(out, a, dim=None, keepdim=False, *, dtype=None):
    """mean over the mapped dims."""
    return _reduce(torch.mean, out, a, dim, keepdim)


@register(aten.mean.default)
def mean_all(out, a, *, dtype=None):
    """mean over every complex dim."""
    return _reduce(torch.mean, out, a, None, False)
