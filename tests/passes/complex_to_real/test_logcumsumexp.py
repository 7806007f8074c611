"""Complex logcumsumexp (rules/reduction.py) against eager, at the ExportedProgram level.

It had no rule (no_rule.py: "a running complex log-sum-exp: no rule yet"), so a program holding one stayed complex
whole and was refused, or shipped ATen's CPU kernel under allow_fallbacks (on CUDA, no kernel at all). Eager's
imaginary part is on no fixed branch (each step's is within π/2 of its max's), so the rule must match the branch, not
only the value modulo 2π: the cases below wind the imaginary part far past π.
"""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from torch.export import Dim

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, export, rewrite

RTOL = {torch.float32: 1e-5, torch.float64: 1e-12}


DIMS = (1, -1, 0)


def running(z):
    return tuple(torch.logcumsumexp(z, d) for d in DIMS)


def atens_recurrence(row: list[complex]) -> list[complex]:
    """ATen's loop (ReduceOps.cpp, _log_add_exp_helper) on finite entries, in Python's cmath: from −inf, each step
    max + log(1 + exp(min − max)), min and max by real part, ties to the entry."""
    acc, out = complex(-math.inf, 0), []
    for z in row:
        low, high = (z, acc) if z.real < acc.real else (acc, z)
        acc = high + cmath.log(1 + cmath.exp(low - high))
        out.append(acc)
    return out


def reference(z: torch.Tensor, dim: int) -> torch.Tensor:
    """Eager's logcumsumexp; where eager gives nan on finite entries, ATen's recurrence. Eager's complex128 log1p
    is nan at a subnormal argument (exp(min − max) when two real parts are 708–745 apart: log1p(exp(−736 + 1j))
    is nan + nan i), and the nan infects the rest of the scan: a defect of eager the rule does not copy."""
    expected = torch.logcumsumexp(z, dim).movedim(dim, -1).clone()
    entries = z.movedim(dim, -1)
    broken = torch.isnan(expected).any(-1) & torch.isfinite(entries).all(-1)
    for index in broken.nonzero().tolist():
        expected[tuple(index)] = torch.tensor(atens_recurrence(entries[tuple(index)].tolist()), dtype=z.dtype)
    return expected.movedim(-1, dim)


def assert_eagers(new, pair: torch.Tensor):
    """Each result against `reference`, relative to the largest finite magnitude of the result."""
    z = torch.view_as_complex(pair)
    for d, got in zip(DIMS, new.module()(pair)):
        e = torch.view_as_real(reference(z, d))
        assert got.shape == e.shape and got.dtype == e.dtype
        finite = e[torch.isfinite(e)]
        scale = max(finite.abs().max().item(), 1.0) if finite.numel() else 1.0
        rtol = RTOL[e.dtype]
        torch.testing.assert_close(got, e, rtol=rtol, atol=rtol * scale, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_logcumsumexp_matches_eager_on_fresh_inputs_of_every_magnitude(dtype):
    module = ComplexFn(running)
    _, new = rewrite(module, (torch.randn(3, 5, 4, 2, dtype=dtype),), expect_ops={torch.ops.aten.logcumsumexp.default})
    for re_scale, im_scale in [(1, 1), (9, 9), (100, 100), (1e4, 1e4), (1e30, 3), (0.01, 50)]:
        pair = torch.randn(3, 5, 4, 2, dtype=dtype)
        pair[..., 0] *= re_scale
        pair[..., 1] *= im_scale
        assert_eagers(new, pair)


def test_real_parts_708_to_745_apart_give_the_sum_not_eagers_nan():
    """Eager's complex128 logcumsumexp is nan from there on (its log1p of a subnormal; complex64's too, which
    accumulates in double); the rule's is the sum's log, as ATen's recurrence gives it in Python's cmath."""
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 0))
    _, new = rewrite(module, (torch.randn(3, 2, dtype=torch.float64),))
    z = torch.tensor([0j, -736 + 1j, 0.5 - 2j], dtype=torch.complex128)  # eager: nan from the second (torch 2.13)
    got = torch.view_as_complex(new.module()(torch.view_as_real(z)))
    torch.testing.assert_close(got, torch.tensor(atens_recurrence(z.tolist()), dtype=z.dtype))


def test_the_imaginary_part_winds_as_eagers_does():
    """Eager keeps each step's imaginary part within π/2 of its max's (the larger real part's), not at arg's principal
    value: 10i twice gives log 2 + 10i (not 10 − 4π ≈ −2.57); later steps stay near 10 while the sum's max does, then
    follow an entry of a larger real part to 3."""
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 0))
    _, new = rewrite(module, (torch.randn(6, 2),))
    z = torch.tensor([10j, 10j, 0.1 + 31j, 0.2 - 40j, 3j, 3.5 + 3j])
    expected = torch.logcumsumexp(z, 0)
    assert (expected.imag[:5] > 10).sum() == 3 and abs(expected.imag[5] - 3.07) < 0.01  # the branches meant
    got = torch.view_as_complex(new.module()(torch.view_as_real(z)))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_phase_only_entries_tie_as_eagers_do():
    """Every real part 0 (or any one value): the first step's sum has the first entry's real part exactly, which ties
    the second entry's, and eager takes the entry as that step's max; a log|u| one ulp above 0 took the sum instead,
    2π off in about a quarter of the rows (found by a run of phase-only rows, 2026-12-07)."""
    module = ComplexFn(lambda z: torch.logcumsumexp(z, -1))
    for dtype in (torch.float32, torch.float64):
        _, new = rewrite(module, (torch.randn(200, 6, 2, dtype=dtype),))
        phase = torch.rand(200, 6, dtype=dtype) * 40 - 20
        for re in (0.0, 1.7, -3.0):
            pair = torch.stack([torch.full_like(phase, re), phase], -1)
            torch.testing.assert_close(new.module()(pair), module(pair), rtol=1e-5, atol=1e-4)


def test_masked_infinite_and_nan_entries_give_eagers_values():
    """A −inf real part adds nothing (what a mask leaves), whatever the imaginary part; before any finite entry eager
    gives −inf + 0i; a +inf real part is the result's; a nan in either part makes every later result nan + nan i."""
    inf, nan = math.inf, math.nan
    rows = [[1 + 2j, complex(-inf, 0), 0.5 - 1j, complex(-inf, 3), 2 + 9j],
            [complex(-inf, 0), complex(-inf, 1), 2 + 7j, 1 - 1j, complex(-inf, -5)],
            [1 + 2j, complex(nan, 0), 1 + 1j, 2 + 2j, 3 + 3j],
            [1 + 2j, complex(0, nan), 1 + 1j, 2 + 2j, 3 + 3j],
            [1 + 2j, complex(inf, 0.5), 1 + 1j, 2 + 2j, 3 + 3j],
            [1 + 2j, complex(-inf, nan), 1 + 1j, 2 + 2j, 3 + 3j]]
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 1))
    _, new = rewrite(module, (torch.randn(6, 5, 2),))
    for dtype in (torch.complex64, torch.complex128):
        z = torch.tensor(rows, dtype=dtype)
        got = torch.view_as_complex(new.module()(torch.view_as_real(z)))
        torch.testing.assert_close(got, torch.logcumsumexp(z, 1), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_several_infinite_real_parts_in_one_scan_give_eagers_values(dtype):
    """From the second +inf real part of a scan on, eager's step is log(exp(acc) + exp(z)) in C's special values:
    (inf, π/4) from 0.3i and 1.2i, (inf, nan) then nan + nan i where the signs of cos or sin disagree (0.3i and 2.5i),
    (inf, nan) from an infinite imaginary part. The rule took the mean of their directions: inf + 0.75i, inf + 1.4i
    (fix40b). Fresh rows of +inf entries (imaginary parts random, 0, ±inf) among finite, −inf and a few nan entries,
    over a dim of static and of dynamic size."""
    generator = torch.Generator().manual_seed(40)
    rows, n = 600, 9
    pair = torch.randn(rows, n, 2, dtype=dtype, generator=generator) * 3
    kind = torch.randint(0, 40, (rows, n), generator=generator)
    pair[..., 0][kind < 16] = math.inf
    pair[..., 1][kind < 2] = 0.0
    pair[..., 1][kind == 2] = math.inf
    pair[..., 1][kind == 3] = -math.inf
    pair[..., 0][(kind >= 16) & (kind < 22)] = -math.inf
    pair[..., 1][kind == 39] = math.nan
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 1))
    static = rewrite(module, (torch.randn(rows, n, 2, dtype=dtype),))[1]
    dynamic = rewrite(module, (torch.randn(rows, n, 2, dtype=dtype),),
                      dynamic_shapes={"args": ({1: Dim("n", min=2, max=16)},)})[1]
    expected = module(pair)
    assert torch.isnan(expected).any() and (expected[..., 1].abs() == 3 * math.pi / 4).any()  # the cases meant
    for new in (static, dynamic):
        torch.testing.assert_close(new.module()(pair), expected, rtol=RTOL[dtype], atol=1e-5, equal_nan=True)


def test_logcumsumexp_over_a_dynamic_dim_matches_eager_at_every_length_and_needs_a_max():
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 1))
    _, new = rewrite(module, (torch.randn(3, 6, 2),), dynamic_shapes={"args": ({1: Dim("n", min=2, max=40)},)})
    for n in (2, 3, 17, 32, 33, 40):
        pair = torch.randn(3, n, 2) * 5
        torch.testing.assert_close(new.module()(pair), module(pair), rtol=1e-5, atol=1e-4)
    _, scalar = rewrite(ComplexFn(lambda z: torch.logcumsumexp(z, 0)), (torch.randn(2),))
    one = torch.tensor([0.5, 20.0])  # a 0-dim complex tensor: its own running sum
    expected = torch.view_as_real(torch.logcumsumexp(torch.view_as_complex(one), 0))
    torch.testing.assert_close(scalar.module()(one), expected)
    unbounded = export(module, (torch.randn(3, 6, 2),), {"args": ({1: Dim("n", min=2)},)})
    with pytest.raises(UnsupportedComplexOpError, match=r"logcumsumexp over dim 1 of dynamic size \w+ with no upper "
                                                        r"bound: the running log-sum-exp takes ceil\(log2\(max\)\)"):
        ReplaceComplexWithRealPass(strict=True)(unbounded)


def test_a_scan_of_length_0_is_empty_as_eagers():
    """The review of session 38: a static dim of size 0 failed in the rule (narrow() of length -1): refused as
    "its rule failed" where eager returns an empty tensor."""
    for shape, dim in (((0, 2), 0), ((3, 0, 2), 1), ((0, 3, 2), 0)):
        module = ComplexFn(lambda z, d=dim: torch.logcumsumexp(z, d))
        _, new = rewrite(module, (torch.randn(*shape),))
        pair = torch.randn(*shape)
        got, want = new.module()(pair), module(pair)
        assert got.shape == want.shape == pair.shape and got.dtype == want.dtype


SPECIAL_REAL = (-math.inf, -1.0, 0.5, math.inf, math.nan)
SPECIAL_IMAG = (0.0, 0.3, 2.5, -0.3, -2.5, math.inf, -math.inf, math.nan)  # cos and sin of each sign, ±inf, nan


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_every_three_long_row_of_special_values_gives_eagers_values(dtype):
    """review40a: an entry of finite real and infinite imaginary part ("endless") after a +inf real part was counted a
    break, so [0.5+0.3i, inf+0.3i, 1+inf i, 0.2+0.1i] gave nan from the third on, where eager keeps inf+0.3i (the +inf
    sets the sum; exp(−inf ± inf i) adds 0); before any +inf, it gave nan where eager keeps the endless entry while it
    is the one finite entry so far ([−inf, 0.5+inf i, −inf+0.3i]: 0.5+inf i twice). Every row of 3 entries over real
    parts (−inf, −1, 0.5, inf, nan) × imaginary parts (0, ±0.3, ±2.5, ±inf, nan), 64,000 rows, over a dim of static and
    of dynamic size: eager's values (the code before: 9,824 rows differed)."""
    import itertools

    values = [complex(re, im) for re in SPECIAL_REAL for im in SPECIAL_IMAG]
    rows = list(itertools.product(values, repeat=3))
    complex_dtype = torch.complex64 if dtype == torch.float32 else torch.complex128
    pair = torch.view_as_real(torch.tensor(rows, dtype=complex_dtype)).contiguous()
    module = ComplexFn(lambda z: torch.logcumsumexp(z, 1))
    expected = module(pair)
    static = rewrite(module, (torch.randn(len(rows), 3, 2, dtype=dtype),))[1]
    dynamic = rewrite(module, (torch.randn(len(rows), 3, 2, dtype=dtype),),
                      dynamic_shapes={"args": ({1: Dim("n", min=2, max=8)},)})[1]
    for new in (static, dynamic):
        torch.testing.assert_close(new.module()(pair), expected, rtol=RTOL[dtype], atol=1e-6, equal_nan=True)
    reviewers = torch.tensor([[0.5 + 0.3j, complex(math.inf, 0.3), complex(1.0, math.inf), 0.2 + 0.1j]],
                             dtype=complex_dtype)
    got = torch.view_as_complex(rewrite(module, (torch.randn(1, 4, 2, dtype=dtype),))[1].module()(
        torch.view_as_real(reviewers).contiguous()))
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, torch.logcumsumexp(reviewers, 1))
