"""The kernel form of a static-length transform: one aotcuda::fft_rows op per transformed dim
(spectral/transform.py, AOTCUDA_FFT_KERNEL), instead of the GEMM form's DFT products.

The form is taken on a non-CPU device where Triton is installed. Here, without a GPU:
- programs on the meta device (standing in for CUDA: the choice reads the traced tensor's device) are
  rewritten with fft_rows nodes and nothing else of the transform with the switch on, with DFT products
  with it off, for lengths the kernel does not cover, and for float64;
- the same rewrite made on the CPU (the device check pretends it is not one) runs the op's CPU
  implementation (torch.fft, kernels/fft_rows.py), and matches eager on every FFT case of test_fft.py,
  stft/istft, a transform along a middle dim and a dynamic batch: the rule's dims, bins, lengths and
  scales reach the op right. The kernel itself is tested in tests/kernels/test_fft_rows_kernel.py.
Triton itself is not needed: the op exists without it (its CPU implementation), so the switch's
"Triton is installed" is set true here.
"""

import pytest
import torch

import aotcuda.kernels.fft_rows  # noqa: F401 - registers the op
from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral import transform as spectral

from .helpers import ComplexFn, assert_no_complex, export, fresh_like
from .test_fft import C2C_CASES, C2R_CASES, R2C_CASES, assert_close_to_scale, pair, real

aten = torch.ops.aten
FFT_ROWS = torch.ops.aotcuda.fft_rows.default
PRODUCTS = (aten.mm.default, aten.bmm.default)


@pytest.fixture
def switch_on(monkeypatch):
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "1")
    monkeypatch.setattr(spectral, "HAVE_TRITON", True)


@pytest.fixture
def kernel_form_on_cpu(switch_on, monkeypatch):
    monkeypatch.setattr(spectral, "on_cpu", lambda x: False)


def _calls(ep, targets):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target in targets]


def _rewrite_and_compare(fn, *args, n_complex=0, dynamic_shapes=None, fresh=None):
    module = ComplexFn(fn, n_complex)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, args, dynamic_shapes))
    assert_no_complex(new)
    assert _calls(new, (FFT_ROWS,)) and not _calls(new, PRODUCTS)
    for inputs in fresh or [tuple(fresh_like(a) for a in args)]:
        assert_close_to_scale(new.module()(*inputs), module(*inputs), torch.float32)
    return new


CASES = {**{f"r2c {k}": (fn, (real(*shape),), 0) for k, (fn, shape) in R2C_CASES.items()},
         **{f"c2c {k}": (fn, (pair(*shape),), 1) for k, (fn, shape) in C2C_CASES.items()},
         **{f"c2r {k}": (fn, (pair(*shape),), 1) for k, (fn, shape) in C2R_CASES.items()}}


@pytest.mark.parametrize("name", list(CASES))
def test_every_fft_case_runs_as_the_kernel_op_and_matches_eager(kernel_form_on_cpu, name):
    fn, args, n_complex = CASES[name]
    _rewrite_and_compare(fn, *args, n_complex=n_complex)


def test_stft_and_istft_of_a_whisper_frame_run_as_the_kernel_op(kernel_form_on_cpu):
    window = torch.hann_window(400)
    _rewrite_and_compare(lambda x: torch.stft(x, 400, hop_length=160, window=window, return_complex=True),
                         real(2, 4000))
    new = _rewrite_and_compare(lambda z: torch.istft(z, 64, hop_length=16, window=torch.hann_window(64)),
                               pair(2, 33, 12), n_complex=1)
    assert len(_calls(new, (FFT_ROWS,))) == 1


def test_a_middle_dim_and_a_dynamic_batch(kernel_form_on_cpu):
    batch = torch.export.Dim("batch", min=2, max=64)
    new = _rewrite_and_compare(lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=1) * 2, n=100, dim=1),
                               real(3, 100, 5), dynamic_shapes=(({0: batch},),),
                               fresh=[(real(size, 100, 5),) for size in (2, 11, 64)])
    batch_sizes = [n.meta["val"].shape[0] for n in _calls(new, (FFT_ROWS,))]
    assert len(batch_sizes) == 2 and all(isinstance(size, torch.SymInt) for size in batch_sizes)


class RfftIrfftAndFft(torch.nn.Module):
    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1])
        return filtered, torch.view_as_real(torch.fft.fft(torch.view_as_complex(z), dim=0))


def _on_meta(n=100, m=128, dtype=torch.float32):
    args = (torch.randn(3, n, device="meta", dtype=dtype), torch.randn(m, 3, 2, device="meta", dtype=dtype))
    return ReplaceComplexWithRealPass(strict=True)(export(RfftIrfftAndFft(), args))


def test_a_non_cpu_program_takes_one_kernel_a_transform_with_the_switch_on(switch_on):
    """rfft and irfft of 100, fft of 128 along dim 0: three fft_rows nodes, each the only op of its
    transform (no product, no copy: the op reads the dim where it is and writes eager's layout)."""
    new = _on_meta()
    kernels = _calls(new, (FFT_ROWS,))
    assert [k.args[2:6] for k in kernels] == [(1, 100, 51, "r2c"), (1, 100, 100, "c2r"), (0, 128, 128, "c2c")]
    assert [n.target for n in new.graph.nodes if n.op == "call_function"] == [FFT_ROWS, aten.mul.Tensor,
                                                                              FFT_ROWS, FFT_ROWS]


def test_the_gemm_form_stays_with_the_switch_off_an_uncovered_length_or_float64(monkeypatch, switch_on):
    uncovered = _on_meta(n=67)  # a prime above 61: rfft and irfft as DFT products, the fft of 128 a kernel
    assert len(_calls(uncovered, (FFT_ROWS,))) == 1 and _calls(uncovered, PRODUCTS)
    assert len(_calls(_on_meta(n=100, m=67), (FFT_ROWS,))) == 2
    assert not _calls(_on_meta(dtype=torch.float64), (FFT_ROWS,))
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "0")
    off = _on_meta()
    assert not _calls(off, (FFT_ROWS,)) and len(_calls(off, PRODUCTS)) == 6


def test_the_entry_points_take_the_op_when_asked_on_any_device():
    """kernel=True: the op on CPU tensors (its CPU implementation), its dim where it is, scale applied."""
    z, x, h = pair(4, 64, 3), real(4, 100, 3), pair(4, 51, 3)
    zc, hc = torch.view_as_complex(z), torch.view_as_complex(h)
    assert_close_to_scale(spectral.c2c_along(z, 1, True, 0.5, kernel=True),
                          torch.view_as_real(torch.fft.ifft(zc, dim=1, norm="forward") * 0.5), torch.float32)
    assert_close_to_scale(spectral.r2c_along(x, 1, 51, 1.0, kernel=True), torch.view_as_real(torch.fft.rfft(x, dim=1)),
                          torch.float32)
    assert_close_to_scale(spectral.c2r_along(h, 1, 100, 0.01, kernel=True), torch.fft.irfft(hc, n=100, dim=1),
                          torch.float32)
    assert not spectral.kernel_form(z, 1, 64, "c2c", kernel=False)
