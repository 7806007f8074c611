"""stft/istft with a static n_fft over a dynamic number of frames, against eager at two lengths.

Regression for issue 13: eager's strides of the r2c result are expressions like 33*Max(1, s0//16 - 3)
that the rewritten graph never computes; handing them to an op made torch 2.11's make_fx fail ("... is
not tracked with proxy"). The layout copy now derives its strides from the traced sizes (layout.py).
"""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_no_complex, export, ops_in

aten = torch.ops.aten
FFT_OPS = {aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default}


class Stft(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        s = torch.stft(x, 64, hop_length=16, window=torch.hann_window(64, device=x.device), **self.options)
        return torch.view_as_real(s) if s.is_complex() else s


class Istft(torch.nn.Module):
    def forward(self, spec):
        return torch.istft(torch.view_as_complex(spec), 64, hop_length=16, window=torch.hann_window(64))


def rewrite_dynamic(module, example, dim):
    ep = export(module, (example,), dynamic_shapes=({dim: torch.export.Dim.AUTO},))
    assert FFT_OPS & ops_in(ep)
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert not FFT_OPS & ops_in(new)
    return new


def assert_close(actual, expected):
    scale = expected.abs().max().item()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5 * scale)


STFT_OPTIONS = {
    "center_false": dict(center=False, return_complex=True),
    "center_reflect": dict(center=True, pad_mode="reflect", return_complex=True),
    "center_constant_two_sided": dict(center=True, pad_mode="constant", onesided=False, return_complex=True),
    "real_output": dict(center=False, return_complex=False),
}


@pytest.mark.parametrize("case", STFT_OPTIONS, ids=list(STFT_OPTIONS))
def test_stft_over_dynamic_frames(case):
    module = Stft(**STFT_OPTIONS[case])
    new = rewrite_dynamic(module, torch.randn(2, 1024), 1)
    for length in (400, 1733):
        x = torch.randn(2, length)
        assert_close(new.module()(x), module(x))


def test_istft_over_dynamic_frames():
    module = Istft()
    new = rewrite_dynamic(module, torch.randn(2, 33, 40, 2), 2)
    for frames in (17, 61):
        spec = torch.view_as_real(torch.stft(torch.randn(2, 16 * (frames - 1)), 64, hop_length=16,
                                             window=torch.hann_window(64), return_complex=True))
        assert_close(new.module()(spec), module(spec))
