"""Elementwise rules against eager: arithmetic, type promotion, Python scalars, complex functions."""

import pytest
import torch

from .helpers import check, pair

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (3, 1)), ((4,), ())])
def test_mul_complex_by_complex_broadcasts(dtype, shapes):
    check(lambda a, b: a * b, pair(*shapes[0], dtype=dtype), pair(*shapes[1], dtype=dtype), n_complex=2,
          expect_ops=[aten.mul.Tensor])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mul_by_real_tensor_on_either_side(dtype):
    check(lambda a, r: (a * r, r * a), pair(2, 5, dtype=dtype), torch.randn(5, dtype=dtype),
          expect_ops=[aten.mul.Tensor])


@pytest.mark.parametrize("scalar", [1j, 2.5, 0.5 - 2j, 3])
def test_mul_by_python_scalar(scalar):
    check(lambda a: a * scalar, pair(3, 4), expect_ops=[aten.mul.Tensor])


def test_real_tensor_times_imaginary_unit_becomes_complex():
    check(lambda a, r: a + r * 1j, pair(3, 4), torch.randn(3, 4), expect_ops=[aten.mul.Tensor])


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float64), (torch.float64, torch.float32)])
def test_mul_complex64_by_complex128_promotes(dtypes):
    new = check(lambda a, b: a * b, pair(3, 4, dtype=dtypes[0]), pair(3, 4, dtype=dtypes[1]), n_complex=2,
                dtype=torch.float64)
    assert new.graph.output_node().args[0][0].meta["val"].dtype == torch.float64


def test_float64_real_times_complex64_promotes_to_complex128():
    new = check(lambda a, r: a * r, pair(3, 4), torch.randn(3, 4, dtype=torch.float64))
    assert new.graph.output_node().args[0][0].meta["val"].dtype == torch.float64


def test_bfloat16_real_times_complex64_stays_complex64():
    check(lambda a, r: a * r, pair(3, 8), torch.randn(3, 8).bfloat16(), dtype=torch.float32)


def test_zero_dim_complex128_does_not_promote_a_complex64_tensor():
    def fn(a, s):
        return a * s.squeeze(0)

    new = check(fn, pair(3, 4), pair(1, dtype=torch.float64), n_complex=2)
    assert new.graph.output_node().args[0][0].meta["val"].dtype == torch.float32


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [1, 2, -0.5])
def test_add_and_sub_with_alpha(dtype, alpha):
    check(lambda a, b: (torch.add(a, b, alpha=alpha), torch.sub(a, b, alpha=alpha)),
          pair(2, 3, dtype=dtype), pair(3, dtype=dtype), n_complex=2,
          expect_ops=[aten.add.Tensor, aten.sub.Tensor])


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_sub_real_tensors_and_scalars(dtype):
    def fn(a, r):
        return a + r, r - a, a + 2.0, a - 1j, 1 - a, torch.add(a, r, alpha=3)

    check(fn, pair(2, 3, dtype=dtype), torch.randn(2, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_div_by_complex_real_and_scalars(dtype):
    def fn(a, b, r):
        return a / b, a / r, r / b, a / 2.0, a / (1 + 2j), 1 / b

    check(fn, pair(3, 4, dtype=dtype), pair(3, 4, dtype=dtype), torch.rand(3, 4, dtype=dtype) + 0.5,
          n_complex=2, expect_ops=[aten.div.Tensor])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_real_tensor_divided_by_a_complex_scalar(dtype):
    """Found by a breaker review: `x / 1j` with x real refused the program (its rule read a real tensor
    as a Pair: "AttributeError: 'builtin_function_or_method' object has no attribute 'device'")."""
    r = torch.randn(3, 4).to(dtype) if dtype.is_floating_point else torch.randint(0, 5, (3, 4)).to(dtype)
    check(lambda r: (r / 1j, r / (2 - 3j), r / (0.5 + 0j)), r, n_complex=0, dtype=torch.float32 if dtype != torch.float64 else dtype,
          expect_ops=[aten.div.Tensor])


@pytest.mark.parametrize("dtype", DTYPES)
def test_neg_and_reciprocal(dtype):
    check(lambda a: (-a, torch.reciprocal(a)), pair(5, 3, dtype=dtype),
          expect_ops=[aten.neg.default, aten.reciprocal.default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_abs_and_angle_return_real(dtype):
    check(lambda a: (a.abs(), a.angle()), pair(4, 6, dtype=dtype),
          expect_ops=[aten.abs.default, aten.angle.default])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "log", "sqrt"])
def test_complex_functions(dtype, name):
    fn = getattr(torch, name)
    check(fn, pair(4, 6, dtype=dtype), expect_ops=[getattr(aten, name).default])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgn_exports_as_abs_div_where_and_matches(dtype):
    check(torch.sgn, pair(4, 6, dtype=dtype), expect_ops=[aten.abs.default, aten.div.Tensor])
    check(lambda a: torch.sgn(a * 0), pair(3, dtype=dtype))


def test_sgn_rule_matches_eager_including_zero():
    from aotcuda.passes.complex_to_real.registry import rule_for
    from aotcuda.passes.complex_to_real.pair import Pair

    z = torch.randn(5, 2)
    z[1] = 0
    expected = torch.view_as_real(torch.sgn(torch.view_as_complex(z)))
    out = rule_for(aten.sgn.default).fn(torch.empty(5, dtype=torch.complex64), Pair(z))
    torch.testing.assert_close(out.t, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exponent", [2, 0.5, 3, -1.5, 0])
def test_pow_with_real_scalar_exponent(dtype, exponent):
    check(lambda a: a ** exponent, pair(4, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exponent", [1j, 0.5 - 2j, -1 + 1j, -3j, 2 + 1e-3j])
def test_pow_with_complex_scalar_exponent(dtype, exponent):
    """`z ** 1j` had no rule (a new user's program): the pass refused it and lower() advised allow_fallbacks, with
    which AOTInductor's C++ wrapper cannot compile a complex scalar argument. Fresh random values, and a real tensor
    raised to a complex scalar; zeros and the other special values: test_special_values.py (pow_complex_scalar)."""
    check(lambda a: a ** exponent, pair(4, 5, dtype=dtype), expect_ops=[aten.pow.Tensor_Scalar])
    check(lambda a, r: a + r ** exponent, pair(3, dtype=dtype), torch.randn(3, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_with_complex_real_and_scalar_branches(dtype):
    def fn(a, b, r, mask):
        return torch.where(mask, a, b), torch.where(mask, a, r), torch.where(mask, a, 0.0)

    check(fn, pair(3, 4, dtype=dtype), pair(4, dtype=dtype), torch.randn(3, 4, dtype=dtype),
          torch.rand(3, 4) > 0.5, n_complex=2, expect_ops=[aten.where.self])


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_with_complex_and_real_values(dtype):
    def fn(a, mask):
        return a.masked_fill(mask, 1 + 2j), a.masked_fill(mask, 3.0)

    check(fn, pair(3, 4, dtype=dtype), torch.rand(3, 1) > 0.5, expect_ops=[aten.where.self])


@pytest.mark.parametrize("dtype", DTYPES)
def test_clone_alias_detach(dtype):
    def fn(a):
        return a.clone() * 2, a.detach() + 1, torch.ops.aten.alias(a) - 1

    check(fn, pair(3, 4, dtype=dtype), expect_ops=[aten.clone.default])


def test_clone_channels_last_keeps_the_layout_of_the_complex_copy():
    def fn(a):
        return a.clone(memory_format=torch.channels_last) * 1j

    new = check(fn, pair(2, 3, 4, 5))
    eager = torch.view_as_real(torch.view_as_complex(torch.randn(2, 3, 4, 5, 2)).clone(
        memory_format=torch.channels_last))
    clones = [n for n in new.graph.nodes if n.meta.get("val") is not None
              and isinstance(n.meta["val"], torch.Tensor) and n.meta["val"].shape == eager.shape
              and tuple(n.meta["val"].stride()) == eager.stride()]
    assert clones, "no node has the strides of view_as_real of a channels-last complex copy"
