"""The two forms of a static-length transform: Stockham stages on the CPU, DFT products (GEMMs) elsewhere.

Every other FFT test runs on the CPU and so checks the CPU form (spectral/stockham.py) end to end. Here:
- each radix class of the CPU form (4, 2, 3, 5, 7, 11, 13, Bluestein above 13, odd lengths of r2c/c2r),
  every kind against torch.fft eagerly in float32 and float64;
- the GEMM form (transform.gemm_*), which CUDA programs get, against torch.fft on CPU tensors: no CPU
  program reaches it any more;
- a program on the meta device (standing in for CUDA without a GPU: the choice is "CPU or not", read
  from the traced tensor's device) is rewritten with the plan's DFT products, as before the CPU form.
"""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral import stockham
from aotcuda.passes.complex_to_real.spectral import transform as spectral
from aotcuda.passes.complex_to_real.spectral.plan import cpu_radices

from .helpers import export

aten = torch.ops.aten
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])

# length → the CPU stages it takes (None: Bluestein over a power of two)
CPU_LENGTHS = {1: [], 2: [2], 8: [4, 2], 12: [4, 3], 15: [3, 5], 49: [7, 7], 11: [11], 26: [2, 13], 400: [4, 4, 5, 5],
               4096: [4] * 6, 17: None, 251: None}


def _error(actual, expected):
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def _check_kinds(n, dtype, c2c, r2c, c2r):
    """c2c forward/inverse, r2c one-sided and full, c2r against torch.fft (unnormalized)."""
    z = torch.randn(3, n, dtype=COMPLEX[dtype])
    x = torch.randn(3, n, dtype=dtype)
    h = torch.randn(3, n // 2 + 1, dtype=COMPLEX[dtype])
    cases = {
        "c2c": (c2c(torch.view_as_real(z), False), torch.view_as_real(torch.fft.fft(z))),
        "c2c inverse": (c2c(torch.view_as_real(z), True), torch.view_as_real(torch.fft.ifft(z, norm="forward"))),
        "r2c": (r2c(x, n // 2 + 1), torch.view_as_real(torch.fft.rfft(x))),
        "r2c full": (r2c(x, n), torch.view_as_real(torch.fft.fft(x))),
        "c2r": (c2r(torch.view_as_real(h), n), torch.fft.irfft(h, n=n, norm="forward")),
    }
    for kind, (actual, expected) in cases.items():
        assert actual.shape == expected.shape, kind
        error = _error(actual, expected)
        assert error <= RTOL[dtype], f"{kind} n={n}: relative error {error:.2e}"


@DTYPES
@pytest.mark.parametrize("n", list(CPU_LENGTHS))
def test_cpu_form_every_radix_and_kind(n, dtype):
    assert cpu_radices(n) == CPU_LENGTHS[n]
    _check_kinds(n, dtype, lambda z, inv: stockham.transform(z, inv, 1.0),
                 lambda x, bins: stockham.r2c(x, bins, 1.0, spectral.hermitian_spectrum),
                 lambda h, n: stockham.c2r(spectral.hermitian_half(h, n), n, 1.0, spectral.hermitian_spectrum))


@DTYPES
@pytest.mark.parametrize("n", [64, 400, 512, 251, 257], ids=["direct", "20·20", "32·16", "prime", "bluestein"])
def test_gemm_form_every_kind(n, dtype):
    _check_kinds(n, dtype, lambda z, inv: spectral.gemm_transform(z, None, inv, 1.0),
                 lambda x, bins: spectral.gemm_r2c(x, bins, 1.0), lambda h, n: spectral.gemm_c2r(h, n, 1.0))


class RfftIrfftAndFft(torch.nn.Module):
    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1])
        return filtered, torch.view_as_real(torch.fft.fft(torch.view_as_complex(z)))


def _matmuls(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target in (aten.mm.default, aten.bmm.default)]


def test_non_cpu_programs_keep_the_gemm_form(monkeypatch):
    """rfft/irfft of 100 (10·10: r2c two GEMMs, c2r two) and fft of 128 (16·8: two): six DFT products
    on the meta device; none on the CPU, where the same program runs as Stockham stages. The GEMM form is
    what a non-CPU device gets with the kernel form off (AOTCUDA_FFT_KERNEL=0, or no Triton installed);
    test_fft_kernel_form.py has the kernel form."""
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "0")
    rewritten = {}
    for device in ("meta", "cpu"):
        args = (torch.randn(3, 100, device=device), torch.randn(3, 128, 2, device=device))
        rewritten[device] = ReplaceComplexWithRealPass(strict=True)(export(RfftIrfftAndFft(), args))
    assert len(_matmuls(rewritten["meta"])) == 6
    assert not _matmuls(rewritten["cpu"])
