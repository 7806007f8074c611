"""Complex scatter_reduce (rules/indexing.py).

Seventh new user (2026-12-07): `z.scatter_reduce(0, index, src, "sum")` of complex values (eager takes "sum", "mean"
and "prod") was refused: `cannot rewrite aten.scatter_reduce.two ... no rule rewrites this op on complex values`.
"sum" and "mean" now reduce each part (one count for both), "prod" multiplies pairs as scatter(reduce="multiply")
does; "amax" and "amin", which eager refuses for complex values, are refused saying so.
"""

from __future__ import annotations

import pytest
import torch

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, check, export, pair

INDEX = torch.tensor([[0, 1, 0, 2], [2, 2, 0, 1]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])
def test_scatter_reduce_of_complex_values_matches_eager(reduce, include_self, dtype):
    def scattered(z, src, index):
        return (z.scatter_reduce(0, index, src, reduce, include_self=include_self),
                z.scatter_reduce(1, index[:, :2], src, reduce, include_self=include_self),
                z.scatter_reduce(-1, index[:1], src[:1], reduce, include_self=include_self))

    check(scattered, pair(3, 4, dtype=dtype), pair(2, 4, dtype=dtype), INDEX, n_complex=2,
          expect_ops=[torch.ops.aten.scatter_reduce.two])


def test_scatter_reduce_amax_of_complex_values_is_refused_as_eager_refuses_it():
    module = ComplexFn(lambda z, src, index: z.scatter_reduce(0, index, src, "amax"), 2)
    ep = export(module, (pair(3, 4), pair(2, 4), INDEX))
    with pytest.raises(UnsupportedComplexOpError, match='reduce="amax" of complex values: eager has no complex amax'):
        ReplaceComplexWithRealPass(strict=True)(ep)
