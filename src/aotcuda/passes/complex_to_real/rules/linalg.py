"""Linear algebra rules: mm, bmm and matmul (einsum exports as bmm/permute/view) on complex operands.

A complex product A·B is one real matmul of the interleaved pairs, so the result comes out already
interleaved: A [..., M, K, 2] read as [..., M, 2K] times the real form of B, [..., 2K, 2N], whose row
(k, re) is B[k] = (br, bi) and row (k, im) is i·B[k] = (−bi, br). That is the 4 real products of the
textbook formula in one kernel, with no stack of the two halves afterwards.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, rotate_sign
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.elementwise import cast, result_dtype

aten = torch.ops.aten


def real_matrix_of(b: Pair) -> torch.Tensor:
    """[..., K, N, 2] → [..., 2K, 2N], the real matrix that multiplies interleaved rows as B does."""
    i_times_b = b.t.flip(-1) * rotate_sign(b.dtype, b.t.device)
    k, n = b.shape[-2], b.shape[-1]
    return torch.stack([b.t, i_times_b], -3).reshape(*b.shape[:-2], 2 * k, 2 * n)


def matmul_pairs(a: Pair, b: Pair) -> Pair:
    """Complex [..., M, K] @ [..., K, N] as one real matmul (see the module docstring)."""
    m, k = a.shape[-2], a.shape[-1]
    product = torch.matmul(a.t.reshape(*a.shape[:-2], m, 2 * k), real_matrix_of(b))
    return Pair(product.unflatten(-1, (b.shape[-1], 2)))


def matmul_pair_real(a: Pair, b: torch.Tensor) -> Pair:
    """Complex [..., M, K] @ real [..., K, N]: both parts times b, parts moved next to the rows."""
    return Pair(torch.matmul(a.t.transpose(-1, -2), b).transpose(-1, -2))


def matmul_real_pair(a: torch.Tensor, b: Pair) -> Pair:
    """Real [..., M, K] @ complex [..., K, N]: b's pairs are the columns of one real [K, 2N] matrix."""
    product = torch.matmul(a, b.t.reshape(*b.shape[:-1], 2 * b.shape[-1]))
    return Pair(product.unflatten(-1, (b.shape[-1], 2)))


def matmul_any(a, b) -> Pair:
    """Matrix product of two operands of equal real dtype, at least one of them a Pair, both rank ≥ 2."""
    if isinstance(a, Pair) and isinstance(b, Pair):
        return matmul_pairs(a, b)
    if isinstance(a, Pair):
        return matmul_pair_real(a, b)
    return matmul_real_pair(a, b)


def _squeeze(x, dim: int):
    return Pair(x.t.squeeze(dim - 1)) if isinstance(x, Pair) else x.squeeze(dim)


def _unsqueeze(x, dim: int):
    return Pair(x.t.unsqueeze(dim - 1 if dim < 0 else dim)) if isinstance(x, Pair) else x.unsqueeze(dim)


@register(aten.mm.default)
def mm(out, a, b):
    """Complex matrix product, complex × complex or complex × real."""
    dtype = result_dtype(out)
    return matmul_any(cast(a, dtype), cast(b, dtype))


@register(aten.bmm.default)
def bmm(out, a, b):
    """Batched complex matrix product."""
    dtype = result_dtype(out)
    return matmul_any(cast(a, dtype), cast(b, dtype))


@register(aten.matmul.default)
def matmul(out, a, b):
    """torch.matmul, vectors included (a 1-D operand becomes a matrix and its dim is squeezed after)."""
    dtype = result_dtype(out)
    a, b = cast(a, dtype), cast(b, dtype)
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    result = matmul_any(_unsqueeze(a, 0) if a_vector else a, _unsqueeze(b, -1) if b_vector else b)
    if b_vector:
        result = _squeeze(result, -1)
    if a_vector:
        result = _squeeze(result, -2 if not b_vector else -1)
    return result
