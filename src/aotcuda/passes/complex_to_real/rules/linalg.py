"""Linear algebra rules: mm, bmm and matmul (einsum exports as bmm/permute/view) on complex operands.

A complex product A·B is one real matmul of the interleaved pairs, so the result comes out already
interleaved: A [..., M, K, 2] read as [..., M, 2K] times the real form of B, [..., 2K, 2N], whose row
(k, re) is B[k] = (br, bi) and row (k, im) is i·B[k] = (−bi, br). That is the 4 real products of the
textbook formula in one kernel, with no stack of the two halves afterwards. Eager's mm/bmm/matmul take
operands of one dtype, so a complex × real product reaches the graph only with the real operand cast
to complex first (a _to_copy, which the conversion rules turn into a pair).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, rotate_sign
from aotcuda.passes.complex_to_real.pair_algebra import as_addend, cast, multiply, result_dtype
from aotcuda.passes.complex_to_real.registry import register

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


def _squeeze(x: Pair, dim: int) -> Pair:
    return Pair(x.t.squeeze(pair_dim(dim)))


def _unsqueeze(x: Pair, dim: int) -> Pair:
    return Pair(x.t.unsqueeze(pair_dim(dim)))


@register(aten.mm.default, computes=True)
def mm(out, a, b):
    """Complex matrix product (eager's mm takes two tensors of one complex dtype)."""
    return matmul_pairs(a, b)


@register(aten.bmm.default, computes=True)
def bmm(out, a, b):
    """Batched complex matrix product."""
    return matmul_pairs(a, b)


@register(aten.matmul.default, computes=True)
def matmul(out, a, b):
    """torch.matmul, vectors included (a 1-D operand becomes a matrix and its dim is squeezed after)."""
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    result = matmul_pairs(_unsqueeze(a, 0) if a_vector else a, _unsqueeze(b, -1) if b_vector else b)
    if b_vector:
        result = _squeeze(result, -1)
    if a_vector:
        result = _squeeze(result, -2 if not b_vector else -1)
    return result


# ---- beta · bias + alpha · product (BLAS's forms) ----------------------------------------------------------


def _scaled_sum(out, bias, product: Pair, beta, alpha) -> Pair:
    """beta · bias + alpha · product, alpha and beta numbers (complex ones too); bias ignored for beta = 0,
    as eager ignores it (its nans and infinities included)."""
    dtype = result_dtype(out)
    if alpha != 1:
        product = multiply(product, alpha, dtype)
    if beta == 0:
        return product
    bias = cast(bias, dtype)
    if beta != 1:
        bias = multiply(bias, beta, dtype)
    return Pair(as_addend(bias, dtype, out.device) + product.t)


@register(aten.addmm.default, computes=True)
def addmm(out, bias, a, b, *, beta=1, alpha=1):
    """beta · bias + alpha · (a @ b)."""
    return _scaled_sum(out, bias, matmul_pairs(a, b), beta, alpha)


@register(aten.baddbmm.default, computes=True)
def baddbmm(out, bias, a, b, *, beta=1, alpha=1):
    """beta · bias + alpha · (a @ b), batched."""
    return _scaled_sum(out, bias, matmul_pairs(a, b), beta, alpha)


@register(aten.addbmm.default, computes=True)
def addbmm(out, bias, a, b, *, beta=1, alpha=1):
    """beta · bias + alpha · Σ_batch (a @ b)."""
    return _scaled_sum(out, bias, Pair(matmul_pairs(a, b).t.sum(0)), beta, alpha)


@register(aten.addmv.default, computes=True)
def addmv(out, bias, a, v, *, beta=1, alpha=1):
    """beta · bias + alpha · (a @ v)."""
    return _scaled_sum(out, bias, _squeeze(matmul_pairs(a, _unsqueeze(v, -1)), -1), beta, alpha)
