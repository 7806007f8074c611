"""Control flow with complex subgraphs and FFTs on CUDA: each program exported with CUDA tensors,
rewritten, and compared with eager on the GPU; one program (a cond and a spectral filter) lowered with
aotcuda.lower(device="cuda") (which refuses any fallback kernel outside the allow-list, cuFFT's included)
and run through aotcuda.load. Every test here is CUDA-marked: without a
GPU they skip and say so. The CPU versions of these checks are in test_control_flow.py and test_fft.py.
"""

import pytest
import torch

import aotcuda

from .helpers import assert_matches, rewrite
from .test_control_flow import (
    ComplexMap, ComplexScan, ComplexWhileLoop, CondBothBranchesComplex, NestedCond, higher_order,
)
from .test_fft import SpectralFilter, assert_close_to_scale, check_fft

pytestmark = pytest.mark.cuda
aten = torch.ops.aten


def _pair(*shape):
    return torch.randn(*shape, 2, device="cuda")


def _signed(*shape):
    """Positive or negative with equal chance, so that both branches of a cond on the sum are taken."""
    return torch.randn(*shape, device="cuda").abs() * (1 if torch.rand(()) > 0.5 else -1)


HIGHER_ORDER_CASES = {
    "cond": (CondBothBranchesComplex, lambda: (_pair(4), _signed(4)), higher_order.cond),
    "nested_cond": (NestedCond, lambda: (_pair(3), _signed(3)), higher_order.cond),
    "while_loop": (ComplexWhileLoop, lambda: (_pair(4), torch.randint(0, 6, (1,), device="cuda")),
                   higher_order.while_loop),
    "scan": (ComplexScan, lambda: (_pair(6, 3),), higher_order.scan),
    "map": (ComplexMap, lambda: (_pair(5, 3),), higher_order.map_impl),
}


@pytest.mark.parametrize("name", list(HIGHER_ORDER_CASES))
def test_higher_order_op_rewritten_on_cuda(name):
    make_module, make_args, op = HIGHER_ORDER_CASES[name]
    module = make_module().cuda()
    _, new = rewrite(module, make_args(), expect_ops=[op])
    for _ in range(4):
        args = make_args()
        assert_matches(module(*args), new.module()(*args), torch.float32)


FFT_CASES = {  # (fn, make_args, complex args, the op export must produce)
    "r2c": (lambda x: torch.fft.rfft(x, norm="ortho"), lambda: (torch.randn(8, 64, device="cuda"),), 0,
            aten._fft_r2c.default),
    "c2c": (lambda z: torch.fft.fft(z, dim=-2), lambda: (_pair(16, 5),), 1, aten._fft_c2c.default),
    "c2r": (lambda z: torch.fft.irfft(z, n=30), lambda: (_pair(3, 16),), 1, aten._fft_c2r.default),
}


@pytest.mark.parametrize("name", list(FFT_CASES))
def test_fft_rewritten_on_cuda(name):
    fn, make_args, n_complex, op = FFT_CASES[name]
    check_fft(fn, *make_args(), n_complex=n_complex, expect_op=op)


class CondAndSpectrum(torch.nn.Module):
    """Both of this file's kinds in one program, so that one CUDA compile serves the lowered tests."""

    def __init__(self):
        super().__init__()
        self.cond = CondBothBranchesComplex()
        self.spectrum = SpectralFilter(4, 32, torch.complex64)

    def forward(self, x, y, signal):
        a, b = self.cond(x, y)
        return a, b, self.spectrum(signal)


@pytest.fixture(scope="module")
def lowered_on_cuda(tmp_path_factory):
    module = CondAndSpectrum().cuda()
    args = (_pair(4), _signed(4), torch.randn(2, 4, 32, device="cuda"))
    lowered = aotcuda.lower(module, args, device="cuda", package_path=tmp_path_factory.mktemp("cuda") / "p.pt2")
    with aotcuda.load(lowered.package_path) as program:
        yield module, program


@pytest.mark.parametrize("sign", [1, -1])
def test_cond_and_spectral_filter_lowered_on_cuda(lowered_on_cuda, sign):
    module, program = lowered_on_cuda
    for _ in range(3):
        x, y, signal = _pair(4), torch.randn(4, device="cuda").abs() * sign, torch.randn(2, 4, 32, device="cuda")
        expected, got = module(x, y, signal), program(x, y, signal)
        assert_matches(expected[:2], got[:2], torch.float32)
        assert_close_to_scale(got[2], expected[2], torch.float32)
