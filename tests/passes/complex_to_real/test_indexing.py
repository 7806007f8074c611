"""Indexing rules against eager: gathers and the scatter forms slice assignment exports as."""

import pytest
import torch

from .helpers import check, pair

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_with_one_and_several_index_tensors(dtype):
    rows, cols = torch.tensor([2, 0, 1]), torch.tensor([1, 1, 3])

    def fn(a, rows, cols):
        return a[rows] * 1j, a[rows, cols] * 1j, a[:, cols] * 1j, a[rows[:, None], cols] * 1j

    check(fn, pair(3, 4, 5, dtype=dtype), rows, cols, expect_ops=[aten.index.Tensor])


def test_index_with_a_boolean_mask():
    check(lambda a, m: a[m] * 1j, pair(4, 3), torch.tensor([True, False, True, True]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    check(lambda a, i: a.index_select(-1, i) * 1j, pair(3, 5, dtype=dtype), torch.tensor([4, 0, 0, 2]),
          expect_ops=[aten.index_select.default])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("index", [torch.tensor(0), torch.tensor([0])], ids=["0-dim", "1-dim"])
def test_index_select_of_a_scalar(dtype, dim, index):
    """A 0-dim complex tensor: eager's result is 0-dim, its pair [2] (OpInfo's index_select samples)."""
    check(lambda a, i: a.index_select(dim, i) * 1j, pair(dtype=dtype), index, expect_ops=[aten.index_select.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_by_a_0_dim_index(dtype):
    check(lambda a, i: a.index_select(1, i) * 1j, pair(3, 5, dtype=dtype), torch.tensor(2),
          expect_ops=[aten.index_select.default])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dtype, dim):
    index = torch.randint(0, 3, (3, 3, 2))
    check(lambda a, i: a.gather(dim, i) * 1j, pair(3, 3, 3, dtype=dtype), index, expect_ops=[aten.gather.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_assignment_becomes_slice_scatter(dtype):
    def fn(a, b):
        a = a.clone()
        a[:, 1:3] = b
        return a * 1j

    check(fn, pair(3, 5, dtype=dtype), pair(3, 2, dtype=dtype), n_complex=2, expect_ops=[aten.slice_scatter.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_assignment_becomes_copy_and_where(dtype):
    def fn(a, b):
        a = a.clone()
        a[1] = b
        a[:, -1] = 2 + 1j
        return a * 1j

    check(fn, pair(3, 5, dtype=dtype), pair(5, dtype=dtype), n_complex=2, expect_ops=[aten.copy.default, aten.where.self])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    def fn(a, v, i):
        return a.index_put((i,), v, accumulate=accumulate) * 1j

    check(fn, pair(5, 3, dtype=dtype), pair(2, 3, dtype=dtype), torch.tensor([4, 1]), n_complex=2,
          expect_ops=[aten.index_put.default])


def test_index_put_with_a_real_value_and_a_mask():
    def fn(a, v, m):
        a = a.clone()
        a[m] = v.to(a.dtype)
        return a * 1j

    check(fn, pair(4, 3), torch.randn(3), torch.tensor([True, False, False, True]))


@pytest.mark.parametrize("args", [(0, 1), (-1, 2)])
def test_select_scatter_rule(args):
    from .helpers import run_rule_two
    run_rule_two(aten.select_scatter.default, (3, 4), lambda a: a.select(*args), *args)


@pytest.mark.parametrize("args", [(0, 1, 3, 1), (-1, 0, 4, 2)])
def test_slice_scatter_rule(args):
    from .helpers import run_rule_two
    run_rule_two(aten.slice_scatter.default, (3, 4), lambda a: aten.slice.Tensor(a, *args), *args)


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_of_complex_and_real_sources(dtype):
    def fn(a, b, r):
        x = torch.ops.aten.copy(a, b)
        y = torch.ops.aten.copy(a, r)
        z = torch.ops.aten.copy(r, b)
        return x * 1j, y * 1j, z

    check(fn, pair(3, 4, dtype=dtype), pair(4, dtype=dtype), torch.randn(3, 4, dtype=dtype), n_complex=2,
          expect_ops=[aten.copy.default])
