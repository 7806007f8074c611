"""The bins of a real input's transform that are real by symmetry (index 0 or n/2 along every
transformed dim) have imaginary part +0.0, as in eager (pocketfft, cuFFT): angle() and log().imag of
them are +π, not −π, for a negative sum. Exact, against eager, on fresh negative-mean inputs, in every
form the rewrite takes (CPU kernel op, Stockham stages, GEMM plan, dynamic length)."""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import ComplexFn, export

CASES = {
    "fft n=7": (lambda x: torch.fft.fft(x).angle(), (3, 7)),
    "fft n=8": (lambda x: torch.fft.fft(x).angle(), (3, 8)),
    "fft n=9 log": (lambda x: torch.log(torch.fft.fft(x)).imag, (9,)),
    "rfft n=9": (lambda x: torch.fft.rfft(x).angle(), (2, 9)),
    "rfft n=10": (lambda x: torch.fft.rfft(x).angle(), (2, 10)),
    "rfft n=67 (Bluestein)": (lambda x: torch.fft.rfft(x).angle(), (2, 67)),
    "rfft2 5x7": (lambda x: torch.fft.rfft2(x).angle(), (5, 7)),
    "rfft2 6x8": (lambda x: torch.fft.rfft2(x).angle(), (6, 8)),
    "fft2 5x7 of real": (lambda x: torch.fft.fft2(x).angle(), (5, 7)),
    "rfftn 3x6x9 ortho": (lambda x: torch.fft.rfftn(x, norm="ortho").angle(), (3, 6, 9)),
    # a real tensor over every dim: exported as a cast to complex and a c2c (break-new, 2026-12-06: -π at (2, 0, 3))
    "fftn 4x1x6 of real": (lambda x: torch.fft.fftn(x).angle(), (4, 1, 6)),
    "ifftn 4x6 of real": (lambda x: torch.fft.ifftn(x).angle(), (4, 6)),
    "fftn dims 0, 2 of real": (lambda x: torch.fft.fftn(x.to(torch.complex64), dim=(0, 2)).angle(), (4, 3, 6)),
}
_CPU_FORMS = {"kernel": "1", "stages": "0"}


def _real_bin_values(angles, x):
    """The entries of angles at the bins real by symmetry: index 0, or n/2 for an even n, along every dim
    (a batch dim's rows are all real-input rows, so reading some of them is right too)."""
    index = tuple([0, n // 2] if n % 2 == 0 else [0] for n in x.shape)
    index = tuple(i if len(i) == 1 or i[1] < m else [0] for i, m in zip(index, angles.shape))
    return angles[torch.meshgrid(*[torch.tensor(i) for i in index], indexing="ij")]


@pytest.mark.parametrize("form", _CPU_FORMS)
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_angle_of_real_input_transform_matches_eager_at_real_bins(case, form, monkeypatch):
    monkeypatch.setenv("AOTCUDA_FFT_CPU_KERNEL", _CPU_FORMS[form])
    fn, shape = CASES[case]
    module = ComplexFn(fn, 0)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(shape),)))
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(shape) - 3  # a negative sum: the DC bin is (negative, 0), its angle ±π by the zero's sign
        got, want = new.module()(x), module(x)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert torch.equal(_real_bin_values(got, x), _real_bin_values(want, x))  # exact, by the zero's sign


def test_angle_of_dynamic_length_transform_matches_eager_at_bin_0():
    module = ComplexFn(lambda x: torch.fft.rfft(x).angle(), 0)
    n = torch.export.Dim("n", min=2, max=40)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(2, 9),), (({1: n},),)))
    for length in (7, 9, 10, 16):
        x = torch.randn(2, length) - 3
        got, want = new.module()(x), module(x)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert torch.equal(got[..., 0], want[..., 0])


def _masks_of(ep, spectrum_shape):
    """The where nodes that write a whole spectrum pair (the real bins' mask; other rules' wheres are scalars)."""
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.where.self
            and tuple(n.meta["val"].shape) == spectrum_shape]


def test_a_spectrum_only_transforms_or_magnitudes_read_is_left_as_summed():
    """irfft(rfft(x)·w) and abs(rfft(x)) read no zero's sign: no mask stands between the r2c and them (it
    would hide the r2c from the spectral fusions and cost a pass through memory); the results match eager."""
    w = torch.randn(5)

    def fn(x):
        spectrum = torch.fft.rfft(x)
        return torch.fft.irfft(spectrum * w / 2, n=9) + spectrum.abs().sum(-1, keepdim=True)

    module = ComplexFn(fn, 0)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(3, 9),)))
    assert not _masks_of(new, (3, 5, 2))
    x = torch.randn(3, 9) - 3
    torch.testing.assert_close(new.module()(x), module(x), atol=1e-5, rtol=1e-5)


def test_a_spectrum_a_transform_and_angle_both_read_has_its_real_bins_set():
    def fn(x):
        spectrum = torch.fft.rfft(x)
        return torch.fft.irfft(spectrum * 2, n=7), spectrum.angle()

    module = ComplexFn(fn, 0)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(3, 7),)))
    assert _masks_of(new, (3, 4, 2))
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(3, 7) - 3
        (filtered, angles), (want_filtered, want_angles) = new.module()(x), module(x)
        torch.testing.assert_close(filtered, want_filtered, atol=1e-5, rtol=1e-5)
        assert torch.equal(angles[..., 0], want_angles[..., 0])


def test_freeus_filter_of_a_real_tensor_has_no_mask_and_the_fftn_of_a_real_tensor_read_by_angle_has_one():
    """fftn of a real tensor exports as a cast to complex and a c2c; read by angle, its real bins are set (break-new,
    2026-12-06: −π at (2, 0, 3) of a 4x1x6 fftn where eager gives +π). FreeU's filter (fftn, fftshift, a mask,
    ifftshift, ifftn) reads the spectrum through transforms only: no mask stands before the filter's fusion."""
    def freeu(x):
        shifted = torch.fft.fftshift(torch.fft.fftn(x, dim=(-2, -1)), dim=(-2, -1)) * 0.5
        return torch.fft.ifftn(torch.fft.ifftshift(shifted, dim=(-2, -1)), dim=(-2, -1)).real

    module = ComplexFn(freeu, 0)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(2, 4, 8, 8),)))
    assert not _masks_of(new, (2, 4, 8, 8, 2))
    x = torch.randn(2, 4, 8, 8)
    torch.testing.assert_close(new.module()(x), module(x), atol=1e-5, rtol=1e-5)
    module = ComplexFn(lambda x: torch.fft.fftn(x).angle(), 0)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(4, 1, 6),)))
    assert _masks_of(new, (4, 1, 6, 2))
