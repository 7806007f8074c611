"""LU factorization with partial pivoting on complex matrices, as LAPACK's zgetf2 computes it: linalg_lu_factor_ex
and linalg_lu.

Column by column (unrolled over the min(m, n) columns: static shapes): the pivot is the first row of largest
|re| + |im| (LAPACK's izamax, by dcabs1) at or below the diagonal, its row swapped up, the column below it divided
by it, and the trailing block updated by the outer product. The pivots are data-dependent values, not shapes, so
the program is static. Where two candidates' |re| + |im| agree to within rounding, eager's blocked kernel and this
one may pick different rows (a pivot is a discontinuous function of the values); random inputs meet no such tie.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, real_as_pair
from aotcuda.passes.complex_to_real.pair_algebra import result_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.linalg_factors import stand_in, unpacked

aten = torch.ops.aten


def _swap_rows(t: torch.Tensor, j: int, p: torch.Tensor) -> torch.Tensor:
    """t [..., m, n, 2] with rows j and p (a tensor of row numbers, one per batch) swapped."""
    rows = torch.arange(t.shape[-3], device=t.device)
    p = p.unsqueeze(-1)
    order = torch.where(rows == j, p, torch.where(rows == p, j, rows))  # [..., m]
    return t.gather(-3, order[..., None, None].expand(t.shape))


def factor(t: torch.Tensor, pivot: bool = True):
    """zgetf2 on a pair [..., m, n, 2]: (packed L and U, 1-based pivots int32, info int32)."""
    m, n = t.shape[-3], t.shape[-2]
    pivots, info = [], torch.zeros(t.shape[:-3], dtype=torch.int32, device=t.device)
    for j in range(min(m, n)):
        if pivot:
            below = t[..., j:, j, :]
            p = (below[..., 0].abs() + below[..., 1].abs()).argmax(-1) + j
            t = _swap_rows(t, j, p)
            pivots.append(p.to(torch.int32) + 1)
        head = t[..., j, j, :]  # [..., 2]
        zero = (head[..., 0] == 0) & (head[..., 1] == 0)
        info = torch.where((info == 0) & zero, j + 1, info)
        norm = head[..., 0] ** 2 + head[..., 1] ** 2
        inverse = torch.stack([head[..., 0], -head[..., 1]], -1) / torch.where(zero, 1, norm).unsqueeze(-1)
        inverse = torch.where(zero.unsqueeze(-1), torch.tensor([1.0, 0.0], dtype=t.dtype, device=t.device), inverse)
        column = _times(t[..., j + 1:, j, :], inverse.unsqueeze(-2))  # L's column: the entries over the pivot
        trailing = t[..., j + 1:, j + 1:, :] - _times(column.unsqueeze(-2), t[..., j:j + 1, j + 1:, :])
        below = torch.cat([t[..., j + 1:, :j, :], column.unsqueeze(-2), trailing], -2)
        t = torch.cat([t[..., :j + 1, :, :], below], -3)
    pivot_tensor = torch.stack(pivots, -1) if pivots else torch.zeros(*t.shape[:-3], 0, dtype=torch.int32,
                                                                       device=t.device)
    return t, pivot_tensor, info


def _times(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Complex product of pair tensors (broadcasting)."""
    re = a[..., 0] * b[..., 0] - a[..., 1] * b[..., 1]
    im = a[..., 0] * b[..., 1] + a[..., 1] * b[..., 0]
    return torch.stack([re, im], -1)


@register(aten.linalg_lu_factor_ex.default, computes=True)
def linalg_lu_factor_ex(out, a, *, pivot=True, check_errors=False):
    """(packed L and U, pivots, info) by LAPACK's zgetf2 on the pair (see the module docstring)."""
    lu, pivots, info = factor(a.t.to(result_dtype(out[0])), pivot)
    return [Pair(lu), pivots if pivot else stand_in(out[1]), info]


@register(aten.linalg_lu.default, computes=True)
def linalg_lu(out, a, *, pivot=True):
    """(P, L, U) with A = P L U: the factorization above, unpacked as lu_unpack unpacks it."""
    lu, pivots, _ = factor(a.t.to(result_dtype(out[1])), pivot)
    p, lower, upper = unpacked(Pair(lu), pivots if pivot else None)
    return [real_as_pair(p.to(lu.dtype)) if pivot else stand_in(out[0]), lower, upper]
