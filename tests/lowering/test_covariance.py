"""torch.cov and torch.corrcoef in the export step (lowering/covariance.py, a row of torch_fixes.FIXES).

Seventh new user (2026-12-07): a model calling ``torch.cov(x)`` (or corrcoef, real or complex, static sizes too)
failed in lower()'s export step with ``DataDependentOutputException: aten.equal.default`` and the note "check that the
model runs on those inputs in eager", which it does: ATen's cov asks whether its normalization factor, a tensor, is
<= 0. For the export step, the functions compute ATen's formula from the observation count as a size.
"""

from __future__ import annotations

import torch
from torch.export import Dim

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.exporting import export_program
from aotcuda.passes import ReplaceComplexWithRealPass


class Statistics(torch.nn.Module):
    def forward(self, x, z, v):
        return (torch.cov(x), x.cov(correction=0), torch.cov(v), torch.cov(x, correction=x.shape[1]),
                torch.corrcoef(x), x.corrcoef(), torch.cov(z), torch.corrcoef(z), torch.corrcoef(v))


def inputs(observations: int):
    return (torch.randn(3, observations), torch.randn(4, observations, dtype=torch.complex64), torch.randn(observations))


def as_real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


def test_cov_and_corrcoef_export_over_a_dynamic_observation_count_and_match_eager():
    cov, corrcoef, method = torch.cov, torch.corrcoef, torch.Tensor.cov
    n = Dim("n", min=2, max=64)
    with torch_fixes.applied("export"):
        ep = export_program(Statistics(), inputs(10), {}, ({1: n}, {1: n}, {0: n}))
    assert (torch.cov, torch.corrcoef, torch.Tensor.cov) == (cov, corrcoef, method), "the patch is undone after the step"
    ep = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions(decomposition_table()))
    for observations in (10, 2, 37, 64):
        x, z, v = inputs(observations)
        actual = ep.module()(x, torch.view_as_real(z), v)
        expected = Statistics()(x, z, v)
        for a, e in zip(actual, expected):
            e = as_real(e)
            assert a.shape == e.shape
            # correction == n divides by 0, as eager does (inf and nan where it gives them)
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_cov_with_weights_and_a_batch_of_matrices_are_torchs_inside_the_step():
    """Weights make the factor a value (their sum): torch's op runs, as before; a 3-d input gets torch's refusal."""
    x, frequencies, weights = torch.randn(3, 8), torch.randint(1, 4, (8,)), torch.rand(8)
    expected = torch.cov(x, fweights=frequencies, aweights=weights)
    with torch_fixes.applied("export"):
        torch.testing.assert_close(torch.cov(x, fweights=frequencies, aweights=weights), expected, rtol=0, atol=0)
        try:
            torch.cov(torch.randn(2, 3, 4))
        except RuntimeError as error:
            assert "cov(): expected input to have two or fewer dimensions" in str(error)
        else:
            raise AssertionError("a 3-d input is refused, as torch refuses it")
