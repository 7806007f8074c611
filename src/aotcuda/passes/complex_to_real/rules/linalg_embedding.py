"""Linear algebra whose result is unique, through the real embedding of complex matrices.

A complex n×m matrix A = X + iY acts on interleaved vectors (re, im, re, im, …) as the real 2n×2m matrix E(A)
whose 2×2 block (i, j) is [[x, −y], [y, x]]. E is a *-homomorphism: E(AB) = E(A)E(B), E(A^H) = E(A)^T,
E(A⁻¹) = E(A)⁻¹, E(exp A) = exp E(A), E(A⁺) = E(A)⁺; the singular values of E(A) are A's, each twice, and so
are the eigenvalues of a Hermitian A. So every op here whose result is a unique function of its operands (a solve,
an inverse, a pseudo-inverse, the matrix exponential, a Cholesky factor, eigenvalues and singular values without
vectors) is the same real op on E(A), its result read back from E's column blocks. The real kernels factor the
2n×2n matrix in their own order, so results differ from eager's by rounding only (a solve's error is the
condition number times the dtype's epsilon, as eager's). Factors that are a choice LAPACK makes follow its own
algorithm instead (QR: householder.py; LU: lu.py), or are refused (eigen- and singular vectors: linalg_factors.py;
a general matrix's eigenvalues, LDL: no_rule.py).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, conj_sign
from aotcuda.passes.complex_to_real.pair_algebra import cast, result_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.linalg import matmul_pairs

aten = torch.ops.aten


def embed(a: Pair) -> torch.Tensor:
    """[..., n, m] complex → [..., 2n, 2m] real: block (i, j) is [[x, −y], [y, x]]."""
    x, y = a.re, a.im
    blocks = torch.stack([torch.stack([x, -y], -1), torch.stack([y, x], -1)], -2)  # [..., n, m, 2, 2]
    return blocks.transpose(-3, -2).flatten(-4, -3).flatten(-2, -1)


def unembed(e: torch.Tensor) -> Pair:
    """The complex matrix whose embedding is e, read from its even columns: (E[2i, 2j], E[2i+1, 2j])."""
    n = e.shape[-2] // 2
    return Pair(e[..., 0::2].unflatten(-2, (n, 2)).transpose(-2, -1))


def columns(b: Pair) -> torch.Tensor:
    """[..., n, k] complex → [..., 2n, k] real, each column interleaved (as E(A) multiplies it)."""
    return b.t.transpose(-2, -1).flatten(-3, -2)


def uncolumns(c: torch.Tensor) -> Pair:
    return Pair(c.unflatten(-2, (c.shape[-2] // 2, 2)).transpose(-2, -1))


def adjoint(a: Pair) -> Pair:
    """A^H: the matrix dims swapped, the imaginary part negated."""
    return Pair(a.t.transpose(-3, -2) * conj_sign(a.dtype, a.t.device))


def transposed(a: Pair) -> Pair:
    return Pair(a.t.transpose(-3, -2))


def triangle(a: Pair, upper: bool, diagonal: int = 0) -> Pair:
    """triu/tril of both parts."""
    parts = a.t.movedim(-1, 0)
    return Pair((torch.triu(parts, diagonal) if upper else torch.tril(parts, diagonal)).movedim(0, -1))


def identity_like(a: Pair) -> torch.Tensor:
    """The pair of the identity, shaped like the (square) matrix a."""
    n = a.shape[-1]
    eye = torch.eye(n, dtype=a.dtype, device=a.t.device)
    return torch.stack([eye, torch.zeros_like(eye)], -1)


def hermitian_from(a: Pair, upper: bool) -> Pair:
    """The Hermitian matrix LAPACK reads from one triangle: that triangle, its adjoint across the diagonal, the
    diagonal's real part (the other triangle and the diagonal's imaginary part are never read)."""
    strict = triangle(a, upper, 1 if upper else -1)
    diagonal = triangle(triangle(a, True), False).t * torch.tensor([1.0, 0.0], dtype=a.dtype, device=a.t.device)
    return Pair(strict.t + adjoint(strict).t + diagonal)


def solve_with_info(a: Pair, b: Pair, left: bool = True) -> tuple[Pair, torch.Tensor]:
    """(X with A X = B (X A = B if not left), E(A)'s LAPACK info) through E(A) (batch dims broadcast as eager's)."""
    if not left:  # X A = B  ⇔  Aᵀ Xᵀ = Bᵀ
        x, info = solve_with_info(transposed(a), transposed(b))
        return transposed(x), info
    x, info = torch.linalg.solve_ex(embed(a), columns(b))
    return uncolumns(x), info


def solve_pairs(a: Pair, b: Pair, left: bool = True) -> Pair:
    return solve_with_info(a, b, left)[0]


def _triangular(a: Pair, upper: bool, unitriangular: bool) -> Pair:
    """The triangle a triangular solve reads (with a unit diagonal if unitriangular)."""
    if not unitriangular:
        return triangle(a, upper)
    return Pair(triangle(a, upper, 1 if upper else -1).t + identity_like(a))


@register(aten.triangular_solve.default, computes=True)
def triangular_solve(out, b, a, upper=True, transpose=False, unitriangular=False):
    """(X with A X = B, A copied), A's triangle (Aᵀ's if transpose) solved through E."""
    dtype = result_dtype(out[0])
    a, b = cast(a, dtype), cast(b, dtype)
    t = _triangular(a, upper, unitriangular)
    return [solve_pairs(transposed(t) if transpose else t, b), Pair(a.t.clone())]


@register(aten.linalg_solve_triangular.default, computes=True)
def linalg_solve_triangular(out, a, b, *, upper, left=True, unitriangular=False):
    """X with A X = B (X A = B if not left), A's triangle solved through E."""
    return solve_pairs(_triangular(a, upper, unitriangular), b, left)


def _cholesky_product(factor: Pair, upper: bool) -> Pair:
    """L L^H from the lower triangle (U^H U from the upper one), the matrix a Cholesky factor stands for."""
    f = triangle(factor, upper)
    return matmul_pairs(adjoint(f), f) if upper else matmul_pairs(f, adjoint(f))


@register(aten.cholesky_solve.default, computes=True)
def cholesky_solve(out, b, factor, upper=False):
    """X with (L L^H) X = B, the product formed and solved through E."""
    return solve_pairs(_cholesky_product(factor, upper), b)


@register(aten.cholesky_inverse.default, computes=True)
def cholesky_inverse(out, factor, upper=False):
    """(L L^H)⁻¹, the product formed and inverted through E (L with a real diagonal, as LAPACK's potri assumes).

    Eager's kernel, potri, returns no Hermitian matrix for a factor whose diagonal is not real."""
    return unembed(torch.linalg.inv(embed(_cholesky_product(factor, upper))))


@register(aten.linalg_matrix_exp.default, computes=True)
def linalg_matrix_exp(out, a):
    """exp A = E⁻¹(exp E(A))."""
    return unembed(torch.linalg.matrix_exp(embed(a)))


@register(aten.linalg_pinv.atol_rtol_tensor, computes=True)
def linalg_pinv(out, a, *, atol=None, rtol=None, hermitian=False):
    """A⁺ = E⁻¹(E(A)⁺): E(A)'s singular values are A's, each twice, so the same tolerances cut the same ones."""
    if hermitian:
        a = hermitian_from(a, upper=False)
    return unembed(torch.linalg.pinv(embed(a), atol=atol, rtol=rtol, hermitian=hermitian))
