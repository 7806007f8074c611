"""Complex ops the OpInfo walk found that have no rule on purpose, and why: docs/ops.md's refusal list shows them,
and a refusal of one says why in its reason.

Each is a factorization whose result is a choice LAPACK makes (the order of a general matrix's eigenvalues and
the phases of its eigenvectors), one whose algorithm has no rule yet, or a layout the pass does not produce. Where the
unique part of such an op has a rule (eigenvalues of a Hermitian matrix, singular values, a solve without its
factors), the op is in the rule table and refuses only the results that are a choice (linalg_factors.py).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_LDL = ("the Bunch–Kaufman LDL factors and pivots of LAPACK's zhetrf (1×1 and 2×2 pivots chosen by a threshold "
        "test, packed as LAPACK packs them): no rule yet")

NO_RULE: dict[torch._ops.OpOverload, str] = {
    aten.linalg_ldl_factor_ex.default: _LDL,
    aten.linalg_ldl_solve.default: f"{_LDL}; the solve reads them as packed by LAPACK",
    aten.linalg_eig.default: ("eigenvalues of a general complex matrix in LAPACK's order, eigenvectors up to a phase "
                              "each: the real embedding's eigenvalues are λ and conj(λ), with no way to tell them "
                              "apart"),
    aten._to_sparse.default: "sparse layouts: programs take and AOTInductor compiles dense tensors",
    aten._to_sparse.sparse_dim: "sparse layouts: programs take and AOTInductor compiles dense tensors",
}


def reason(op: object) -> str:
    """Why an op without a rule is refused."""
    why = NO_RULE.get(op)
    return "no rule rewrites this op on complex values" + (f": {why}" if why else "")
