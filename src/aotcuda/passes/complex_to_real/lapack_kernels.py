"""What to tell a user whose program needs a LAPACK kernel that no package aotcuda.load runs can hold.

Inductor has no generated code for the factorizations, inverses, solves and eigendecompositions of
torch.linalg, and torchgen writes a C shim for only a few of them (triangular_solve, cholesky_solve,
cholesky_inverse, lu_unpack, geqrf, ormqr: ``torchgen.aoti.fallback_ops``). The others run through the proxy
executor, which aotcuda.load does not have, on every device and for real and complex values alike (a complex
rule of docs/ops.md rewrites into the real kernel, which is refused the same way).
A new user's trial (2026-12-07): torch.linalg.inv, solve, solve_triangular and eigvalsh got "rewrite that line of
the model with ops that have either", which says neither that no rewrite in torch.linalg exists nor what works.
"""

from __future__ import annotations

import torch

# The ATen op (as the refusal names it) -> what it computes, in the user's terms.
LAPACK_KERNELS = {
    "aten::linalg_inv_ex": "an inverse (torch.linalg.inv, inv_ex, Tensor.inverse)",
    "aten::_linalg_solve_ex": ("a general solve (torch.linalg.solve, solve_ex; the complex rules of "
                               "solve_triangular and triangular_solve solve through the real embedding with it)"),
    "aten::linalg_solve_triangular": "a triangular solve (torch.linalg.solve_triangular)",
    "aten::_linalg_eigh": "a Hermitian eigendecomposition (torch.linalg.eigh, eigvalsh)",
    "aten::_linalg_svd": "a singular value decomposition (torch.linalg.svd, svdvals, matrix_norm(ord=2))",
    "aten::linalg_pinv": "a pseudo-inverse through an SVD or eigh (torch.linalg.pinv)",
    "aten::linalg_cholesky_ex": "a Cholesky factorization (torch.linalg.cholesky)",
    "aten::linalg_lu_factor_ex": "an LU factorization (torch.linalg.lu_factor)",
    "aten::linalg_lu": "an LU factorization (torch.linalg.lu)",
    "aten::linalg_lu_solve": "an LU solve (torch.linalg.lu_solve)",
    "aten::_linalg_det": "a determinant through LU (torch.linalg.det)",
    "aten::_linalg_slogdet": "a log-determinant through LU (torch.linalg.slogdet)",
    "aten::linalg_eig": "a general eigendecomposition (torch.linalg.eig, eigvals)",
    "aten::linalg_qr": "a QR factorization (torch.linalg.qr)",
    "aten::linalg_householder_product": "a product of Householder reflectors (torch.linalg.householder_product)",
    "aten::linalg_ldl_factor_ex": "an LDL factorization (torch.linalg.ldl_factor, ldl_factor_ex)",
}


def called_as(node: torch.fx.Node) -> str:
    """The torch function the user's line called for node ("torch.linalg.solve_triangular"), from the name
    export records (meta["torch_fn"]); "" where unknown. A rule's node carries its user's node's meta, so a
    complex solve_triangular rewritten into _linalg_solve_ex is still named solve_triangular."""
    torch_fn = node.meta.get("torch_fn")
    if not isinstance(torch_fn, tuple) or len(torch_fn) != 2 or not isinstance(torch_fn[1], str):
        return ""
    kind, _, name = torch_fn[1].rpartition(".")
    if kind == "method_descriptor":
        return f"Tensor.{name}"
    return f"torch.linalg.{name[len('linalg_'):]}" if name.startswith("linalg_") else f"torch.{name}"


def lapack_hint(op: str, functions: list[str]) -> str:
    """The hint for a LAPACK kernel the program needs (op in LAPACK_KERNELS)."""
    called = [f for f in dict.fromkeys(functions) if f and f != f"torch.{op.split('::')[-1]}"]
    which = f"the line's {', '.join(called)} computes {op} here: " if called else ""
    return (f"{which}{LAPACK_KERNELS[op]}, a LAPACK kernel for which torch {torch.__version__} has neither "
            "generated code nor a C shim, on any device, real or complex: no package aotcuda.load runs can hold "
            "it, and no torch.linalg spelling of it avoids the kernel. Where the matrix is the same at every call (a "
            "weight, a constant), compute the result once outside forward and register it as a buffer "
            "(e.g. self.register_buffer(\"A_inv\", torch.linalg.inv(A)) in __init__, then A_inv @ b in forward)"
            + (_TRIANGULAR if op in _SOLVES else "") + "; otherwise compute it outside the program, before or "
            "after the call")


_SOLVES = ("aten::_linalg_solve_ex", "aten::linalg_solve_triangular")
_TRIANGULAR = ("; a real triangular system can call torch.triangular_solve(b, A, upper=...).solution instead, whose "
               "C shim aotcuda.load runs (ship it with allow_fallbacks=True; checked on the CPU)")


def lapack_section() -> str:
    """The section of docs/ops.md that says which linalg rules give packages aotcuda.load runs."""
    kernels = "\n".join(f"- `{op}`: {what}" for op, what in LAPACK_KERNELS.items())
    return f"""## Linear algebra: rewritten is not yet runnable

The linalg rules above rewrite complex math into real math, and most of it into the real LAPACK kernel of the
same kind. Inductor has neither generated code nor a C shim (torchgen's list, the same for every device) for
the kernels below, real or complex, so `lower()` refuses a program that holds one before compiling, on the CPU
and on CUDA alike ("... has no generated code in Inductor and no C shim in this torch"): no package
`aotcuda.load` runs can hold it. `allow_fallbacks=True` compiles it anyway, through the proxy executor, for
`torch._inductor.aoti_load_package` only. The refusal names the torch function of the user's line (a complex
`torch.linalg.solve_triangular` needs `_linalg_solve_ex`, its rule solving through the real embedding) and what
to do: where the matrix is the same at every call, compute the result once outside `forward` and register it as
a buffer; a real triangular system can call `torch.triangular_solve(b, A, upper=...).solution`, whose C shim
`aotcuda.load` runs (with `allow_fallbacks=True`; checked on the CPU).

{kernels}

Runnable in `aotcuda.load`: `torch.linalg.matrix_exp` (decomposed, real and complex), the products, norms and
elementwise linalg ops, and, real and with `allow_fallbacks=True`, the C-shim kernels `triangular_solve`,
`cholesky_solve`, `cholesky_inverse`, `lu_unpack`, `geqrf` and `ormqr`.
"""
