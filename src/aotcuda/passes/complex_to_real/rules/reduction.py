"""Reduction rules: sum and mean over complex dims reduce both parts of the pair over the mapped dims."""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dims
from aotcuda.passes.complex_to_real.pair_algebra import result_dtype
from aotcuda.passes.complex_to_real.registry import register

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


def over_dims(reduction):
    """The rule of `reduction`.dim: reduce the pair over the mapped dims."""

    def rule(out, a, dim=None, keepdim=False, *, dtype=None):
        return _reduce(reduction, out, a, dim, keepdim)

    rule.__doc__ = f"{reduction.__name__} over the mapped dims."
    return rule


def over_all_dims(reduction):
    """The rule of `reduction`.default: reduce the pair over every complex dim."""

    def rule(out, a, *, dtype=None):
        return _reduce(reduction, out, a, None, False)

    rule.__doc__ = f"{reduction.__name__} over every complex dim."
    return rule


register(aten.sum.dim_IntList, computes=True)(over_dims(torch.sum))
register(aten.mean.dim, computes=True)(over_dims(torch.mean))
register(aten.sum.default, computes=True)(over_all_dims(torch.sum))
register(aten.mean.default, computes=True)(over_all_dims(torch.mean))
