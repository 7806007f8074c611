"""``F.affine_grid`` over dynamic sizes, for the export step.

``F.affine_grid(theta, x.shape)`` (a spatial transformer) calls ``aten::affine_grid_generator(Tensor theta, int[] size,
bool align_corners)``, whose ``int[]`` (not ``SymInt[]``) makes every size a Python int: a dynamic height or width
of ``x`` becomes a constant, and torch.export fails with "Constraints violated (h, w)! ... specialized it to be a
constant (16)" (torch 2.13; torch's own decomposition of the op specializes too, through ``linspace`` of a
``(w - 1) / w`` end point). aotcuda's note then blamed another input's static dim (sixth new user, 2026-12-07).

For the export step, ``torch.nn.functional.affine_grid`` is wrapped: where a size is a SymInt, the grid is ATen's
formula written with arange (the normalized pixel centres ``(2 i + 1) / n - 1``, or ``2 i / (n - 1) - 1`` with
align_corners, 0 for a size of 1; ``[x, y(, z), 1]`` at each pixel, times ``theta``'s transpose), which keeps the
sizes symbolic; with static sizes torch's own op runs as before. Its values are eager's up to rounding (ATen takes
``linspace(-1, 1, n) * (n - 1) / n``): tests/lowering/test_affine_grid.py. A model that imported the function
itself (``from torch.nn.functional import affine_grid``) calls torch's, which still specializes.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch

_ORIGINAL = torch.nn.functional.affine_grid


def _coordinates(n, align_corners: bool, dtype, device) -> torch.Tensor:
    i = torch.arange(n, dtype=dtype, device=device)
    if align_corners:
        # ATen's linspace_from_neg_one: 0 where there is one step (n of a dynamic dim may be 1 at a call)
        return (i * 2.0 - (n - 1)) / torch.sym_max(n - 1, 1)
    return (i * 2.0 + 1.0) / n - 1.0


def _symbolic_affine_grid(theta: torch.Tensor, size, align_corners: bool) -> torch.Tensor:
    n, spatial = size[0], list(size[2:])
    dtype, device = theta.dtype, theta.device
    axes = [_coordinates(k, align_corners, dtype, device) for k in spatial]  # z?, y, x
    rank = len(spatial)
    columns = []
    for position, axis in enumerate(reversed(axes)):  # x first, as ATen's base grid
        dim = rank - 1 - position
        shape = [1] * rank
        shape[dim] = -1
        columns.append(axis.view(shape).expand(spatial))
    columns.append(torch.ones(spatial, dtype=dtype, device=device))
    base = torch.stack(columns, -1).reshape(1, -1, rank + 1)
    return torch.matmul(base, theta.mT).view(n, *spatial, rank)


@functools.wraps(_ORIGINAL)
def affine_grid(theta, size, align_corners=None):
    symbolic = any(isinstance(s, torch.SymInt) for s in size)
    if not symbolic or not isinstance(theta, torch.Tensor) or len(size) not in (4, 5):
        return _ORIGINAL(theta, size, align_corners)
    # torch's own checks of theta (F.affine_grid), in its words
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    rows, kind = (2, "2D") if len(size) == 4 else (3, "3D")
    if theta.dim() != 3 or theta.shape[-2] != rows or theta.shape[-1] != rows + 1:
        raise ValueError(f"Expected a batch of {kind} affine matrices of shape Nx{rows}x{rows + 1} for size {size}. "
                         f"Got {theta.shape}.")
    return _symbolic_affine_grid(theta, size, bool(align_corners))


@contextlib.contextmanager
def affine_grid_over_symbolic_sizes() -> Iterator[None]:
    """``torch.nn.functional.affine_grid`` as ``affine_grid`` above for the step (see the module doc)."""
    functional = torch.nn.functional
    if functional.affine_grid is not _ORIGINAL:  # entered already (a nested lower()), or patched by another
        yield
        return
    functional.affine_grid = affine_grid
    try:
        yield
    finally:
        functional.affine_grid = _ORIGINAL
