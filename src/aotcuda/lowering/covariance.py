"""``torch.cov`` and ``torch.corrcoef`` without weights, for the export step.

ATen's cov (aten/src/ATen/native/Correlation.cpp) divides by ``norm_factor = scalar_tensor(observations) - correction``
and first asks whether that tensor is <= 0 (to warn and divide by 0 instead): a value torch.export cannot know while
tracing, so every program calling them failed in the export step with ``DataDependentOutputException:
aten.equal.default``, and aotcuda's note said to check that the model runs in eager, which it does (torch 2.13, real
and complex inputs, static sizes too; corrcoef calls cov; seventh new user, 2026-12-07).

For the export step the functions (``torch.cov``, ``torch.corrcoef`` and the Tensor methods) are wrapped: without
weights they compute ATen's formula with the observation count as a size, ``max(n - correction, 0)`` (a SymInt for a
dynamic count), so nothing depends on a value; with ``fweights`` or ``aweights`` torch's own op runs (its factor is a
sum of the weights, a value). corrcoef is ATen's: cov divided by the standard deviations on both sides, each part
clipped to [-1, 1]. A model that imported the functions themselves (``from torch import cov``) calls torch's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

_ORIGINALS = {(torch, "cov"): torch.cov, (torch, "corrcoef"): torch.corrcoef,
              (torch.Tensor, "cov"): torch.Tensor.cov, (torch.Tensor, "corrcoef"): torch.Tensor.corrcoef}


def covariance(x: torch.Tensor, correction: int = 1) -> torch.Tensor:
    """ATen's cov of x (variables in rows, observations in columns; a vector is one variable) without weights."""
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    observations = rows.shape[1]
    mean = rows.sum(1) / observations
    centered = rows - mean.unsqueeze(1)
    products = torch.mm(centered, centered.t().conj())
    return (products / torch.sym_max(observations - correction, 0)).squeeze()


def correlation(x: torch.Tensor) -> torch.Tensor:
    """ATen's corrcoef: cov over the standard deviations on both sides, each part clipped to [-1, 1]."""
    c = covariance(x)
    if c.ndim == 0:
        return c / c
    variances = c.diagonal()
    deviations = torch.sqrt(variances.real if variances.is_complex() else variances)
    c = c / deviations.view(-1, 1) / deviations.view(1, -1)
    if c.is_complex():
        return torch.complex(c.real.clip(-1, 1), c.imag.clip(-1, 1))
    return c.clip(-1, 1)


def _cov(original):
    @functools.wraps(original)
    def cov(input, *, correction=1, fweights=None, aweights=None):
        if fweights is not None or aweights is not None or input.ndim > 2 or not isinstance(correction, (int, torch.SymInt)):
            return original(input, correction=correction, fweights=fweights, aweights=aweights)  # torch's, its words
        return covariance(input, correction)
    return cov


def _corrcoef(original):
    @functools.wraps(original)
    def corrcoef(input):
        if input.ndim > 2:
            return original(input)  # torch's refusal, in its words
        return correlation(input)
    return corrcoef


@contextlib.contextmanager
def covariance_without_value_checks() -> Iterator[None]:
    """torch.cov and torch.corrcoef (functions and Tensor methods) as the module doc says, for the step."""
    if any(getattr(owner, name) is not original for (owner, name), original in _ORIGINALS.items()):
        yield  # entered already (a nested lower()), or patched by another
        return
    for (owner, name), original in _ORIGINALS.items():
        setattr(owner, name, (_cov if name == "cov" else _corrcoef)(original))
    try:
        yield
    finally:
        for (owner, name), original in _ORIGINALS.items():
            setattr(owner, name, original)
