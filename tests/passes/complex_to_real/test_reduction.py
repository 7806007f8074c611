"""Reduction rules against eager: sum and mean over complex dims, with keepdim."""

import pytest
import torch

from .helpers import check, pair, run_rule

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dims", [None, 0, -1, (0, 2), (-1, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduction(dtype, dims, keepdim, name):
    def fn(a):
        reduce = getattr(torch, name)
        out = reduce(a) if dims is None else reduce(a, dims, keepdim=keepdim)
        return out * 1j

    check(fn, pair(3, 4, 5, dtype=dtype))


def test_sum_with_a_complex128_dtype():
    check(lambda a: a.sum(-1, dtype=torch.complex128) * 1j, pair(3, 4), dtype=torch.float32)


@pytest.mark.parametrize("op,args", [
    (aten.sum.default, ()), (aten.mean.default, ()), (aten.sum.dim_IntList, ([], False)),
])
def test_reduction_over_all_dims_and_of_a_scalar(op, args):
    run_rule(op, (3, 4), *args)
    run_rule(op, (), *args)
