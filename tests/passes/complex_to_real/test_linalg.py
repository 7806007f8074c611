"""Linear algebra rules against eager: mm, bmm, matmul and einsum, complex × complex and × real."""

import pytest
import torch

from .helpers import check, pair, tolerance

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mm_complex_by_complex(dtype):
    check(lambda a, b: a @ b, pair(3, 5, dtype=dtype), pair(5, 4, dtype=dtype), n_complex=2,
          expect_ops=[aten.mm.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(dtype):
    check(torch.bmm, pair(2, 3, 5, dtype=dtype), pair(2, 5, 4, dtype=dtype), n_complex=2,
          expect_ops=[aten.bmm.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_with_broadcast_batch_and_vectors(dtype):
    def fn(a, b, v):
        return a @ b, a @ v, v @ b

    check(fn, pair(2, 3, 4, dtype=dtype), pair(4, 5, dtype=dtype), pair(4, dtype=dtype), n_complex=3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("equation,shapes", [
    ("bshd,de->bshe", ((2, 3, 2, 4), (4, 5))),
    ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
    ("ij,kj->ik", ((3, 4), (5, 4))),
])
def test_einsum(dtype, equation, shapes):
    check(lambda a, b: torch.einsum(equation, a, b), pair(*shapes[0], dtype=dtype), pair(*shapes[1], dtype=dtype),
          n_complex=2)


def test_einsum_of_complex_and_real():
    check(lambda a, r: torch.einsum("bij,jk->bik", a, r.to(torch.complex64)), pair(2, 3, 4), torch.randn(4, 5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_rule_on_vectors(dtype):
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.registry import rule_for

    c = {torch.float32: torch.complex64, torch.float64: torch.complex128}[dtype]
    for sa, sb in [((4,), (4,)), ((4,), (4, 3)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 5))]:
        a, b = torch.randn(*sa, dtype=c), torch.randn(*sb, dtype=c)
        expected = torch.matmul(a, b)
        got = rule_for(aten.matmul.default).fn(expected, Pair(torch.view_as_real(a)), Pair(torch.view_as_real(b)))
        torch.testing.assert_close(got.t, torch.view_as_real(expected), **tolerance(dtype))
