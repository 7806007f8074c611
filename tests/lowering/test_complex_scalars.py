"""Kernels that would take a complex Python number as a Scalar argument (lowering/complex_scalars.py): AOTInductor's
C++ wrapper cannot pass one, so allow_fallbacks is no fix, and the program is refused before compiling, not after
a compile that ends in torch's bare `InductorError: AssertionError:` (a new user's trial, 2026-12-07)."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.lowering.pipeline import before_compile


class Program(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return torch.view_as_real(self.function(x))


def eigvals_to_the_imaginary_unit(x):  # linalg_eig has no rule (a proxy-executor op): the pass leaves pow complex
    return torch.linalg.eigvals(torch.view_as_complex(x)) ** 1j


def eigvals_masked_with_a_complex_number(x):  # export makes masked_fill's 2j a scalar_tensor(2j)
    return torch.linalg.eigvals(torch.view_as_complex(x)).masked_fill(torch.tensor([True, False, True]), 2j)


def spectrum_to_the_imaginary_unit(x):  # an FFT over a dynamic length without a max: C-shim kernels, no proxy op
    return torch.fft.fft(x) ** 1j


LENGTH = torch.export.Dim("length")
PROGRAMS = {  # function, example input, dynamic shapes, the kernel's words
    "pow of eigvals (proxy op)": (eigvals_to_the_imaginary_unit, (3, 3, 2), None,
                                  "aten.pow.Tensor_Scalar (node pow_1) takes 1j for its argument exponent"),
    "masked_fill of eigvals": (eigvals_masked_with_a_complex_number, (3, 3, 2), None,
                               "aten.scalar_tensor.default (node scalar_tensor) takes 2j for its argument s"),
    "pow of an FFT (C shims)": (spectrum_to_the_imaginary_unit, (4, 16), ({1: LENGTH},),
                                "aten.pow.Tensor_Scalar (node pow_1) takes 1j for its argument exponent"),
}


def lower(name, tmp_path, **options):
    function, shape, dynamic_shapes, _ = PROGRAMS[name]
    return aotcuda.lower(Program(function), (torch.randn(*shape),), device="cpu", dynamic_shapes=dynamic_shapes,
                         package_path=tmp_path / "p.pt2", **options)


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_kernel_taking_a_complex_number_is_not_advised_allow_fallbacks(name, tmp_path):
    """Before: the refusal ended `or pass allow_fallbacks=True to ship the ATen kernels` (the CLI: `hint: on the
    command line, --allow-fallbacks keeps going with these kernels`), and with it the compile failed blankly."""
    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        lower(name, tmp_path)
    message = str(caught.value)
    assert "allow_fallbacks=True is no fix here: AOTInductor's C++ wrapper passes a fallback kernel's scalar" in message
    assert PROGRAMS[name][3] in message and "self.register_buffer('" in message
    assert "pass allow_fallbacks=True" not in message and "compiles it anyway" not in message
    assert not any(advice.keyword == "allow_fallbacks" for advice in caught.value.advice)
    assert not (tmp_path / "p.pt2").exists()


def test_a_number_export_reads_from_a_buffer_again_is_advised_as_a_factor_not_a_buffer(tmp_path):
    """review39b: the buffer advice for alpha= (and full_like's or a pad's value) failed at export
    (`local_scalar_dense/item NYI for torch.complex64`: the buffer is read as a number again); there the number is to
    come in as a factor of a tensor."""
    def eigvals_added_with_a_complex_alpha(x):
        e = torch.linalg.eigvals(torch.view_as_complex(x))
        return torch.add(e, e, alpha=1j)

    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(Program(eigvals_added_with_a_complex_alpha), (torch.randn(3, 3, 2),), device="cpu",
                      package_path=tmp_path / "p.pt2")
    message = str(caught.value)
    assert "takes 1j for its argument alpha" in message and "`e + e * 1j` for `torch.add(e, e, alpha=1j)`" in message
    assert "register_buffer('value'" not in message  # (the eig refusal's own advice names a buffer of its own)


@pytest.mark.parametrize("name", PROGRAMS)
def test_with_allow_fallbacks_it_is_refused_before_compiling_with_why(name, tmp_path, monkeypatch):
    """Before: allow_fallbacks=True compiled, and the compile ended in `InductorError: AssertionError:` with nothing
    after it (torch's cpp_wrapper_cpu asserts a scalar argument is int, float or bool)."""
    from aotcuda.lowering import pipeline

    def compiled(*args, **kwargs):
        raise AssertionError("compiled: the program was not refused before compiling")

    monkeypatch.setattr(pipeline, "_compile", compiled)
    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        lower(name, tmp_path, allow_fallbacks=True)
    message = str(caught.value)
    assert message.startswith("aotcuda refuses this program before compiling: AOTInductor cannot compile it, with "
                              "allow_fallbacks=True or without.\nReplaceComplexWithRealPass left")
    assert PROGRAMS[name][3] in message and caught.value.advice == ()
    assert not (tmp_path / "p.pt2").exists()


def test_a_complex_number_where_the_op_takes_a_tensor_is_not_refused():
    """`z * (1 + 2j)` and `z + 0.5j` (mul.Tensor, add.Tensor): the number becomes a constant tensor, which
    compiles with allow_fallbacks=True (checked by hand: 0 difference from eager in torch's loader)."""
    from aotcuda.lowering.complex_scalars import complex_scalar_nodes

    def function(x):
        return torch.linalg.eigvals(torch.view_as_complex(x)) * (1 + 2j) + 0.5j

    assert complex_scalar_nodes(before_compile(Program(function), (torch.randn(3, 3, 2),)).program) == []


class HeldInABuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("exponent", torch.tensor(1j))

    def forward(self, x):
        return torch.view_as_real(torch.linalg.eigvals(torch.view_as_complex(x)) ** self.exponent)


@pytest.mark.slow
def test_the_number_held_in_a_buffer_compiles_with_allow_fallbacks_and_runs_as_eager(tmp_path):
    """The fix the refusal gives, followed: pow.Tensor_Tensor takes the buffer as a tensor (one compile, ~20 s)."""
    x = torch.randn(3, 3, 2)
    with pytest.warns(UserWarning, match="proxy executor"):  # linalg_eig: torch's loader runs it, aotcuda.load not
        lowered = aotcuda.lower(HeldInABuffer(), (x,), device="cpu", package_path=tmp_path / "b.pt2",
                                allow_fallbacks=True)
    program = torch._inductor.aoti_load_package(lowered.package_path)
    torch.testing.assert_close(program(x), HeldInABuffer()(x))
