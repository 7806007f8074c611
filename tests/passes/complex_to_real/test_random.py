"""Complex random normals (randn with a complex dtype, randn_like of a complex tensor) through export → pass →
.module(): the values are fresh draws, so the test compares statistics with eager's own draws, not values.

Eager's complex standard normal has E|z|² = 1: real and imaginary parts independent normals of variance 1/2. On
20,000 draws a sample mean has a standard error of 0.005 and a sample variance of 0.005, so 0.03 (six standard
errors) separates a right rule from a wrong one (variance 1 per part, or a real randn) with no flaky failure.
"""

import pytest
import torch

from .helpers import ComplexFn, pair, rewrite

aten = torch.ops.aten
SHAPE = (100, 200)
TOL = 0.03


def statistics(pair_: torch.Tensor) -> torch.Tensor:
    """mean and variance of each part and their correlation, of a complex tensor's pair."""
    re, im = pair_[..., 0].flatten().double(), pair_[..., 1].flatten().double()
    correlation = ((re - re.mean()) * (im - im.mean())).mean() / (re.std() * im.std())
    return torch.stack([re.mean(), im.mean(), re.var(), im.var(), correlation])


def check_draws(fn, args, op):
    module = ComplexFn(fn, len(args))
    _, new = rewrite(module, args, expect_ops=(op,))
    first, second = new.module()(*args), new.module()(*args)
    assert first.shape == (*SHAPE, 2) and not torch.equal(first, second), "draws must be fresh"
    expected = statistics(module(*args)).float()
    for got in (first, second):
        torch.testing.assert_close(statistics(got).float(), expected, rtol=0, atol=2 * TOL)
        torch.testing.assert_close(statistics(got).float(),
                                   torch.tensor([0, 0, 0.5, 0.5, 0]), rtol=0, atol=TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_randn_like(dtype):
    check_draws(lambda a: torch.randn_like(a), (pair(*SHAPE, dtype=dtype),), aten.randn_like.default)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_randn(dtype):
    check_draws(lambda: torch.randn(SHAPE, dtype=dtype), (), aten.randn.default)


def test_randn_like_of_a_complex_tensor_in_a_real_dtype():
    """randn_like(z, dtype=float32): a real standard normal (variance 1), shaped like z."""
    module = ComplexFn(lambda a: torch.randn_like(a, dtype=torch.float64))
    _, new = rewrite(module, (pair(*SHAPE),), expect_ops=(aten.randn_like.default,))
    got = new.module()(pair(*SHAPE))
    assert got.shape == SHAPE and got.dtype == torch.float64
    assert abs(got.mean().item()) < TOL and abs(got.var().item() - 1) < 2 * TOL
