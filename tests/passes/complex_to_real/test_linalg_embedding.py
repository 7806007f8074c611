"""The linear algebra rules that go through the real embedding E (linalg_embedding.py, linalg_factors.py), each
through export → pass → .module() against eager on fresh random inputs in complex64 and complex128.

Matrices are made well conditioned inside the program (a multiple of the identity added, Z Z^H for a positive
definite one), so that eager's and the embedding's rounding both stay at the dtype's tolerance: a solve's error is
the condition number times epsilon, whichever order the kernel factors in.
"""

import pytest
import torch

from .helpers import check, pair

aten = torch.ops.aten


def eye(n):
    return torch.eye(n, dtype=torch.complex64)


def dominant(a):
    """a plus 2n·I: well conditioned. (With n·I, a complex Gaussian a's eigenvalues, of radius about sqrt(2n), came
    near -n in rare draws: solve and solve_right failed 1 of 1,500 and 2 of 3,200 draws in float32, eager's own
    complex64 answer off complex128's in 3 of 50,000.)"""
    return a + 2 * a.shape[-1] * torch.eye(a.shape[-1], dtype=a.dtype)


def positive_definite(a):
    return a @ a.mH + a.shape[-1] * torch.eye(a.shape[-1], dtype=a.dtype)


CASES = {
    "triangular_solve": (lambda a, b: torch.triangular_solve(b, dominant(a)), [(4, 4), (4, 3)]),
    "triangular_solve_lower_t_unit": (
        lambda a, b: torch.triangular_solve(b, dominant(a), upper=False, transpose=True, unitriangular=True),
        [(2, 4, 4), (2, 4, 2)]),
    "solve_triangular": (lambda a, b: torch.linalg.solve_triangular(dominant(a), b, upper=False), [(4, 4), (4, 3)]),
    "solve_triangular_right": (lambda a, b: torch.linalg.solve_triangular(dominant(a), b, upper=True, left=False),
                               [(3, 3), (2, 3)]),
    "cholesky_solve": (lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(positive_definite(a))),
                       [(4, 4), (4, 2)]),
    "cholesky_solve_upper": (lambda a, b: torch.cholesky_solve(b, dominant(a), upper=True), [(3, 3), (3, 2)]),
    # eager's kernel (LAPACK's potri) assumes a factor's real diagonal: a Cholesky factor
    "cholesky_inverse": (lambda a: torch.cholesky_inverse(torch.linalg.cholesky(positive_definite(a))), [(4, 4)]),
    "cholesky_inverse_upper": (
        lambda a: torch.cholesky_inverse(torch.linalg.cholesky(positive_definite(a), upper=True), upper=True),
        [(2, 3, 3)]),
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(a * 0.5), [(4, 4)]),
    "matrix_exp_batch": (lambda a: torch.linalg.matrix_exp(a * 0.5), [(2, 3, 3)]),
    "pinv": (lambda a: torch.linalg.pinv(a), [(5, 3)]),
    # a @ a[:2] took a[:2], a random 2x2, as it came: ill conditioned in some draws, eager's own complex64 pinv
    # strayed from complex128's by more than the tolerance in 74 of 20,000 (the test failed in 15 of 4,000); a
    # positive definite a[:2] (condition number a few) brings both to 0 of 20,000.
    "pinv_rtol": (lambda a: torch.linalg.pinv(a @ positive_definite(a[:2]) * 1, rtol=1e-3), [(4, 2)]),
    "pinv_hermitian": (lambda a: torch.linalg.pinv(positive_definite(a), hermitian=True), [(3, 3)]),
    "cholesky": (lambda a: torch.linalg.cholesky(positive_definite(a)), [(4, 4)]),
    "cholesky_upper": (lambda a: torch.linalg.cholesky(positive_definite(a), upper=True), [(2, 3, 3)]),
    "cholesky_old": (lambda a: torch.cholesky(positive_definite(a)), [(3, 3)]),
    "cholesky_one_triangle": (lambda a: torch.linalg.cholesky(torch.tril(positive_definite(a))), [(3, 3)]),
    "inv": (lambda a: torch.linalg.inv(dominant(a)), [(4, 4)]),
    "solve": (lambda a, b: torch.linalg.solve(dominant(a), b), [(4, 4), (4, 2)]),
    "solve_vector": (lambda a, b: torch.linalg.solve(dominant(a), b), [(2, 4, 4), (2, 4)]),
    "solve_right": (lambda a, b: torch.linalg.solve(dominant(a), b, left=False).resolve_conj(), [(3, 3), (2, 3)]),
    "eigvalsh": (lambda a: torch.linalg.eigvalsh(a + a.mH) * 1j, [(4, 4)]),
    "eigvalsh_upper": (lambda a: torch.linalg.eigvalsh(a, UPLO="U") * 1j, [(2, 3, 3)]),
    "svdvals": (lambda a: torch.linalg.svdvals(a) * 1j, [(4, 3)]),
    "matrix_norm_nuc": (lambda a: torch.linalg.matrix_norm(a, "nuc") * 1j, [(2, 3, 5)]),
}
# LU factors come from outside the program (their factorization has no rule): any packed matrix and pivots are
# factors of some A; the program makes U's diagonal dominant so that A is well conditioned.
LU_CASES = {
    "lu_unpack": (lambda lu, p: torch.lu_unpack(lu, p), [(2, 4, 4)]),
    "lu_unpack_wide": (lambda lu, p: torch.lu_unpack(lu, p), [(2, 3, 5)]),
    "lu_unpack_tall": (lambda lu, p: torch.lu_unpack(lu, p), [(2, 5, 3)]),
    "lu_unpack_no_data": (lambda lu, p: torch.lu_unpack(lu, p, unpack_data=False)[0], [(2, 4, 4)]),
    "lu_unpack_no_pivots": (lambda lu, p: torch.lu_unpack(lu, p, unpack_pivots=False)[1:], [(2, 4, 4)]),
    "lu_solve": (lambda lu, b, p: torch.linalg.lu_solve(dominant(lu), p, b), [(2, 4, 4), (2, 4, 3)]),
    "lu_solve_adjoint_right": (lambda lu, b, p: torch.linalg.lu_solve(dominant(lu), p, b, adjoint=True, left=False).resolve_conj(),
                               [(2, 4, 4), (2, 3, 4)]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", CASES)
def test_matches_eager(name, dtype):
    if name == "cholesky_old" and not hasattr(torch.ops.aten, "cholesky"):
        pytest.skip("torch.cholesky and aten::cholesky were removed in torch 2.14")
    fn, shapes = CASES[name]
    check(fn, *[pair(*shape, dtype=dtype) for shape in shapes], n_complex=len(shapes))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", LU_CASES)
def test_from_lu_factors_matches_eager(name, dtype):
    fn, shapes = LU_CASES[name]
    pivots = torch.linalg.lu_factor_ex(torch.randn(*shapes[0]))[1]  # of a real matrix: any valid pivots
    check(fn, *[pair(*shape, dtype=dtype) for shape in shapes], pivots, n_complex=len(shapes))
