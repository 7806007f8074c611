"""LAPACK kernels no package aotcuda.load runs can hold: the refusal says so, names the user's function, and gives a
fix that works (a new user's trial, 2026-12-07: torch.linalg.inv, solve, solve_triangular, eigvalsh and eigvals got
"rewrite that line of the model with ops that have either", and eigvals a circular hint)."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.fallbacks import FallbackKernel
from aotcuda.passes.complex_to_real.lapack_kernels import LAPACK_KERNELS
from aotcuda.lowering.proxy_ops import _has_c_shim, _inductor_generates, proxy_executor_kernels


def _refusal(model, *inputs) -> str:
    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(model, inputs, device="cpu")
    return str(caught.value)


class Inv(torch.nn.Module):
    def forward(self, A):
        return torch.linalg.inv(A)


class SolveTriangular(torch.nn.Module):
    def forward(self, A, b):
        return torch.linalg.solve_triangular(A.triu(), b, upper=True)


class EigvalsH(torch.nn.Module):
    def forward(self, A):
        return torch.linalg.eigvalsh(A @ A.mH)


class Eigvals(torch.nn.Module):
    def forward(self, A):
        return torch.linalg.eigvals(A)


def test_every_listed_lapack_kernel_has_neither_generated_code_nor_a_c_shim_and_the_suggested_one_has_a_shim():
    """What the hint and docs/ops.md claim, checked on the installed torch: each listed op (a refusal names the op, not
    its overload) has an overload with neither, the one export leaves (linalg_pinv's default overload is a composite;
    its atol_rtol_tensor overload, which pinv's default calls, is the kernel)."""
    for name in LAPACK_KERNELS:
        packet = getattr(torch.ops.aten, name.split("::")[1])
        overloads = [getattr(packet, overload) for overload in packet.overloads()]
        assert any(not _inductor_generates(op) and not _has_c_shim(op) for op in overloads), name
    assert _has_c_shim(torch.ops.aten.triangular_solve.default)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_an_inverse_is_refused_with_the_buffer_fix_not_rewrite_that_line(dtype):
    message = _refusal(Inv(), torch.randn(4, 4, dtype=dtype) + 4 * torch.eye(4))
    assert "aten::linalg_inv_ex: the line's torch.linalg.inv computes aten::linalg_inv_ex" in message, message
    assert "no package aotcuda.load runs can hold it" in message and "register it as a buffer" in message, message
    assert "rewrite that line" not in message, message


def test_a_complex_solve_triangular_names_the_users_function_and_the_triangular_solve_fix():
    A, b = torch.randn(4, 4, dtype=torch.complex64) + 4 * torch.eye(4), torch.randn(4, 2, dtype=torch.complex64)
    message = _refusal(SolveTriangular(), A, b)
    assert "the line's torch.linalg.solve_triangular computes aten::_linalg_solve_ex here" in message, message
    assert "torch.triangular_solve(b, A, upper=...).solution" in message, message


def test_eigvalsh_is_named_as_the_user_wrote_it():
    message = _refusal(EigvalsH(), torch.randn(4, 4, dtype=torch.complex64))
    assert "the line's torch.linalg.eigvalsh computes aten::_linalg_eigh here" in message, message
    assert "triangular_solve" not in message, message


def test_the_op_the_complex_pass_refused_is_not_told_it_goes_once_the_refusal_is_fixed():
    message = _refusal(Eigvals(), torch.randn(4, 4))
    assert "once what it refused" not in message, message
    assert "aten::linalg_eig: it is the op the pass refused (above), so no change elsewhere" in message, message


def test_the_buffer_fix_leaves_no_proxy_kernel_and_gives_eagers_values():
    """The hint's recipe: the constant matrix's inverse computed once, a buffer; the program is a product."""
    torch.manual_seed(0)
    A = torch.randn(4, 4, dtype=torch.complex64) + 4 * torch.eye(4)

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("A_inv", torch.linalg.inv(A))

        def forward(self, b):
            return self.A_inv @ b

    b = torch.randn(4, 2, dtype=torch.complex64)
    ep = torch.export.export(Fixed(), (b,), strict=False).run_decompositions(decomposition_table())
    assert proxy_executor_kernels(ep, "cpu") == []
    torch.testing.assert_close(Fixed()(b), torch.linalg.solve(A, b), rtol=1e-5, atol=1e-5)


def test_inductors_lapack_info_check_is_not_described_as_a_copy_back_into_an_input():
    kernel = FallbackKernel("aten::_linalg_check_errors (proxy executor)", "aten::_linalg_check_errors")
    text = kernel.describe()
    assert "copy back" not in text and "LAPACK kernel" in text, text


def test_the_real_triangular_solve_the_hint_suggests_is_refused_with_allow_fallbacks_as_the_fix():
    """Its C shim ran in aotcuda.load with allow_fallbacks=True (CPU, rel. error 0, the new user's 4x4 system); before,
    the refusal after compiling said only "Rewrite those ops ..."."""
    from aotcuda.lowering.fallbacks import missing_kernels_message

    kernel = FallbackKernel("aoti_torch_cpu_triangular_solve", "triangular_solve", ["triangular_solve"],
                            ["tri.py:3: return torch.triangular_solve(b, A, upper=True).solution"])
    message = missing_kernels_message("forward", [kernel])
    assert "triangular_solve: a real triangular solve has no generated code but a C shim, which aotcuda.load runs" \
        in message, message


def test_allow_fallbacks_warning_does_not_ask_to_rewrite_inductors_lapack_check():
    """The new user's torch.linalg.inv with allow_fallbacks=True was told to "rewrite aten::_linalg_check_errors,
    aten::linalg_inv_ex in the model"; the check comes from no line of the model."""
    from aotcuda.lowering.pipeline import _proxy_executor_warning

    text = _proxy_executor_warning("inv.pt2", ["aten::linalg_inv_ex", "aten::_linalg_check_errors"])
    assert "rewrite aten::linalg_inv_ex in the model" in text, text
    assert "goes with it" in text, text
    assert "rewrite aten::sin in the model" in _proxy_executor_warning("p.pt2", ["aten::sin"])


class LinalgCall(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, A):
        return self.function(A)


@pytest.mark.parametrize("name, function", [
    ("aten::linalg_pinv", torch.linalg.pinv),
    ("aten::linalg_householder_product", lambda A: torch.linalg.householder_product(A, A[..., 0])),
    ("aten::linalg_ldl_factor_ex", lambda A: torch.linalg.ldl_factor(A @ A.mT).LD),
])
def test_the_other_lapack_kernels_get_the_lapack_hint_not_rewrite_that_line(name, function):
    """Review (2026-12-07): pinv (listed under _linalg_svd, but the program holds aten::linalg_pinv),
    householder_product and ldl_factor still got "rewrite that line of the model with ops that have either"."""
    message = _refusal(LinalgCall(function), torch.randn(4, 4) + 4 * torch.eye(4))
    assert f"{name}: the line's" in message and "no package aotcuda.load runs can hold it" in message, message
    assert "rewrite that line" not in message, message
