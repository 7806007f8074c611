"""Creation rules against eager: polar, complex, view_as_complex/real, full/zeros/ones/empty and *_like."""

import pytest
import torch

from .helpers import check, pair

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


@pytest.mark.parametrize("dtype", DTYPES)
def test_polar_with_broadcasting(dtype):
    def fn(a, magnitude, angle):
        return torch.polar(magnitude, angle) * a, torch.polar(magnitude.abs(), angle[0].expand(3, 4))

    check(fn, pair(3, 4, dtype=dtype), torch.rand(3, 4, dtype=dtype), torch.randn(3, 4, dtype=dtype),
          expect_ops=[aten.polar.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_from_real_and_imag(dtype):
    check(lambda a, re, im: torch.complex(re, im) * a, pair(3, 4, dtype=dtype), torch.randn(3, 4, dtype=dtype),
          torch.randn(4, dtype=dtype).expand(3, 4).contiguous(), expect_ops=[aten.complex.default])


def test_view_as_complex_and_view_as_real_are_no_ops_on_the_pair():
    new = check(lambda a: a, pair(3, 4), expect_ops=[aten.view_as_complex.default, aten.view_as_real.default])
    assert {n.op for n in new.graph.nodes} == {"placeholder", "output"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [0, 1, 2.5, 1 - 2j])
def test_full_and_full_like(dtype, value):
    c = COMPLEX[dtype]

    def fn(a):
        return torch.full((3, 4), value, dtype=c) + a, torch.full_like(a, value) * a

    check(fn, pair(3, 4, dtype=dtype), expect_ops=[aten.full.default, aten.full_like.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros_ones_and_like_forms(dtype):
    c = COMPLEX[dtype]

    def fn(a):
        return (torch.zeros(3, 4, dtype=c) + a, torch.ones(4, dtype=c) * a, torch.zeros_like(a) - a,
                torch.ones_like(a) + a, a.new_zeros(4) + a, a.new_ones((3, 1)) * a)

    check(fn, pair(3, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_and_empty_like_written_before_read(dtype):
    c = COMPLEX[dtype]

    def fn(a):
        e = torch.empty(3, 4, dtype=c)
        e.copy_(a)
        f = torch.empty_like(a)
        f.copy_(a * 2)
        return e * 1j, f

    check(fn, pair(3, 4, dtype=dtype), expect_ops=[aten.empty_permuted.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_tensor_with_complex_dtype(dtype):
    c = COMPLEX[dtype]
    check(lambda a: torch.scalar_tensor(2 - 1j, dtype=c) * a, pair(3, dtype=dtype))


@pytest.mark.parametrize("op,args", [
    (aten.zeros.default, ([2, 3],)), (aten.ones.default, ([2, 3],)), (aten.empty.memory_format, ([2, 3],)),
    (aten.new_full.default, ([2], 1 + 1j)), (aten.new_zeros.default, ([2],)), (aten.new_ones.default, ([2],)),
    (aten.new_empty.default, ([2],)), (aten.zeros_like.default, ()), (aten.ones_like.default, ()),
    (aten.empty_like.default, ()),
])
def test_creation_rule_shapes_dtypes_and_values(op, args):
    """Forms export folds into full/full_like, checked directly; empty ones only for shape and dtype."""
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.registry import rule_for

    z = torch.randn(3, dtype=torch.complex64)
    takes_self = op in (aten.new_full.default, aten.new_zeros.default, aten.new_ones.default, aten.new_empty.default,
                        aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default)
    kwargs = {} if takes_self else {"dtype": torch.complex64}
    expected = op(z, *args) if takes_self else op(*args, **kwargs)
    rule_args = (Pair(torch.view_as_real(z)), *args) if takes_self else args
    got = rule_for(op).fn(expected, *rule_args, **kwargs)
    assert got.t.shape == torch.view_as_real(expected).shape and got.t.dtype == torch.float32
    if "empty" not in str(op):
        torch.testing.assert_close(got.t, torch.view_as_real(expected))
