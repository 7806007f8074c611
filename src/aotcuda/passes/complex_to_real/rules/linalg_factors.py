"""Linear algebra ops with several results, of which the unique ones have rules (through E, linalg_embedding.py):
Cholesky factors, eigenvalues of Hermitian matrices and singular values (without vectors), inverses and solves
(without the LU factors or the error code of the embedding, which are not A's), LU solves and unpacking from given
factors (P, L, U are functions of the factors: no choice is made).

A result that would be E's rather than A's (the LU factors and pivots of E(A)) is refused where the program reads
it; where it does not, a zero tensor of its shape stands in (dead code). LAPACK's error code (info, which
torch.linalg.inv/solve/cholesky check) is E(A)'s halved, rounded up: nonzero exactly when A's is (E(A) is singular,
or not positive definite, exactly when A is). For Cholesky it is A's own: when A's leading minor k is the first not
positive definite, E(A)'s first is 2k − 1 (the Schur complement of E(A_k−1) in it is the same real number). For
an LU it names the first zero pivot of E(A)'s elimination, which eager's may meet at another column.
"""

from __future__ import annotations

import operator

import torch

from aotcuda.passes.complex_to_real.pair import Pair, real_as_pair
from aotcuda.passes.complex_to_real.pair_algebra import result_dtype
from aotcuda.passes.complex_to_real.registry import register, register_where_present
from aotcuda.passes.complex_to_real.rules.linalg import matmul_pairs
from aotcuda.passes.complex_to_real.rules.linalg_embedding import (
    adjoint as adjoint_of,
    embed,
    hermitian_from,
    solve_pairs,
    solve_with_info,
    triangle,
    unembed,
)

aten = torch.ops.aten


def results_read(node: torch.fx.Node) -> set[int]:
    """Which results of a multi-result node the program reads (every one, for a use other than getitem)."""
    read = set()
    for user in node.users:
        if user.target is operator.getitem:
            read.add(user.args[1])
        else:
            return set(range(16))
    return read


def _argument(node: torch.fx.Node, index: int, name: str, default):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _no_factors_read(node: torch.fx.Node) -> str | None:
    """`torch.linalg.solve_ex(A, B)` whose LU factors or pivots are read: its solution and info have a rule.

    The factors computed through the real embedding would be the embedding's, not the complex matrix's."""
    if results_read(node) & {1, 2}:
        return ("the LU factors and pivots of a solve have no rule: those computed through the real embedding are "
                "the embedding's, not the complex matrix's")
    return None


def _halved(info: torch.Tensor) -> torch.Tensor:
    """E(A)'s info as A's (see the module docstring)."""
    return (info + 1) // 2


def _without_vectors(node: torch.fx.Node) -> str | None:
    """`torch.linalg.eigh(A)`, `torch.linalg.svd(A)` whose vectors are read: only eigen- and singular values have a rule.

    eigvalsh, svdvals, matrix_rank, cond and the matrix norms export as these ops with the vectors unread; vectors
    are unique only up to a phase each."""
    vectors = {1} if node.target is aten._linalg_eigh.default else {0, 2}
    if results_read(node) & vectors:
        return "eigen- and singular vectors are unique only up to a phase each: only the values have a rule"
    return None


def stand_in(out) -> torch.Tensor | Pair:
    """A zero tensor shaped as an unread (or empty) result."""
    if out.dtype.is_complex:
        return Pair(torch.zeros([*out.shape, 2], dtype=result_dtype(out), device=out.device))
    return torch.zeros(out.shape, dtype=out.dtype, device=out.device)


def _cholesky(a: Pair, upper: bool) -> Pair:
    """The Cholesky factor of the Hermitian matrix read from a's lower (upper) triangle: E(L) is the real Cholesky
    factor of E(A) (lower triangular, as L's diagonal is real and positive), so L is read back from it."""
    factor, info = torch.linalg.cholesky_ex(embed(hermitian_from(a, upper)))
    lower = unembed(factor)
    lower = Pair(lower.t - triangle(triangle(lower, True), False).t * torch.tensor([0.0, 1.0], dtype=a.dtype,
                                                                                     device=a.t.device))
    return (adjoint_of(lower) if upper else lower), _halved(info)


# torch 2.14 and 2.15 have no aten::cholesky (torch.cholesky was removed; torch.linalg.cholesky stays):
# torch_fixes.FIXES.
@register_where_present("aten.cholesky.default", computes=True)
def cholesky(out, a, upper=False):
    """L with A = L L^H (U with A = U^H U if upper), through E."""
    return _cholesky(a, upper)[0]


@register(aten.linalg_cholesky_ex.default, computes=True)
def linalg_cholesky_ex(out, a, *, upper=False, check_errors=False):
    """(L, info): L through E, info E(A)'s halved (the module docstring says why that is A's)."""
    return list(_cholesky(a, upper))


@register(aten.linalg_inv_ex.default, computes=True)
def linalg_inv_ex(out, a, *, check_errors=False):
    """(A⁻¹, info): A⁻¹ = E⁻¹(E(A)⁻¹), info E(A)'s halved (nonzero exactly when A is singular)."""
    inverse, info = torch.linalg.inv_ex(embed(a))
    return [unembed(inverse), _halved(info)]


@register(aten._linalg_solve_ex.default, refuses=_no_factors_read, computes=True)
def linalg_solve_ex(out, a, b, *, left=True, check_errors=False):
    """(X, LU, pivots, info) of `torch.linalg.solve`: X through E, info E(A)'s halved; LU and pivots never read.

    A batch of vectors B is solved as one-column matrices; a program reading LU or pivots is refused."""
    vector = out[0].ndim == b.ndim and b.ndim == a.ndim - 1
    if vector:
        b = Pair(b.t.unsqueeze(-2 if left else -3))
    x, info = solve_with_info(a, b, left)
    if vector:
        x = Pair(x.t.squeeze(-2 if left else -3))
    return [x, stand_in(out[1]), stand_in(out[2]), _halved(info)]


@register(aten._linalg_eigh.default, refuses=_without_vectors, computes=True)
def linalg_eigh(out, a, uplo="L", compute_v=True):
    """(eigenvalues, no vectors): E(A)'s eigenvalues are A's, each twice, ascending, so every other one."""
    values = torch.linalg.eigvalsh(embed(hermitian_from(a, upper=uplo == "U")))
    return [values[..., 0::2], stand_in(out[1])]


@register(aten._linalg_svd.default, refuses=_without_vectors, computes=True)
def linalg_svd(out, a, full_matrices=False, compute_uv=True, *, driver=None):
    """(no U, singular values, no Vh): E(A)'s singular values are A's, each twice, descending: every other one."""
    return [stand_in(out[0]), torch.linalg.svdvals(embed(a))[..., 0::2], stand_in(out[2])]


def unpacked(lu: Pair, pivots: torch.Tensor | None):
    """(P, L, U) of packed LU factors: P from the pivots alone (the real lu_unpack's, of the real part), L the
    strictly lower part plus the identity, U the upper part (P None without pivots)."""
    k = min(lu.shape[-2], lu.shape[-1])
    p = None if pivots is None else aten.lu_unpack.default(lu.re, pivots, False, True)[0]
    return p, _unit_lower(lu, k), triangle(Pair(lu.t[..., :k, :, :]), True)


def _unit_lower(lu: Pair, k: int) -> Pair:
    """L of packed factors: [..., m, k], strictly lower part of LU's first k columns plus ones on the diagonal."""
    strict = triangle(Pair(lu.t[..., :, :k, :]), False, -1).t
    m = lu.shape[-2]
    eye = torch.eye(m, k, dtype=lu.dtype, device=lu.t.device)
    return Pair(strict + torch.stack([eye, torch.zeros_like(eye)], -1))


@register(aten.lu_unpack.default, computes=True)
def lu_unpack(out, lu, pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) of packed factors, each a function of them (empty where not asked for, as eager)."""
    p, lower, upper = unpacked(lu, pivots)
    p = real_as_pair(p.to(lu.dtype)) if unpack_pivots else stand_in(out[0])
    return [p, lower, upper] if unpack_data else [p, stand_in(out[1]), stand_in(out[2])]


@register(aten.linalg_lu_solve.default, computes=True)
def linalg_lu_solve(out, lu, pivots, b, *, left=True, adjoint=False):
    """X with A X = B (A^H X = B if adjoint; X A = B if not left), A = P L U: L and U solved in turn, through E.

    As eager's two triangular solves with the given factors. Rebuilding A = P L U and solving it once lost accuracy:
    the product's rounding and a fresh factorization of A cost cond(A)·eps where eager's substitutions do not
    (test_linalg_embedding's lu_solve in complex64: 21 of 20,000 draws off complex128's answer by more than the
    tolerance where eager had none; solved factor by factor, none)."""
    p, lower, upper = unpacked(lu, pivots)
    p = real_as_pair(p.to(lu.dtype))
    if left and not adjoint:  # P L U X = B: X = U⁻¹ L⁻¹ Pᵀ B
        return solve_pairs(upper, solve_pairs(lower, matmul_pairs(adjoint_of(p), b)))
    if left:  # U^H L^H Pᵀ X = B: X = P L^-H U^-H B
        return matmul_pairs(p, solve_pairs(adjoint_of(lower), solve_pairs(adjoint_of(upper), b)))
    if not adjoint:  # X P L U = B: X = B U⁻¹ L⁻¹ Pᵀ
        return matmul_pairs(solve_pairs(lower, solve_pairs(upper, b, False), False), adjoint_of(p))
    # X U^H L^H Pᵀ = B: X = B P L^-H U^-H
    return solve_pairs(adjoint_of(upper), solve_pairs(adjoint_of(lower), matmul_pairs(b, p), False), False)
