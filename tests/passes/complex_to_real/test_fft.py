"""FFT ops (torch.fft, stft, istft) rewritten as real math (DFT products, mixed radix, Bluestein),
against eager on fresh inputs.

Tolerances: relative to the output's largest magnitude, 1e-5 in float32 and 1e-10 in float64 (issue 13's
bound for n ≤ 4096); each stage of a plan is a DFT product of at most 64 (or a prime up to 256) terms.
"""

import logging

import pytest
import torch

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, assert_no_complex, export, fresh_like, ops_in

aten = torch.ops.aten
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def assert_close_to_scale(actual, expected, dtype):
    """|actual − expected| ≤ rtol · max|expected|, elementwise (see the module docstring)."""
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * expected.abs().max().item())


def check_fft(fn, *args, n_complex=0, expect_op=None, dtype=torch.float32):
    module = ComplexFn(fn, n_complex)
    ep = export(module, args)
    if expect_op is not None:
        assert expect_op in ops_in(ep), f"export produced {ops_in(ep)}, not {expect_op}"
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert not {aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default} & ops_in(new)
    fresh = tuple(fresh_like(a) for a in args)
    assert_close_to_scale(new.module()(*fresh), module(*fresh), dtype)


def real(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def pair(*shape, dtype=torch.float32):
    return torch.randn(*shape, 2, dtype=dtype)


R2C_CASES = {
    "rfft": (lambda x: torch.fft.rfft(x), (8, 16)),
    "rfft_n_dim0_ortho": (lambda x: torch.fft.rfft(x, n=20, dim=0, norm="ortho"), (12, 5)),
    "rfft_odd_forward": (lambda x: torch.fft.rfft(x, norm="forward"), (3, 15)),
    "fft_of_real": (lambda x: torch.fft.fft(x, dim=-2), (7, 4)),
    "rfft2": (lambda x: torch.fft.rfft2(x, norm="ortho"), (2, 6, 8)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", R2C_CASES, ids=list(R2C_CASES))
def test_r2c_against_eager(case, dtype):
    fn, shape = R2C_CASES[case]
    check_fft(fn, real(*shape, dtype=dtype), expect_op=aten._fft_r2c.default, dtype=dtype)


C2C_CASES = {
    "fft": (lambda z: torch.fft.fft(z), (3, 16)),
    "fft_1d_n_trimmed": (lambda z: torch.fft.fft(z, n=12), (16,)),
    "ifft_dim0_ortho": (lambda z: torch.fft.ifft(z, dim=0, norm="ortho"), (6, 4)),
    "ifft_forward": (lambda z: torch.fft.ifft(z, norm="forward"), (2, 9)),
    "fft2": (lambda z: torch.fft.fft2(z), (2, 6, 8)),
    "fftn_middle_dims": (lambda z: torch.fft.fftn(z, dim=(1, 2), norm="backward"), (2, 5, 3, 4)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", C2C_CASES, ids=list(C2C_CASES))
def test_c2c_against_eager(case, dtype):
    fn, shape = C2C_CASES[case]
    check_fft(fn, pair(*shape, dtype=dtype), n_complex=1, expect_op=aten._fft_c2c.default, dtype=dtype)


C2R_CASES = {
    "irfft": (lambda z: torch.fft.irfft(z), (3, 9)),
    "irfft_n_odd": (lambda z: torch.fft.irfft(z, n=9), (3, 5)),
    "irfft_n_forward": (lambda z: torch.fft.irfft(z, n=30, norm="forward"), (3, 16)),
    "irfft_dim0_ortho": (lambda z: torch.fft.irfft(z, dim=0, norm="ortho"), (7, 3)),
    "irfft2": (lambda z: torch.fft.irfft2(z, s=(6, 8)), (2, 6, 5)),
    "hfft": (lambda z: torch.fft.hfft(z), (2, 6)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", C2R_CASES, ids=list(C2R_CASES))
def test_c2r_against_eager(case, dtype):
    fn, shape = C2R_CASES[case]
    check_fft(fn, pair(*shape, dtype=dtype), n_complex=1, expect_op=aten._fft_c2r.default, dtype=dtype)


def test_stft_against_eager():
    window = torch.hann_window(16)
    check_fft(lambda x: torch.stft(x, 16, hop_length=4, window=window, return_complex=True), real(2, 64),
              expect_op=aten._fft_r2c.default)


def test_istft_against_eager():
    window = torch.hann_window(16)
    check_fft(lambda z: torch.istft(z, 16, hop_length=4, window=window), pair(2, 9, 17), n_complex=1,
              expect_op=aten._fft_c2r.default)


class SpectralFilter(torch.nn.Module):
    """rfft → multiply each frequency by a complex weight per channel → irfft (an FNO-style layer)."""

    def __init__(self, channels, n, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(channels, n // 2 + 1, dtype=dtype))

    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x, norm="ortho") * self.weight, n=x.shape[-1], norm="ortho")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_spectral_filter_end_to_end(dtype):
    module = SpectralFilter(4, 32, COMPLEX[dtype])
    ep = export(module, (real(2, 4, 32, dtype=dtype),))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    x = real(2, 4, 32, dtype=dtype)
    assert_close_to_scale(new.module()(x), module(x), dtype)


def test_dynamic_batch_with_static_length_is_rewritten():
    batch = torch.export.Dim("batch", min=2, max=64)
    module = ComplexFn(lambda x: torch.fft.rfft(x), 0)
    ep = export(module, (real(3, 16),), dynamic_shapes=(({0: batch},),))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    x = real(11, 16)
    assert_close_to_scale(new.module()(x), module(x), torch.float32)


def test_dynamic_transform_length_refusal_names_the_bound_to_set():
    n = torch.export.Dim("n", min=4)
    ep = export(ComplexFn(lambda z: torch.fft.fft(z), 1), (pair(2, 16),), dynamic_shapes=(({1: n},),))
    with pytest.raises(UnsupportedComplexOpError, match=r"no upper bound.*give its torch.export.Dim a max") as info:
        ReplaceComplexWithRealPass(strict=True)(ep)
    assert info.value.op == "aten._fft_c2c.default"


def test_dynamic_transform_length_above_the_largest_bound_is_refused():
    n = torch.export.Dim("n", min=4, max=1 << 24)
    ep = export(ComplexFn(lambda z: torch.fft.fft(z), 1), (pair(2, 16),), dynamic_shapes=(({1: n},),))
    with pytest.raises(UnsupportedComplexOpError, match=f"upper bound of {1 << 24}.*a max, the longest signal the program must take, at which .* ≤ {1 << 21}"):
        ReplaceComplexWithRealPass(strict=True)(ep)


class FourierLayer(torch.nn.Module):
    """A Fourier neural operator layer as written in the FNO papers' code: rfft(n), a complex zeros tensor
    of the spectrum's shape, the lowest `modes` frequencies assigned by slice (einsum with complex weights),
    irfft(n). 2-D: rfft2 and two corner slices, as FNO2d does. Issue #11 item 7 names it on torch 2.11."""

    def __init__(self, channels=4, modes=5, dims=1, dtype=torch.complex64):
        super().__init__()
        self.dims, self.modes = dims, modes
        shape = (channels, channels, modes) if dims == 1 else (channels, channels, modes, modes)
        self.w1 = torch.nn.Parameter(torch.randn(*shape, dtype=dtype) / channels)
        self.w2 = torch.nn.Parameter(torch.randn(*shape, dtype=dtype) / channels)

    def forward(self, x):
        m = self.modes
        if self.dims == 1:
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(x.shape[0], self.w1.shape[1], x.shape[-1] // 2 + 1, dtype=self.w1.dtype, device=x.device)
            out_ft[:, :, :m] = torch.einsum("bix,iox->box", x_ft[:, :, :m], self.w1)
            return torch.fft.irfft(out_ft, n=x.shape[-1])
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(x.shape[0], self.w1.shape[1], x.shape[-2], x.shape[-1] // 2 + 1, dtype=self.w1.dtype,
                             device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.w1)
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out_ft, s=(x.shape[-2], x.shape[-1]))


@pytest.mark.parametrize("dims, dtype", [(1, torch.float32), (2, torch.float32)])
def test_fourier_layer_slice_assignment_into_complex_zeros(dims, dtype):
    """Rewritten with a dynamic batch (slice_scatter into the complex zeros), against eager at two batches."""
    module = FourierLayer(dims=dims, dtype=COMPLEX[dtype])
    shape = (4, 16) if dims == 1 else (4, 12, 12)
    batch = torch.export.Dim("batch", min=1, max=16)
    ep = export(module, (real(2, *shape, dtype=dtype),), dynamic_shapes=({0: batch},))
    assert torch.ops.aten.slice_scatter.default in ops_in(ep)
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    for b in (3, 1):
        x = real(b, *shape, dtype=dtype)
        assert_close_to_scale(new.module()(x), module(x), dtype)


@pytest.mark.cuda
def test_fourier_layer_lowered_on_cuda_matches_eager(tmp_path):
    """lower(device="cuda") + load() of the 2-D layer: no fallback kernel (the torch 2.11 report was
    'aten.slice_scatter.default on complex values'), outputs as eager's CUDA ones."""
    import aotcuda

    module = FourierLayer(dims=2).cuda()
    x = torch.randn(2, 4, 12, 12, device="cuda")
    lowered = aotcuda.lower(module, (x,), device="cuda", package_path=tmp_path / "fno.pt2")
    assert lowered.fallback_kernels == []
    with lowered.load() as program:
        for _ in range(2):
            x = torch.randn(2, 4, 12, 12, device="cuda")
            assert_close_to_scale(program(x), module(x), torch.float32)
