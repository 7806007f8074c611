"""Householder QR (geqrf, householder_product, ormqr, linalg.qr in every mode), the determinants computed from it
(det, slogdet) and LU with partial pivoting (lu_factor, lu, and the solves and unpacking after them), through
export → pass → .module() against eager (LAPACK) on fresh random inputs in complex64 and complex128. The rules run
LAPACK's own algorithms, so Q and R match eager's phases included, and the LU pivots are eager's."""

import pytest
import torch

from .helpers import check, pair

CASES = {
    "geqrf_tall": (lambda a: torch.geqrf(a), [(5, 3)]),
    "geqrf_wide_batch": (lambda a: torch.geqrf(a), [(2, 3, 4)]),
    "householder_product": (lambda a, t: torch.linalg.householder_product(a, t), [(5, 3), (2,)]),
    "householder_of_geqrf": (lambda a: torch.linalg.householder_product(*torch.geqrf(a)), [(2, 4, 3)]),
    "ormqr_left": (lambda a, c: torch.ormqr(*torch.geqrf(a), c), [(4, 3), (4, 2)]),
    "ormqr_left_adjoint": (lambda a, c: torch.ormqr(*torch.geqrf(a), c, transpose=True), [(4, 4), (4, 3)]),
    "ormqr_right": (lambda a, c: torch.ormqr(*torch.geqrf(a), c, left=False), [(3, 3), (2, 3)]),
    "ormqr_right_adjoint": (lambda a, c: torch.ormqr(*torch.geqrf(a), c, left=False, transpose=True),
                            [(2, 4, 2), (2, 3, 4)]),
    "qr": (lambda a: torch.linalg.qr(a), [(5, 3)]),
    "qr_wide": (lambda a: torch.linalg.qr(a), [(2, 3, 4)]),
    "qr_complete": (lambda a: torch.linalg.qr(a, "complete"), [(5, 3)]),
    "qr_r": (lambda a: torch.linalg.qr(a, "r")[1], [(4, 4)]),
    "det": (lambda a: torch.linalg.det(a), [(4, 4)]),
    "det_batch": (lambda a: torch.linalg.det(a), [(3, 3, 3)]),
    "slogdet": (lambda a: [t * 1 for t in torch.linalg.slogdet(a)], [(4, 4)]),
    # a @ a.mH squares a's condition number, and float32 log-determinants lose digits in proportion to it: on bare
    # a @ a.mH eager's own complex64 answer strays from the complex128 one by more than 1e-5 in ~1% of draws, so the
    # identity keeps the matrix well conditioned (eigenvalues >= 1) and the comparison about the rule, not rounding.
    "logdet": (lambda a: torch.logdet(a @ a.mH + torch.eye(3)) * 1j, [(3, 3)]),
    "lu_factor": (lambda a: torch.linalg.lu_factor(a), [(4, 4)]),
    "lu_factor_ex_wide": (lambda a: torch.linalg.lu_factor_ex(a), [(2, 3, 5)]),
    "lu_factor_tall": (lambda a: torch.linalg.lu_factor(a), [(5, 3)]),
    "lu": (lambda a: torch.linalg.lu(a), [(2, 4, 4)]),
    "lu_unpack_of_lu_factor": (lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), [(4, 3)]),
    "lu_solve": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a + 4 * torch.eye(4)), b), [(4, 4), (4, 2)]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", CASES)
def test_matches_eager(name, dtype):
    fn, shapes = CASES[name]
    check(fn, *[pair(*shape, dtype=dtype) for shape in shapes], n_complex=len(shapes))
